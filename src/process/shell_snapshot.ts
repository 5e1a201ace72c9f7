/**
 * Shell snapshots (`process/start.shellSnapshot`, capability
 * `shellSnapshotV2`): a login shell's state — options, functions, aliases
 * and exported variables — is captured once per scope and restored in
 * front of every later `SHELL -lc CMD` of that scope, which then runs as
 * `SHELL -c` without a login. Commands start faster, and whatever the
 * profile prints at login is not mixed into their output.
 *
 * The capture runs the scope's first command's shell as a login shell, in
 * the same sandbox, environment and directory, with a script that prints a
 * marker and then the state in re-sourceable form (`set +o`, `shopt -p`,
 * `declare -f`, `alias -p`) and the environment (`env -0`); anything the
 * profile printed before the marker is dropped. The snapshot is a private
 * file (0600, in a 0700 directory removed when the server closes); what the
 * capturing request set itself is not part of it. On restore, variables the
 * request sets itself (`env`, `envPolicy.set`) keep the request's values; `PWD`, `OLDPWD`, `SHLVL` and `_` are never
 * restored. Bounds: 64 scopes (least recently used dropped), 8 MiB per
 * snapshot, 10 s per capture. A capture that fails, times out or is too
 * large leaves the scope without a snapshot: its commands run exactly as
 * sent (`-lc`). Only bash is snapshotted; the other shells Codex names are
 * run as sent.
 *
 * @module
 */

import type { ShellSnapshotParams } from "../protocol/types.ts";
import type { Logger } from "../log/logger.ts";

/** Runs a capture command line; resolves with its stdout, or null on failure. */
export type SnapshotCapture = (argv: string[], limits: CaptureLimits) => Promise<Uint8Array | null>;

/** What the request that starts a scope's capture sets itself. */
export type RequestEnv = Readonly<Record<string, string>>;

/** Bounds of one capture. */
export interface CaptureLimits {
  /** Most stdout bytes kept (more fails the capture). */
  readonly maxBytes: number;
  /** Kill the capture after this long. */
  readonly timeoutMs: number;
}

/** Options of {@linkcode ShellSnapshots}. */
export interface ShellSnapshotOptions {
  /** Scopes kept at once. Default 64. */
  readonly maxScopes?: number;
  /** Largest snapshot. Default 8 MiB. */
  readonly maxBytes?: number;
  /** Longest capture. Default 10 s. */
  readonly timeoutMs?: number;
  /** Where failures are reported. */
  readonly logger?: Logger;
}

const MARK = "@@exec-server shell snapshot@@";
const ENV_MARK = "@@exec-server shell snapshot env@@";
const KEEP = "__exec_server_keep";
const NEVER_RESTORED = new Set(["PWD", "OLDPWD", "SHLVL", "_"]);

/** What the login shell runs to describe itself (bash). */
const BASH_CAPTURE = [
  `printf '\\n%s\\n' '${MARK}'`,
  "set +o",
  "shopt -p",
  "declare -f",
  "alias -p",
  `printf '\\n%s\\n' '${ENV_MARK}'`,
  "env -0",
].join("\n");

/** `'text'` for a POSIX shell. */
function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The snapshot file's text from a capture's output; null without the
 * markers. Variables the capturing request set itself with the same value
 * came from that request, not from the profile, and are left out.
 */
export function snapshotScript(
  output: Uint8Array,
  requestEnv: Readonly<Record<string, string>> = {},
): string | null {
  const text = decoder.decode(output);
  const start = text.lastIndexOf(`\n${MARK}\n`);
  const envAt = text.lastIndexOf(`\n${ENV_MARK}\n`);
  if (start === -1 || envAt === -1 || envAt < start) return null;
  const state = text.slice(start + MARK.length + 2, envAt);
  const exports: string[] = [];
  for (const entry of text.slice(envAt + ENV_MARK.length + 2).split("\0")) {
    const eq = entry.indexOf("=");
    if (eq <= 0) continue;
    const name = entry.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || NEVER_RESTORED.has(name)) continue;
    const value = entry.slice(eq + 1);
    if (requestEnv[name] === value) continue;
    exports.push(
      `case $${KEEP} in *:${name}:*) ;; *) export ${name}=${quote(value)} ;; esac`,
    );
  }
  return `${state}\n${exports.join("\n")}\n`;
}

