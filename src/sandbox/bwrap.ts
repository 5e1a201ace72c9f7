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
import { isHeldMountPoint } from "./mount_points.ts";
import { type SeccompNetwork, seccompProgram } from "./seccomp.ts";

export { holdMountPoints, MountPointLease } from "./mount_points.ts";

/** Whether this server can sandbox, and if not, why. */
export interface SandboxSupport {
  /** bwrap works here. */
  readonly available: boolean;
  /** The bwrap binary. */
  readonly bwrap: string | null;
  /** The shell that opens the seccomp filter for bwrap. */
  readonly sh: string | null;
  /** Why not, with the fix. */
  readonly reason: string;
}

const FIX =
  "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)";

let support: SandboxSupport | null = null;
let probing: Promise<SandboxSupport> | null = null;

/**
 * Finds bwrap (`EXEC_SERVER_BWRAP`, else `PATH`) and checks once that it can
 * create the namespaces a sandbox needs.
 */
export function sandboxSupport(): SandboxSupport {
  if (support) return support;
  return (support = withPermissions(() => {
    const probe = probeCommand();
    if ("result" in probe) return probe.result;
    try {
      return verdict(probe, probe.command.outputSync());
    } catch (error) {
      return cannotRun(probe, error);
    }
  }));
}

/**
 * The same check without blocking (it never rejects): the CLI starts it
 * before a server's modules load and a server's first `initialize` awaits
 * it (`sandboxSupport()` then answers at once).
 */
export function probeSandboxSupport(): Promise<SandboxSupport> {
  if (support) return Promise.resolve(support);
  probing ??= (async () => {
    let found: Probe | SandboxSupport;
    try {
      found = withPermissions(() => {
        const probe = probeCommand();
        return "result" in probe ? probe.result : probe;
      });
    } catch (error) {
      // Never a rejection nobody awaits: the reason is the answer.
      found = {
        available: false,
        bwrap: null,
        sh: null,
        reason: `sandbox probe failed: ${(error as Error).message}`,
      };
    }
    if ("available" in found) return (support ??= found);
    let result: SandboxSupport;
    try {
      result = verdict(found, await found.command.output());
    } catch (error) {
      result = cannotRun(found, error);
    }
    return (support ??= result);
  })();
  return probing;
}

/** `fn`, or why sandboxing is out of reach with fewer Deno permissions than it needs. */
function withPermissions<T>(fn: () => T | SandboxSupport): T | SandboxSupport {
  try {
    return fn();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotCapable)) throw error;
    return {
      available: false,
      bwrap: null,
      sh: null,
      reason: `sandboxing needs more Deno permissions (${error.message})`,
    };
  }
}

interface Probe {
  readonly bwrap: string;
  readonly sh: string;
  readonly command: Deno.Command;
}

