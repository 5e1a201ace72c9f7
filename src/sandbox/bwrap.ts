/**
 * Enforcement with bubblewrap (`bwrap`, Debian package `bubblewrap`): a
 * {@linkcode SandboxPlan} becomes a bwrap command line, the sandboxed
 * program runs as bwrap's grandchild in new user, PID, IPC (and, for a
 * restricted network, network) namespaces with every capability dropped.
 *
 * Process shape: the server holds the outer bwrap (own session and group,
 * `--die-with-parent`); its child is the namespace's PID 1 (bwrap's reaper,
 * `--new-session`: leader of the session and group the program runs in).
 * Killing the outer bwrap tears the whole namespace down — nothing
 * outlives it; signals meant for the program go to the reaper's group,
 * which the reaper itself (a namespace init) ignores.
 *
 * There is no fallback: when bwrap is missing or cannot create namespaces,
 * {@linkcode sandboxSupport} says why and sandboxed requests are refused.
 *
 * @module
 */

import { findInPath } from "../process/spawn.ts";
import { signalGroup } from "../process/signals.ts";
import { MINIMAL_PATHS, type SandboxPlan } from "./policy.ts";

/** Whether this server can sandbox, and if not, why. */
export interface SandboxSupport {
  /** bwrap works here. */
  readonly available: boolean;
  /** The bwrap binary. */
  readonly bwrap: string | null;
  /** Why not, with the fix. */
  readonly reason: string;
}

const FIX =
  "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)";

let support: SandboxSupport | null = null;

/**
 * Finds bwrap (`EXEC_SERVER_BWRAP`, else `PATH`) and checks once that it can
 * create the namespaces a sandbox needs.
 */
export function sandboxSupport(): SandboxSupport {
  if (support) return support;
  if (Deno.build.os !== "linux") {
    return (support = {
      available: false,
      bwrap: null,
      reason: `sandboxing needs Linux with bubblewrap (this is ${Deno.build.os})`,
    });
  }
  const bwrap = Deno.env.get("EXEC_SERVER_BWRAP") ||
    findInPath("bwrap", Deno.env.get("PATH") ?? "/usr/bin:/bin") ||
    findInPath("bwrap", "/usr/bin:/bin:/usr/local/bin");
  if (!bwrap) {
    return (support = { available: false, bwrap: null, reason: `bwrap not found: ${FIX}` });
  }
  try {
    const probe = new Deno.Command(bwrap, {
      args: [...NAMESPACES, "--unshare-net", "--ro-bind", "/", "/", "--", "/bin/true"],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).outputSync();
    if (!probe.success) {
      const why = new TextDecoder().decode(probe.stderr).trim().slice(0, 300);
      return (support = {
        available: false,
        bwrap,
        reason: `${bwrap} cannot create namespaces here (${why || `exit ${probe.code}`}); ` +
          "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, " +
          "or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or run as root",
      });
    }
  } catch (error) {
    return (support = {
      available: false,
      bwrap,
      reason: `cannot run ${bwrap}: ${(error as Error).message}; ${FIX}`,
    });
  }
  return (support = { available: true, bwrap, reason: "" });
}

const NAMESPACES = ["--unshare-user", "--unshare-pid", "--unshare-ipc"];

/** Temporary files the mount plans use, created once per server. */
let emptyFile: string | null = null;

/** An empty, unreadable file to mount over files a policy hides. */
function hiddenFile(): string {
  if (emptyFile) return emptyFile;
  const path = Deno.makeTempFileSync({ prefix: "exec-server-hidden-" });
  Deno.chmodSync(path, 0o000);
  globalThis.addEventListener("unload", () => {
    try {
      Deno.removeSync(path);
    } catch { /* gone */ }
  });
  return (emptyFile = path);
}

/** The bwrap options (before `--`) that build `plan` with `cwd` as working directory. */
export function bwrapOptions(plan: SandboxPlan, cwd: string): string[] {
  const args = ["--new-session", "--die-with-parent", ...NAMESPACES];
  if (plan.network === "restricted") args.push("--unshare-net");
  const fs = plan.fileSystem;
  if (fs === "unrestricted") {
    args.push("--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc");
  } else {
    switch (fs.root) {
      case "read":
        args.push("--ro-bind", "/", "/");
        break;
      case "write":
        args.push("--bind", "/", "/");
        break;
      case "minimal":
        args.push("--tmpfs", "/");
        for (const path of MINIMAL_PATHS) args.push("--ro-bind-try", path, path);
        break;
      case "empty":
        args.push("--tmpfs", "/");
        break;
    }
    args.push("--dev", "/dev", "--proc", "/proc");
    const hidden: string[] = [];
    for (const rule of fs.rules) {
      if (rule.access === "write") args.push("--bind", rule.path, rule.path);
      else if (rule.access === "read") args.push("--ro-bind", rule.path, rule.path);
      else if (rule.kind === "file") args.push("--ro-bind", hiddenFile(), rule.path);
      else {
        // Traversable only when something inside is mounted again; made
        // read-only once those mount points exist.
        const nested = fs.rules.some((r) => r.path.startsWith(`${rule.path}/`));
        args.push("--perms", nested ? "0111" : "0000", "--tmpfs", rule.path);
        hidden.push(rule.path);
      }
    }
    for (const path of hidden) args.push("--remount-ro", path);
    if (fs.root === "minimal" || fs.root === "empty") args.push("--remount-ro", "/");
  }
  args.push("--cap-drop", "ALL", "--chdir", cwd);
  return args;
}

/**
 * The command line that runs `target` (resolved program first) confined by
 * `plan`.
 */
export function sandboxCommand(
  plan: SandboxPlan,
  cwd: string,
  target: readonly string[],
): string[] {
  const { bwrap } = sandboxSupport();
  if (!bwrap) throw new Error("bubblewrap is not available");
  return [bwrap, ...bwrapOptions(plan, cwd), "--", ...target];
}

/**
 * The namespace's PID 1 under the outer bwrap `bwrapPid`, as a host pid, or
 * null before it exists (or after it is gone).
 */
export function sandboxReaper(bwrapPid: number, hint?: number | null): number | null {
  if (hint && parentOf(hint) === bwrapPid) return hint;
  try {
    for (const entry of Deno.readDirSync("/proc")) {
      const pid = Number(entry.name);
      if (Number.isInteger(pid) && parentOf(pid) === bwrapPid) return pid;
    }
  } catch { /* no /proc */ }
  return null;
}

function parentOf(pid: number): number | null {
  let stat: string;
  try {
    stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch {
    return null;
  }
  // pid (comm) state ppid …; comm may contain spaces and parentheses.
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

/**
 * A signaller for the sandbox under `bwrapPid`: delivers to the sandboxed program's group (the reaper's), not to
 * bwrap: traps run and the program decides. Before the reaper exists the
 * outer bwrap's group is signalled, which ends the sandbox.
 */
export function sandboxSignaller(bwrapPid: number): (signal: Deno.Signal) => boolean {
  let reaper: number | null = null;
  return (signal) => {
    reaper = sandboxReaper(bwrapPid, reaper);
    if (reaper !== null && signalGroup(reaper, signal)) return true;
    return signalGroup(bwrapPid, signal);
  };
}
