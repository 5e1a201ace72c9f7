/**
 * Starting a child in its own session and process group: the program is
 * resolved here ({@linkcode findInPath}: `PATH` from the child's
 * environment, as the reference), `arg0` applied through bash's `exec -a`, and the
 * whole command line run through the `setsid` program (see
 * {@linkcode spawnChild}), or `Deno.Command`'s `detached` where there is no
 * `setsid`.
 *
 * @module
 */

import { osErrorText } from "../util/os_error.ts";
import { signalExitCode } from "./signals.ts";

/** What to run. */
export interface SpawnRequest {
  /** Program and arguments (the program looked up by {@linkcode findInPath}). */
  readonly argv: readonly string[];
  /** Absolute working directory. */
  readonly cwd: string;
  /** Exactly the child's environment. */
  readonly env: Readonly<Record<string, string>>;
  /** What the child sees as `argv[0]`. */
  readonly arg0?: string | null;
  /** Pipe stdin (else `/dev/null`). */
  readonly stdin: "piped" | "null";
  /**
   * Runs the resolved command line through a wrapper (a sandbox): given
   * the program (resolved on the server) and its arguments, returns what
   * to start instead. The wrapper's own programs run on the host before
   * anything is confined, so they get the environment without what
   * {@linkcode unsafeForHelpers} names; the wrapper must hand those
   * variables to the program itself (see {@linkcode spawnEnvironment}).
   */
  readonly launcher?: (target: string[]) => string[];
}

/**
 * glibc's list of variables it ignores for set-user-id programs (they load
 * or locate code and data), and the shells' start-up variables.
 */
const UNSAFE_NAMES = new Set([
  "GCONV_PATH",
  "GETCONF_DIR",
  "HOSTALIASES",
  "LOCALDOMAIN",
  "LOCPATH",
  "MALLOC_TRACE",
  "NIS_PATH",
  "NLSPATH",
  "RESOLV_HOST_CONF",
  "RES_OPTIONS",
  "TMPDIR",
  "TZDIR",
  "BASH_ENV",
  "ENV",
  "SHELLOPTS",
  "BASHOPTS",
  "PS4",
]);

/**
 * True for a variable that would make a host-side helper (`setsid`, `sh`,
 * `bwrap`) load or run code the request chose — `LD_PRELOAD` and every
 * `LD_*`, glibc's unsecure-environment list, shell start-up variables —
 * before the program it starts is confined.
 */
export function unsafeForHelpers(name: string): boolean {
  return name.startsWith("LD_") || UNSAFE_NAMES.has(name);
}

/**
 * The environment the first program of `request` runs with: the request's
 * own, or — through a wrapper, whose helpers run on the host before anything
 * is confined — without what {@linkcode unsafeForHelpers} names.
 */
export function spawnEnvironment(request: SpawnRequest): Record<string, string> {
  const entries = Object.entries(request.env);
  return Object.fromEntries(
    request.launcher ? entries.filter(([name]) => !unsafeForHelpers(name)) : entries,
  );
}

/** The reference's text for a missing program or directory. */
const NOT_FOUND = "No such file or directory (os error 2)";

/** How a child ended. */
export interface ChildStatus {
  /** Exit code, 128+N for a death by signal N. */
  readonly code: number;
  /** The signal that killed it, if one did. */
  readonly signal: string | null;
}

/** A running child. */
export interface SpawnedChild {
  /** Process id, also its process group id. */
  readonly pid: number;
  /** Standard output. */
  readonly stdout: ReadableStream<Uint8Array>;
  /** Standard error. */
  readonly stderr: ReadableStream<Uint8Array>;
  /** Standard input, when piped. */
  readonly stdin: WritableStream<Uint8Array> | null;
  /** Resolves when the child is reaped. */
  readonly status: Promise<ChildStatus>;
}

/**
 * What kind of start failure (Codex 0.171's `data.kind` on a `process/start`
 * error): the program or working directory is missing, not permitted, any
 * other spawn failure, or the sandbox could not be had or set up.
 */
export type SpawnErrorKind =
  | "spawnNotFound"
  | "spawnPermissionDenied"
  | "spawnFailed"
  | "sandboxUnavailable"
  | "sandboxPreparation";

