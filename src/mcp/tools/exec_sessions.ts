/**
 * Commands for `exec_command`, `write_stdin` and `terminate_process`: run a
 * command on the exec-server, wait for it up to a deadline, and either
 * report its end or keep it as a session the model can feed and poll.
 *
 * Output is collected continuously into bounded tails (newest bytes kept,
 * dropped bytes counted), so a chatty command neither blocks nor grows
 * memory. Sessions are capped; closing the tool server terminates them.
 *
 * @module
 */

import type { ExecServerClient } from "../../client/client.ts";
import type { RemoteProcess, RemoteStatus } from "../../client/process.ts";
import { settleWithin } from "../../util/async.ts";
import { collectInto, OutputTail } from "./output_tail.ts";
import type { PathGuard } from "./path_guard.ts";

/** Limits of the exec tools. */
export interface ExecToolLimits {
  /** Running sessions at once. Default 32. */
  readonly maxSessions?: number;
  /** Deadline when the call gives none. Default 120 000 ms. */
  readonly defaultTimeoutMs?: number;
  /** Largest deadline or yield. Default 3 600 000 ms. */
  readonly maxTimeoutMs?: number;
  /** Output kept per stream when the call gives no limit. Default 64 KiB. */
  readonly defaultOutputBytes?: number;
  /** Largest output limit. Default 8 MiB. */
  readonly maxOutputBytes?: number;
}

/** What a command did (the tools' structured result). */
export interface ExecReport {
  /** Exit code once finished (128 + N after signal N), else null. */
  exit_code: number | null;
  /** The signal that ended it, if any. */
  signal: string | null;
  /** Standard output since the last report (or the terminal's output). */
  stdout: string;
  /** Standard error since the last report. */
  stderr: string;
  /** Older stdout bytes dropped to stay within the limit. */
  stdout_omitted_bytes: number;
  /** Older stderr bytes dropped. */
  stderr_omitted_bytes: number;
  /** It was killed because the deadline passed. */
  timed_out: boolean;
  /** Time since it started. */
  duration_ms: number;
  /** Set while it keeps running as a session. */
  session_id: string | null;
  /** Still running. */
  running: boolean;
}

/** Arguments of {@linkcode ExecSessions.start}. */
export interface ExecStart {
  /** A shell command line (run with `/bin/sh -c`). */
  readonly command?: string | undefined;
  /** Or a program and its arguments. */
  readonly argv?: readonly string[] | undefined;
  /** Absolute working directory. */
  readonly cwd: string;
  /** Variables added to the environment. */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** Text for stdin. */
  readonly stdin?: string | undefined;
  /** Kill after this long (unless `yieldMs`). */
  readonly timeoutMs?: number | undefined;
  /** Return after this long, leaving the command running as a session. */
  readonly yieldMs?: number | undefined;
  /** Output kept per stream. */
  readonly maxOutputBytes?: number | undefined;
  /** Run on a terminal. */
  readonly tty?: boolean | undefined;
}

/** A refusal worth showing to the model as a tool error. */
export class ExecToolError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ExecToolError";
  }
}

interface Session {
  id: string;
  process: RemoteProcess;
  stdout: OutputTail;
  stderr: OutputTail;
  pumps: Promise<void>;
  started: number;
  status: RemoteStatus | null;
  stdin: WritableStreamDefaultWriter<Uint8Array> | null;
}

const encoder = new TextEncoder();

/** The running commands of one tool server. */
export class ExecSessions {
  readonly #client: ExecServerClient;
  readonly #guard: PathGuard;
  readonly #sessions = new Map<string, Session>();
  readonly #limits: Required<ExecToolLimits>;
  #counter = 0;

