/**
 * Starting a child on a pseudo-terminal (`tty: true`).
 *
 * Approach, chosen after a spike (`../shared/docs/deno-pty.md`): allocate the
 * master through libc FFI (`pty.ts`), then start the program with
 * `Deno.Command` as `sh -c 'exec setsid -c "$@" <>"$0" >&0 2>&0' <pts> argv…`.
 * The shell opens the slave read-write on fd 0 and dups it onto 1 and 2;
 * util-linux `setsid -c` then makes the child a session leader with the pts
 * as its controlling terminal (`TIOCSCTTY`) and execs the program — no
 * extra process: the pid Deno holds is the program (pid = pgid = sid), so
 * `status` reports its real exit code or signal. `detached` is not used
 * (setsid would fork). npm PTY addons were rejected: they need native
 * builds or prebuilt binaries and stall on large writes in Deno 2.9.6.
 *
 * The program is resolved against the child's PATH (or the server's when
 * the child has none) before starting, so "not found" is a start error and
 * not terminal output. `arg0` is honoured through bash's `exec -a` (the
 * program is never confused with `arg0`). dash exports `PWD`; it is unset
 * unless the request sets it.
 *
 * Optional at run time: without Linux, FFI, `sh` or `setsid`,
 * {@linkcode ptyBackend} returns null with the reason.
 *
 * @module
 */

import { libcLoadError, loadLibc } from "../../util/libc.ts";
import { Pty } from "./pty.ts";
import {
  checkCwd,
  findInPath,
  resolveTarget,
  type SpawnedChild,
  spawnEnvironment,
  SpawnError,
  type SpawnRequest,
} from "../spawn.ts";
import { signalExitCode } from "../signals.ts";

export { loadTerminalReader } from "./pty.ts";

/** A terminal child and its master. */
export interface PtyChild {
  /** The child (stdout is the terminal's output; stderr is empty). */
  readonly child: SpawnedChild;
  /** The master, for resizes and the foreground group. */
  readonly pty: Pty;
}

/** What starts terminal children. */
export interface PtyBackend {
  /** Starts `request` on a new terminal of `rows` × `cols`. */
  spawn(request: SpawnRequest, rows: number, cols: number): PtyChild;
}

const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

let cached: { backend: PtyBackend | null; reason: string } | null = null;

interface Helpers {
  sh: string;
  setsid: string;
}

function helpers(): Helpers | string {
  const serverPath = Deno.env.get("PATH") ?? SYSTEM_PATH;
  const find = (name: string) => findInPath(name, serverPath) ?? findInPath(name, SYSTEM_PATH);
  const sh = find("sh");
  const setsid = find("setsid");
  if (!sh || !setsid) return "terminals need `sh` and util-linux `setsid` on the server";
  return { sh, setsid };
}

/**
 * The Deno permissions terminals need and do not have, named as flags
 * (`--allow-ffi` for libc, `--allow-read` and `--allow-write` to use the
 * terminal's file descriptor, `--allow-run` to start the helpers); empty
 * when all are granted.
 */
function missingPermissions(): string[] {
  const wanted: Array<[Deno.PermissionDescriptor, string]> = [
    [{ name: "ffi" }, "--allow-ffi"],
    [{ name: "read" }, "--allow-read"],
    // The master is read through node:tty, which Deno grants on a bare fd
    // only with unrestricted read and write permission.
    [{ name: "write" }, "--allow-write"],
    [{ name: "run" }, "--allow-run"],
  ];
  return wanted.filter(([descriptor]) => {
    try {
      return Deno.permissions.querySync(descriptor).state !== "granted";
    } catch {
      return true;
    }
  }).map(([, flag]) => flag);
}

function permissionReason(missing: string[]): string {
  return `terminals need Deno permissions this server lacks: run it with ${missing.join(" ")}`;
}

/**
 * Whether terminals can work here, without loading anything (libc is
 * opened at the first terminal): Linux, permissions, `sh`, `setsid`.
 */
export function ptyAvailability(): { available: boolean; reason: string } {
  if (cached) return { available: cached.backend !== null, reason: cached.reason };
  if (Deno.build.os !== "linux") {
    return {
      available: false,
      reason: `pseudo-terminals are implemented for Linux only (this is ${Deno.build.os})`,
    };
  }
  const missing = missingPermissions();
  if (missing.length > 0) return { available: false, reason: permissionReason(missing) };
  const found = helpers();
  return typeof found === "string"
    ? { available: false, reason: found }
    : { available: true, reason: "" };
}

/** The terminal backend, or null with a reason (see the module documentation). */
export function ptyBackend(): { backend: PtyBackend | null; reason: string } {
  if (cached) return cached;
  const missing = missingPermissions();
  if (missing.length > 0) return (cached = { backend: null, reason: permissionReason(missing) });
  const found = helpers();
  if (typeof found === "string") return (cached = { backend: null, reason: found });
  const libc = loadLibc();
  if (!libc) return (cached = { backend: null, reason: libcLoadError() });
  const { sh, setsid } = found;
  const backend: PtyBackend = {
    spawn(request, rows, cols) {
      checkCwd(request.cwd);
      const [program] = request.argv;
      const target = resolveTarget(request);
      const pty = new Pty(libc, rows, cols);
      const unsetPwd = "PWD" in request.env ? "" : "unset PWD; ";
      let child: Deno.ChildProcess;
      try {
        child = new Deno.Command(sh, {
          // Sandboxed: the terminal is opened here and inherited; inside,
          // `setsid -w -c` makes it the program's controlling terminal and
          // waits, so the sandbox lives as long as the program.
          args: request.launcher
            ? [
              "-c",
              `${unsetPwd}exec "$@" <>"$0" >&0 2>&0`,
              pty.slavePath,
              ...request.launcher([setsid, "-w", "-c", ...target]),
            ]
            : [
              "-c",
              `${unsetPwd}exec "${setsid}" -c "$@" <>"$0" >&0 2>&0`,
              pty.slavePath,
              ...target,
            ],
          cwd: request.cwd,
          env: spawnEnvironment(request),
          clearEnv: true,
          stdin: "null",
          stdout: "null",
          stderr: "null",
        }).spawn();
      } catch (error) {
        pty.close();
        throw new SpawnError((error as Error).message, {
          detail: `failed to spawn ${program}`,
          cause: error,
        });
      }
      const emptyStderr = new ReadableStream<Uint8Array>({ start: (c) => c.close() });
      return {
        pty,
        child: {
          pid: child.pid,
          stdout: pty.readable,
          stderr: emptyStderr,
          stdin: pty.writable,
          status: child.status.then((s) => {
            pty.releaseSlave();
            return {
              code: s.signal !== null ? signalExitCode(s.signal) : s.code,
              signal: s.signal,
            };
          }),
        },
      };
    },
  };
  return (cached = { backend, reason: "" });
}