/** Is `argv` the login-shell form a snapshot replaces (`SHELL -lc CMD`)? */
export function isLoginCommand(
  argv: readonly string[],
  shell: ShellSnapshotParams["shell"],
): boolean {
  if (argv.length !== 3 || argv[1] !== "-lc") return false;
  const program = argv[0]!;
  return program === shell.path || program === shell.name;
}

interface Entry {
  readonly file: Promise<string | null>;
}

/** Snapshots by scope, for one server. */
export class ShellSnapshots {
  #entries = new Map<string, Entry>();
  #dir: Promise<string> | null = null;
  #closed = false;
  #next = 0;
  readonly #maxScopes: number;
  readonly #limits: CaptureLimits;
  readonly #logger: Logger | undefined;

  /** Creates an empty store (nothing is written until a capture). */
  constructor(options: ShellSnapshotOptions = {}) {
    this.#maxScopes = options.maxScopes ?? 64;
    this.#limits = {
      maxBytes: options.maxBytes ?? 8 * 1024 * 1024,
      timeoutMs: options.timeoutMs ?? 10_000,
    };
    this.#logger = options.logger;
  }

  /**
   * The command line to run for `argv` in scope `params`: the snapshot
   * restored in front of the command when the scope has one (captured now
   * with `capture` if it is the scope's first command), else `argv` as is.
   * `request.set` names the variables the request sets itself (they keep
   * its values); `request.env` is what it sets them to.
   */
  async commandLine(
    params: ShellSnapshotParams,
    argv: readonly string[],
    request: { readonly set: Iterable<string>; readonly env: RequestEnv },
    capture: SnapshotCapture,
  ): Promise<string[]> {
    const shell = params.shell;
    if (this.#closed || shell.name.toLowerCase() !== "bash" || !isLoginCommand(argv, shell)) {
      return [...argv];
    }
    const key = `${params.scopeId}\0${shell.path}`;
    let entry = this.#entries.get(key);
    if (entry) {
      // Most recently used last.
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    } else {
      entry = { file: this.#capture(argv[0]!, capture, request.env) };
      this.#entries.set(key, entry);
      this.#evict();
    }
    const file = await entry.file;
    if (file === null) return [...argv];
    const keep = [...request.set].filter((n) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(n));
    const prefix = [
      `${KEEP}=${quote(`:${keep.join(":")}:`)}`,
      `if ! . ${
        quote(file)
      } >/dev/null 2>&1; then printf '%s\\n' 'exec-server: the shell snapshot was not restored' >&2; fi`,
      `unset ${KEEP}`,
    ].join("\n");
    return [argv[0]!, "-c", `${prefix}\n${argv[2]!}`];
  }

  async #capture(
    shell: string,
    capture: SnapshotCapture,
    requestEnv: RequestEnv,
  ): Promise<string | null> {
    let output: Uint8Array | null;
    try {
      output = await capture([shell, "-lc", BASH_CAPTURE], this.#limits);
    } catch (error) {
      this.#logger?.warn("process.shell_snapshot_failed", { shell, error });
      return null;
    }
    const script = output ? snapshotScript(output, requestEnv) : null;
    if (script === null || this.#closed) {
      this.#logger?.warn("process.shell_snapshot_failed", {
        shell,
        error: output ? "the login shell did not describe itself" : "capture failed",
      });
      return null;
    }
    this.#dir ??= Deno.makeTempDir({ prefix: "exec-server-snapshots-" }).then(async (dir) => {
      await Deno.chmod(dir, 0o700);
      return dir;
    });
    const path = `${await this.#dir}/${this.#next++}.sh`;
    await Deno.writeFile(path, encoder.encode(script), { mode: 0o600, createNew: true });
    return path;
  }

  #evict(): void {
    while (this.#entries.size > this.#maxScopes) {
      const [key, entry] = this.#entries.entries().next().value!;
      this.#entries.delete(key);
      // A command that already has the path reads it before it is removed
      // only if it started first; a late one finds it gone and runs with a
      // warning, never with another scope's state.
      void entry.file.then(async (file) => {
        if (file) await Deno.remove(file).catch(() => {});
      });
    }
  }

  /** Number of scopes held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Removes every snapshot. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#entries.values()].map((e) => e.file));
    this.#entries.clear();
    if (this.#dir) {
      const dir = await this.#dir.catch(() => null);
      if (dir) await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  }
}