  /** Runs commands through `client`; paths are checked by `guard`. */
  constructor(client: ExecServerClient, guard: PathGuard, limits: ExecToolLimits = {}) {
    this.#client = client;
    this.#guard = guard;
    this.#limits = {
      maxSessions: limits.maxSessions ?? 32,
      defaultTimeoutMs: limits.defaultTimeoutMs ?? 120_000,
      maxTimeoutMs: limits.maxTimeoutMs ?? 3_600_000,
      defaultOutputBytes: limits.defaultOutputBytes ?? 64 * 1024,
      maxOutputBytes: limits.maxOutputBytes ?? 8 * 1024 * 1024,
    };
  }

  /** Sessions still running. */
  get size(): number {
    return this.#sessions.size;
  }

  #clamp(ms: number | undefined, fallback: number): number {
    return Math.max(0, Math.min(ms ?? fallback, this.#limits.maxTimeoutMs));
  }

  /** Starts a command and waits for its end, its deadline, or its yield. */
  async start(args: ExecStart): Promise<ExecReport> {
    if ((args.command === undefined) === (args.argv === undefined)) {
      throw new ExecToolError("give exactly one of `command` (a shell line) or `argv`");
    }
    const argv = args.argv ? [...args.argv] : ["/bin/sh", "-c", args.command!];
    if (argv.length === 0 || argv[0] === "") throw new ExecToolError("`argv` must not be empty");
    if (this.#sessions.size >= this.#limits.maxSessions) {
      throw new ExecToolError(
        `too many running sessions (${this.#limits.maxSessions}); terminate some with terminate_process`,
      );
    }
    const cwd = await this.#guard.check(args.cwd, "cwd");
    const limit = Math.max(
      1,
      Math.min(args.maxOutputBytes ?? this.#limits.defaultOutputBytes, this.#limits.maxOutputBytes),
    );
    let process: RemoteProcess;
    try {
      process = await this.#client.spawn(argv, {
        cwd,
        ...(args.env ? { env: args.env } : {}),
        stdin: "piped",
        ...(args.tty ? { tty: true } : {}),
      });
    } catch (error) {
      throw new ExecToolError(`cannot start ${argv[0]}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const stdout = new OutputTail(limit);
    const stderr = new OutputTail(limit);
    const session: Session = {
      id: `s${++this.#counter}`,
      process,
      stdout,
      stderr,
      pumps: Promise.all([
        collectInto(process.stdout, stdout),
        args.tty ? Promise.resolve() : collectInto(process.stderr, stderr),
      ]).then(() => {}),
      started: performance.now(),
      status: null,
      stdin: process.stdin.getWriter(),
    };
    process.status.then((s) => (session.status = s), () => {});
    this.#sessions.set(session.id, session);
    const interactive = args.yieldMs !== undefined;
    if (args.stdin !== undefined && args.stdin !== "") {
      await session.stdin!.write(encoder.encode(args.stdin)).catch(() => {});
    }
    if (!interactive) await this.#closeStdin(session);
    const wait = interactive
      ? this.#clamp(args.yieldMs, 0)
      : this.#clamp(args.timeoutMs, this.#limits.defaultTimeoutMs);
    return await this.#settle(session, wait, !interactive);
  }

  /** Writes `chars` (may be empty: a poll), then waits up to `yieldMs`. */
  async write(
    sessionId: string,
    chars: string,
    yieldMs: number | undefined,
    closeStdin = false,
  ): Promise<ExecReport> {
    const session = this.#get(sessionId);
    if (chars !== "") {
      if (!session.stdin) throw new ExecToolError(`session ${sessionId} has no open stdin`);
      try {
        await session.stdin.write(encoder.encode(chars));
      } catch (error) {
        throw new ExecToolError(
          `cannot write to session ${sessionId}: ${(error as Error).message}`,
        );
      }
    }
    if (closeStdin) await this.#closeStdin(session);
    return await this.#settle(session, this.#clamp(yieldMs, 1000), false);
  }

  /** Kills a session's process group and reports its end. */
  async terminate(sessionId: string): Promise<ExecReport> {
    const session = this.#get(sessionId);
    await session.process.terminate(1000).catch(() => {});
    return await this.#settle(session, 5000, false);
  }

  /** Terminates every session. */
  async closeAll(): Promise<void> {
    const all = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.allSettled(all.map(async (s) => {
      await s.process.terminate().catch(() => {});
      await settleWithin(s.pumps, 2000);
    }));
  }

  #get(sessionId: string): Session {
    const session = this.#sessions.get(sessionId);
    if (!session) {
      throw new ExecToolError(
        `unknown session ${sessionId} (finished sessions are forgotten once reported)`,
      );
    }
    return session;
  }

  async #closeStdin(session: Session): Promise<void> {
    const writer = session.stdin;
    session.stdin = null;
    await writer?.close().catch(() => {});
  }

  async #settle(session: Session, waitMs: number, killOnDeadline: boolean): Promise<ExecReport> {
    let finished = await settleWithin(session.process.done, waitMs);
    let timedOut = false;
    if (!finished && killOnDeadline) {
      timedOut = true;
      await session.process.terminate().catch(() => {});
      finished = await settleWithin(session.process.done, 5000);
    }
    if (finished) {
      await settleWithin(session.pumps, 1000);
      this.#sessions.delete(session.id);
    }
    const out = session.stdout.take();
    const err = session.stderr.take();
    return {
      exit_code: finished ? session.status?.code ?? null : null,
      signal: finished ? session.status?.signal ?? null : null,
      stdout: out.text,
      stderr: err.text,
      stdout_omitted_bytes: out.omittedBytes,
      stderr_omitted_bytes: err.omittedBytes,
      timed_out: timedOut,
      duration_ms: Math.round(performance.now() - session.started),
      session_id: finished ? null : session.id,
      running: !finished,
    };
  }
}

/** A report as text for the model. */
export function renderReport(report: ExecReport): string {
  const parts: string[] = [];
  const seconds = (report.duration_ms / 1000).toFixed(1);
  if (report.running) {
    parts.push(
      `still running as session ${report.session_id} after ${seconds} s ` +
        "(write_stdin sends input or polls; terminate_process stops it)",
    );
  } else if (report.timed_out) {
    parts.push(`timed out after ${seconds} s and was killed (exit code ${report.exit_code})`);
  } else {
    const how = report.signal ? ` (killed by ${report.signal})` : "";
    parts.push(`exit code ${report.exit_code}${how} after ${seconds} s`);
  }
  const block = (name: string, text: string, omitted: number) => {
    if (text === "" && omitted === 0) return;
    const note = omitted > 0 ? `[${omitted} earlier bytes omitted]\n` : "";
    parts.push(`--- ${name} ---\n${note}${text.replace(/\n$/, "")}`);
  };
  block("stdout", report.stdout, report.stdout_omitted_bytes);
  block("stderr", report.stderr, report.stderr_omitted_bytes);
  return parts.join("\n");
}