/** The probe to run (the whole chain a sandbox uses), or the answer without one. */
function probeCommand(): Probe | { result: SandboxSupport } {
  if (Deno.build.os !== "linux") {
    return {
      result: {
        available: false,
        bwrap: null,
        sh: null,
        reason: `sandboxing needs Linux with bubblewrap (this is ${Deno.build.os})`,
      },
    };
  }
  const configured = Deno.env.get("EXEC_SERVER_BWRAP");
  const bwrap = configured
    ? (isExecutable(configured) ? configured : null)
    : findInPath("bwrap", Deno.env.get("PATH") ?? "/usr/bin:/bin") ||
      findInPath("bwrap", "/usr/bin:/bin:/usr/local/bin");
  if (!bwrap) {
    const where = configured ? ` at ${configured} (EXEC_SERVER_BWRAP)` : "";
    return {
      result: {
        available: false,
        bwrap: null,
        sh: null,
        reason: `bwrap not found${where}: ${FIX}`,
      },
    };
  }
  const sh = findInPath("sh", "/usr/bin:/bin");
  if (!sh) {
    return { result: { available: false, bwrap, sh: null, reason: "no /bin/sh on this machine" } };
  }
  // The whole chain a sandbox uses: shell, filter on descriptor 3, namespaces.
  let filter: string | null;
  try {
    filter = seccompFile("restricted");
  } catch (error) {
    // No private directory for the filter (a read-only /tmp inside a sandbox).
    return { result: cannotRun({ bwrap, sh }, error) };
  }
  const seccomp = filter ? ["--seccomp", "3"] : [];
  const command = new Deno.Command(sh, {
    args: [
      "-c",
      'exec "$@" 3<"$0"',
      filter ?? "/dev/null",
      bwrap,
      ...NAMESPACES,
      "--unshare-pid",
      "--unshare-net",
      "--ro-bind",
      "/",
      "/",
      ...seccomp,
      "--",
      sh,
      "-c",
      ":",
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  });
  return { bwrap, sh, command };
}

function verdict(probe: Probe, output: Deno.CommandOutput): SandboxSupport {
  const { bwrap, sh } = probe;
  if (!output.success) {
    const why = new TextDecoder().decode(output.stderr).trim().slice(0, 300);
    return {
      available: false,
      bwrap,
      sh,
      reason: `${bwrap} cannot create namespaces here (${why || `exit ${output.code}`}); ` +
        "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, " +
        "or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or run as root",
    };
  }
  return { available: true, bwrap, sh, reason: "" };
}

function cannotRun(probe: Pick<Probe, "bwrap" | "sh">, error: unknown): SandboxSupport {
  return {
    available: false,
    bwrap: probe.bwrap,
    sh: probe.sh,
    reason: `cannot run ${probe.bwrap}: ${(error as Error).message}; ${FIX}`,
  };
}

function isExecutable(path: string): boolean {
  try {
    const info = Deno.statSync(path);
    return info.isFile && ((info.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

const NAMESPACES = ["--unshare-user", "--unshare-ipc"];

/** The TUN clone device, which transparent TCP capture opens in the sandbox. */
export const TUN_DEVICE = "/dev/net/tun";

/**
 * Kernel settings are read-only in a sandbox: a server running as root maps
 * its sandboxes to root, whom `/proc/sys`'s permissions let write host-wide
 * settings even without capabilities.
 */
const PROC_SYS_RO = ["--ro-bind", "/proc/sys", "/proc/sys"];

/** `isolate`: an own PID namespace; `inherit`: the server's. */
export type PidNamespace = "isolate" | "inherit";

/** Files the mount plans and filters use, created once per server in a private directory. */
let privateDir: string | null = null;
const files = new Map<string, string>();

const PRIVATE_PREFIX = "exec-server-sandbox-";

/**
 * The fields of `/proc/PID/stat` after the command name, from `state` on
 * (field 3 is index 0), or null when there is no such process. The name
 * may contain spaces and parentheses: the fields start after the last `)`.
 */
function statFields(pid: number | "self"): string[] | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/** When process `pid` started (clock ticks since boot, field 22), or null when there is no such process. */
function startTime(pid: number | "self"): string | null {
  return statFields(pid)?.[19] ?? null;
}

/** This process's PID namespace (its inode number), or null when unknown. */
function pidNamespace(): string | null {
  try {
    return /\[(\d+)\]/.exec(Deno.readLinkSync("/proc/self/ns/pid"))?.[1] ?? null;
  } catch {
    return null;
  }
}

/**
 * The name prefix of this server's private directory: its PID namespace,
 * pid and start time (who owns it, and how to tell the owner is gone).
 */
function ownerPrefix(): string {
  return `${PRIVATE_PREFIX}${pidNamespace() ?? 0}-${Deno.pid}-${startTime("self") ?? 0}-`;
}

/**
 * Removes the private directories of servers that are gone (killed before
 * they could remove their own): named `exec-server-sandbox-NS-PID-START-…`,
 * a directory is stale once no process PID started at START in PID
 * namespace NS. Only directories of this server's own PID namespace are
 * judged (from inside a sandbox's namespace, host pids are not visible); a
 * live server's is never touched; directories of another naming are left
 * alone.
 */
export function reclaimStalePrivateDirs(tmp: string): string[] {
  const removed: string[] = [];
  const namespace = pidNamespace();
  if (namespace === null) return removed;
  let entries: Iterable<Deno.DirEntry>;
  try {
    entries = Deno.readDirSync(tmp);
  } catch {
    return removed;
  }
  for (const entry of entries) {
    const owner = new RegExp(`^${PRIVATE_PREFIX}(\\d+)-(\\d+)-(\\d+)-`).exec(entry.name);
    if (!owner || !entry.isDirectory || owner[1] !== namespace) continue;
    if (startTime(Number(owner[2])) === owner[3]) continue;
    try {
      Deno.removeSync(`${tmp}/${entry.name}`, { recursive: true });
      removed.push(entry.name);
    } catch { /* another server reclaimed it first, or not ours to remove */ }
  }
  return removed;
}

function serverFile(name: string, data: Uint8Array, mode: number): string {
  const existing = files.get(name);
  if (existing) return existing;
  if (!privateDir) {
    reclaimStalePrivateDirs(Deno.env.get("TMPDIR") || "/tmp");
    const dir = Deno.makeTempDirSync({ prefix: ownerPrefix() });
    privateDir = dir;
    globalThis.addEventListener("unload", () => {
      try {
        Deno.removeSync(dir, { recursive: true });
      } catch { /* gone */ }
    });
  }
  const path = `${privateDir}/${name}`;
  Deno.writeFileSync(path, data, { mode: 0o600 });
  Deno.chmodSync(path, mode);
  files.set(name, path);
  return path;
}

/** An empty, unreadable file to mount over files a policy hides. */
function hiddenFile(): string {
  return serverFile("hidden", new Uint8Array(), 0o000);
}

/** An empty file to mount where a missing path must stay uncreatable. */
function placeholderFile(): string {
  return serverFile("placeholder", new Uint8Array(), 0o600);
}

/** The seccomp program for `network`, as a file (null: unknown architecture). */
function seccompFile(network: SeccompNetwork): string | null {
  const program = seccompProgram(network);
  return program ? serverFile(`seccomp-${network}.bpf`, program, 0o400) : null;
}

/** Whether what encloses `path` in `fs` (the deepest rule above it, else the root) is writable. */
function writableAt(fs: Exclude<SandboxPlan["fileSystem"], "unrestricted">, path: string): boolean {
  let best: { path: string; access: string } | null = null;
  for (const rule of fs.rules) {
    if (path.startsWith(`${rule.path}/`) && (!best || rule.path.length > best.path.length)) {
      best = rule;
    }
  }
  return best ? best.access === "write" : fs.root === "write";
}

/** The bwrap options (before `--`) that build `plan` with `cwd` as working directory. */
export function bwrapOptions(
  plan: SandboxPlan,
  cwd: string,
  pidNamespace: PidNamespace = "isolate",
): string[] {
  const args = ["--new-session", "--die-with-parent", ...NAMESPACES];
  if (pidNamespace === "isolate") args.push("--unshare-pid");
  if (plan.network === "restricted") args.push("--unshare-net");
  const fs = plan.fileSystem;
  if (fs === "unrestricted") {
    args.push("--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc", ...PROC_SYS_RO);
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
        for (const path of MINIMAL_PATHS) {
          // Merged-/usr systems: /bin, /lib… are symlinks into /usr.
          let info: Deno.FileInfo;
          try {
            info = Deno.lstatSync(path);
          } catch {
            continue;
          }
          if (info.isSymlink) args.push("--symlink", Deno.readLinkSync(path), path);
          else args.push("--ro-bind", path, path);
        }
        break;
      case "empty":
        args.push("--tmpfs", "/");
        break;
    }
    args.push("--dev", "/dev", "--proc", "/proc", ...PROC_SYS_RO);
    const readOnly: string[] = [];
    for (const rule of fs.rules) {
      // A read-only path where it could otherwise be written (a protected
      // `.git`/`.codex` in a workspace) may vanish between the plan and
      // bubblewrap's setup — another sandbox's mount point being removed,
      // a user's rm. Then the read-only placeholder mounted first stays
      // (it is protected as missing, as a plan made a moment later would
      // have it) instead of failing the whole launch; when it is there,
      // its read-only bind covers the placeholder.
      const vanishable = rule.access === "read" && writableAt(fs, rule.path);
      switch (rule.kind) {
        case "directory":
          if (rule.access === "write") args.push("--bind", rule.path, rule.path);
          else if (vanishable) {
            args.push("--perms", "0555", "--tmpfs", rule.path);
            args.push("--ro-bind-try", rule.path, rule.path);
            readOnly.push(rule.path);
          } else if (rule.access === "read") args.push("--ro-bind", rule.path, rule.path);
          else {
            // Traversable only when something inside is mounted again; made
            // read-only once those mount points exist.
            const nested = fs.rules.some((r) => r.path.startsWith(`${rule.path}/`));
            args.push("--perms", nested ? "0111" : "0000", "--tmpfs", rule.path);
            readOnly.push(rule.path);
          }
          break;
        case "file":
          if (rule.access === "write") args.push("--bind", rule.path, rule.path);
          else if (vanishable) {
            args.push("--ro-bind", placeholderFile(), rule.path);
            args.push("--ro-bind-try", rule.path, rule.path);
          } else if (rule.access === "read") args.push("--ro-bind", rule.path, rule.path);
          else args.push("--ro-bind", hiddenFile(), rule.path);
          break;
        case "missing-directory":
          args.push("--perms", rule.access === "none" ? "0000" : "0555", "--tmpfs", rule.path);
          readOnly.push(rule.path);
          break;
        case "missing-file":
          // As the reference: an empty file, whatever the access.
          args.push("--ro-bind", placeholderFile(), rule.path);
          break;
      }
    }
    for (const path of readOnly) args.push("--remount-ro", path);
    if (fs.root === "minimal" || fs.root === "empty") args.push("--remount-ro", "/");
  }
  args.push("--cap-drop", "ALL", "--chdir", cwd);
  return args;
}

/** What a launch adds to its plan. */
export interface LaunchExtras {
  /** Set inside the sandbox (`--setenv`), for the confined program only. */
  readonly setenv?: Readonly<Record<string, string>>;
  /**
   * A restricted network routed to the managed proxy through a bridge
   * inside the sandbox (see `proxy_route.ts`): IP sockets allowed on the
   * sandbox's own loopback.
   */
  readonly routed?: boolean;
  /**
   * The bridge also captures raw TCP (see `tcp_capture/capture.ts`): it
   * gets the TUN device and the capabilities to set it up, which it drops
   * for the program.
   */
  readonly capture?: boolean;
}

/**
 * The command line that runs `target` (resolved program first) confined by
 * `plan`: bwrap, its seccomp filter opened on descriptor 3 by a shell that
 * then becomes bwrap (Deno cannot hand a child extra descriptors).
 */
export function sandboxCommand(
  plan: SandboxPlan,
  cwd: string,
  target: readonly string[],
  pidNamespace: PidNamespace = "isolate",
  extras: LaunchExtras = {},
): string[] {
  const { bwrap, sh } = sandboxSupport();
  if (!bwrap || !sh) throw new Error("bubblewrap is not available");
  const options = bwrapOptions(plan, cwd, pidNamespace);
  for (const [k, v] of Object.entries(extras.setenv ?? {})) options.push("--setenv", k, v);
  const routed = extras.routed === true && plan.network === "restricted";
  if (routed && extras.capture) {
    options.push(
      "--cap-add",
      "CAP_NET_ADMIN",
      "--cap-add",
      "CAP_SETPCAP",
      "--dev-bind",
      TUN_DEVICE,
      TUN_DEVICE,
    );
  }
  const filter = seccompFile(routed ? "routed" : plan.network);
  if (!filter) return [bwrap, ...options, "--", ...target];
  return [
    sh,
    "-c",
    'exec "$@" 3<"$0"',
    filter,
    bwrap,
    ...options,
    "--seccomp",
    "3",
    "--",
    ...target,
  ];
}

/**
 * Paths on the host that bubblewrap creates as mount points for the plan's
 * placeholders (missing paths inside writable binds, or ones another
 * sandbox created and still holds), deepest first: pass them to
 * {@linkcode holdMountPoints}.
 */
export function createdMountPoints(plan: SandboxPlan): string[] {
  const fs = plan.fileSystem;
  if (fs === "unrestricted") return [];
  const created = new Set<string>();
  for (const rule of fs.rules) {
    if (rule.kind !== "missing-directory" && rule.kind !== "missing-file") continue;
    for (let path = rule.path; path !== "/"; path = path.slice(0, path.lastIndexOf("/")) || "/") {
      if (isHeldMountPoint(path)) {
        created.add(path);
        continue;
      }
      try {
        Deno.lstatSync(path);
        break;
      } catch {
        created.add(path);
      }
    }
  }
  return [...created].sort((a, b) => b.length - a.length);
}

/**
 * Paths of `plan` where a placeholder is, or may be, another sandbox's: the
 * mount points it creates (`created`: its {@linkcode createdMountPoints}),
 * the missing paths it protects, and the read-only paths inside writable
 * binds (which it binds if they exist). A {@linkcode MountPointLease} locks
 * them.
 */
export function contestedPaths(plan: SandboxPlan, created: readonly string[]): string[] {
  const fs = plan.fileSystem;
  if (fs === "unrestricted") return [];
  const paths = new Set(created);
  for (const rule of fs.rules) {
    const missing = rule.kind === "missing-directory" || rule.kind === "missing-file";
    if (missing || (rule.access === "read" && writableAt(fs, rule.path))) paths.add(rule.path);
  }
  return [...paths];
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
  const ppid = statFields(pid)?.[1];
  return ppid === undefined ? null : Number(ppid);
}

/**
 * A signaller for the sandbox under `bwrapPid`: delivers to the sandboxed program's group (the reaper's), not to
 * bwrap: traps run and the program decides. Before the reaper exists the
 * outer bwrap's group is signalled, which ends the sandbox.
 */
export function sandboxSignaller(bwrapPid: number): (signal: Deno.Signal) => boolean {
  let reaper: number | null = null;
  let last: number | null = null;
  return (signal) => {
    reaper = sandboxReaper(bwrapPid, reaper);
    if (reaper !== null) last = reaper;
    if (reaper !== null && signalGroup(reaper, signal)) return true;
    // bwrap is gone: the program's group may outlive it when the sandbox
    // shares the server's PID namespace. The group id cannot have been
    // reused while any member is alive, so a final SIGKILL may still go there.
    if (reaper === null && last !== null && signal === "SIGKILL" && signalGroup(last, signal)) {
      return true;
    }
    return signalGroup(bwrapPid, signal);
  };
}