/** The kind of a spawn failure by its OS error (`… (os error 2)`). */
export function spawnErrorKind(message: string): SpawnErrorKind {
  const errno = /\(os error (\d+)\)\s*$/.exec(message)?.[1];
  return errno === "2" ? "spawnNotFound" : errno === "13" ? "spawnPermissionDenied" : "spawnFailed";
}

/**
 * A spawn failure. `message` is what the reference reports (usually the
 * bare OS error); `detail` names the program or directory, for logs;
 * `kind` is what the reference reports as `data.kind`.
 */
export class SpawnError extends Error {
  /** What failed, for logs (`failed to spawn ls`, `cannot use cwd /x`). */
  readonly detail: string | undefined;
  /** See {@linkcode SpawnErrorKind}. */
  readonly kind: SpawnErrorKind;
  /** Creates the error (the kind from the message's OS error unless given). */
  constructor(
    message: string,
    options?: { cause?: unknown; detail?: string; kind?: SpawnErrorKind },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SpawnError";
    this.detail = options?.detail;
    this.kind = options?.kind ?? spawnErrorKind(message);
  }
}

/** Checks that `cwd` is an existing directory; throws SpawnError otherwise. */
export function checkCwd(cwd: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(cwd);
  } catch (error) {
    throw new SpawnError(osErrorText(error), { cause: error, detail: `cannot use cwd ${cwd}` });
  }
  if (!info.isDirectory) {
    throw new SpawnError("Not a directory (os error 20)", { detail: `cannot use cwd ${cwd}` });
  }
}

/** Starts the child described by `request`. Throws {@linkcode SpawnError}. */
export function spawnChild(request: SpawnRequest): SpawnedChild {
  checkCwd(request.cwd);
  const [program] = request.argv;
  if (program === undefined) throw new SpawnError("argv must not be empty");
  try {
    const target = resolveTarget(request);
    if (request.launcher) return spawnInSession(request.launcher(target), request);
    checkExecutable(target[0]!, program);
    return spawnInSession(target, request);
  } catch (error) {
    if (error instanceof SpawnError) throw error;
    throw new SpawnError(osErrorText(error), {
      cause: error,
      detail: `failed to spawn ${program}`,
    });
  }
}

/**
 * Names known to be absent from a PATH directory, valid while the
 * directory's modification time stays what it was. A failed `stat` costs
 * far more than a successful one (an error object with its stack, a
 * formatted message): a program found in the fourth PATH directory paid
 * for three of them on every start. Bounded: at most {@linkcode ABSENT_DIRS} directories of
 * {@linkcode ABSENT_NAMES} names each.
 */
const absentIn = new Map<string, { stamp: number; names: Set<string> }>();
const ABSENT_DIRS = 64;
const ABSENT_NAMES = 256;
/**
 * Only directories unchanged for this long are trusted: a name added later
 * then moves the modification time past the one cached, even where it is
 * kept in whole seconds.
 */
const SETTLED_MS = 2000;

/** The `setsid` program, when there is one (see {@linkcode spawnInSession}). */
export const SETSID: string | null = findInPath("setsid", "/usr/bin:/bin:/usr/sbin:/sbin");

/**
 * Fails as exec would, before spawning: the child is started through a
 * wrapper, which would otherwise report a missing program as an exit code.
 */
function checkExecutable(path: string, program: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (error) {
    throw new SpawnError(osErrorText(error), {
      cause: error,
      detail: `failed to spawn ${program}`,
    });
  }
  if (!info.isFile || ((info.mode ?? 0o777) & 0o111) === 0) {
    throw new SpawnError("Permission denied (os error 13)", {
      detail: `failed to spawn ${program}`,
    });
  }
}

/**
 * Starts `argv` (program resolved) as the leader of a new session and
 * process group. Through the `setsid` program when there is one: Deno then
 * spawns with `posix_spawn` (a few hundred µs), whereas `detached: true`
 * must `fork` the whole server (its page tables: milliseconds of CPU per
 * exec that grow with the heap). The program replaces `setsid` in the same
 * process, so its pid is the child's.
 */
function spawnInSession(argv: readonly string[], request: SpawnRequest): SpawnedChild {
  const [program, ...args] = argv;
  const child = new Deno.Command(SETSID ?? program!, {
    args: SETSID ? [...argv] : args,
    cwd: request.cwd,
    env: spawnEnvironment(request),
    clearEnv: true,
    stdin: request.stdin,
    stdout: "piped",
    stderr: "piped",
    detached: SETSID === null,
  }).spawn();
  return {
    pid: child.pid,
    stdout: child.stdout,
    stderr: child.stderr,
    stdin: request.stdin === "piped" ? child.stdin : null,
    status: child.status.then((s) => ({
      code: s.signal !== null ? signalExitCode(s.signal) : s.code,
      signal: s.signal,
    })),
  };
}

const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";

/**
 * The command line to exec, resolved on the server: the program looked up
 * in the child's PATH (or the server's when the child has none; relative
 * paths against `cwd`), and `arg0` applied through bash's `exec -a`.
 * Throws {@linkcode SpawnError} when the program (or bash) is missing.
 */
export function resolveTarget(request: SpawnRequest): string[] {
  const [program, ...args] = request.argv;
  if (program === undefined) throw new SpawnError("argv must not be empty");
  const lookup = request.env.PATH ?? Deno.env.get("PATH") ?? SYSTEM_PATH;
  const resolved = program.includes("/")
    ? (program.startsWith("/") ? program : `${request.cwd}/${program}`)
    : findInPath(program, lookup);
  if (resolved === null) {
    throw new SpawnError(NOT_FOUND, { detail: `failed to spawn ${program}` });
  }
  if (request.arg0 === undefined || request.arg0 === null) return [resolved, ...args];
  const bash = findInPath("bash", Deno.env.get("PATH") ?? SYSTEM_PATH);
  if (!bash) throw new SpawnError("arg0 here needs bash on the server (exec -a)");
  return [bash, "-c", 'exec -a "$0" "$@"', request.arg0, resolved, ...args];
}

/**
 * Fails as the reference fails a terminal start, before spawning: a bare
 * name is looked up in the child's own `PATH` only (`Unable to spawn X
 * because:\nNo viable candidates found in PATH "…"`, or `…Unable to resolve
 * the PATH` without one); a path must exist and be executable (the OS
 * error, `spawnNotFound` / `spawnPermissionDenied`).
 */
export function checkTerminalProgram(request: Pick<SpawnRequest, "argv" | "env" | "cwd">): void {
  const [program] = request.argv;
  if (program === undefined) throw new SpawnError("argv must not be empty");
  if (program.includes("/")) {
    checkExecutable(program.startsWith("/") ? program : `${request.cwd}/${program}`, program);
    return;
  }
  const path = request.env.PATH;
  const why = path === undefined
    ? "Unable to resolve the PATH"
    : findInPath(program, path) === null
    ? `No viable candidates found in PATH ${JSON.stringify(path)}`
    : null;
  if (why !== null) {
    throw new SpawnError(`Unable to spawn ${program} because:\n${why}`, {
      kind: "spawnFailed",
      detail: `failed to spawn ${program}`,
    });
  }
}

/** Finds an executable `name` in a `:`-separated PATH. */
export function findInPath(name: string, path: string): string | null {
  for (const entry of path.split(":")) {
    if (entry === "") continue;
    const dir = entry.replace(/\/+$/, "") || "/";
    let stamp: number | null = null;
    try {
      const mtime = Deno.statSync(dir).mtime?.getTime();
      if (mtime !== undefined && mtime <= Date.now() - SETTLED_MS) stamp = mtime;
    } catch {
      continue; // No such directory: nothing in it.
    }
    const known = stamp === null ? undefined : absentIn.get(dir);
    if (known?.stamp === stamp && known.names.has(name)) continue;
    const candidate = dir === "/" ? `/${name}` : `${dir}/${name}`;
    try {
      const info = Deno.statSync(candidate);
      if (info.isFile && info.mode !== null && (info.mode & 0o111) !== 0) return candidate;
    } catch (error) {
      if (stamp !== null && error instanceof Deno.errors.NotFound) rememberAbsent(dir, stamp, name);
    }
  }
  return null;
}

function rememberAbsent(dir: string, stamp: number, name: string): void {
  let known = absentIn.get(dir);
  if (known?.stamp !== stamp) {
    if (!known && absentIn.size >= ABSENT_DIRS) absentIn.clear();
    known = { stamp, names: new Set() };
    absentIn.set(dir, known);
  }
  if (known.names.size >= ABSENT_NAMES) known.names.clear();
  known.names.add(name);
}
