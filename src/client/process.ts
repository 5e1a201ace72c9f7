/**
 * A process running on an exec-server, with a `Deno.ChildProcess`-like
 * surface: `stdout`/`stderr` streams, a `stdin` stream, `status`, signals.
 *
 * Events are delivered strictly in `seq` order whatever order notifications
 * arrive in (a reorder buffer holds early ones; a gap that does not fill
 * itself is filled with `process/read`). Duplicates (a notification and a
 * read result for the same `seq`) are dropped.
 *
 * Flow control is per process: one stream nobody reads never delays
 * another process, another request or the connection. When a process's
 * unread output reaches `bufferBytes`, the client asks the server to hold
 * that process's events (`process/pauseOutput`, servers with
 * `capabilities.outputFlowControl`): the server keeps them and, past 1 MiB,
 * stops reading the child's pipes, so the child blocks as with a local pipe
 * nobody reads; reading below half the bound resumes it. What was already
 * on its way is still accepted (bounded by one round trip of output). A
 * server without that extension (the reference) cannot be paused: past four
 * times the bound the client stops buffering that process's output and,
 * once the reader has caught up, fetches it again with `process/read` from
 * the server's retained history; output the server no longer retains is
 * reported as a gap (`reportGap`, logged), never silently skipped.
 *
 * @module
 */

import type { RequestFn } from "../protocol/spec.ts";
import { ConnectionClosedError } from "../jsonrpc/errors.ts";
import type {
  OutputChunk,
  OutputStream,
  ProcessReadResult,
  ProcessSignalName,
  ProcessTerminateParams,
} from "../protocol/types.ts";

/** How a remote process ended. */
export interface RemoteStatus {
  /** `code === 0`. */
  readonly success: boolean;
  /** Exit code (128+N for a death by signal N). */
  readonly code: number;
  /** The signal that killed it, when the server reports one. */
  readonly signal: string | null;
}

/** One event of a remote process, in `seq` order. */
export type RemoteProcessEvent =
  | {
    readonly kind: "output";
    readonly seq: number;
    readonly stream: OutputStream;
    readonly data: Uint8Array;
  }
  | {
    readonly kind: "exited";
    readonly seq: number;
    readonly code: number;
    readonly signal: string | null;
  }
  | { readonly kind: "closed"; readonly seq: number }
  | { readonly kind: "failed"; readonly reason: string };

/** What a process handle needs from its client. */
export interface ProcessLink {
  /** Sends a request on the current connection. */
  readonly request: RequestFn;
  /** True when the server supports a capability flag. */
  supports(capability: string): boolean;
  /** Forget the process (after it closed or failed). */
  release(processId: string): void;
  /** Events `from`..`to` (inclusive) could not be recovered after a gap. */
  reportGap?(processId: string, from: number, to: number): void;
}

/** Options of the handle's streams. */
export interface RemoteProcessOptions {
  /** Deliver stdout (`piped`, default) or drop it (`null`). */
  readonly stdout?: "piped" | "null";
  /** Deliver stderr (`piped`, default) or drop it (`null`). */
  readonly stderr?: "piped" | "null";
  /** Offer `events` (every event in order) instead of stdout/stderr defaults. */
  readonly events?: boolean;
  /** Bytes buffered per output stream before delivery waits. Default 8 MiB. */
  readonly bufferBytes?: number;
  /** The process was started with stdin piped. */
  readonly stdinPiped: boolean;
}

/** `Deno.Signal` names → protocol names. */
const DENO_SIGNALS: Partial<Record<string, ProcessSignalName>> = {
  SIGINT: "interrupt",
  SIGTERM: "terminate",
  SIGKILL: "kill",
  SIGHUP: "hangup",
  SIGQUIT: "quit",
  SIGUSR1: "user1",
  SIGUSR2: "user2",
};

/** Delay before a missing `seq` is fetched with `process/read`. */
const GAP_FILL_MS = 250;

/** A stream fed by the process; reports how full it is and when its reader takes from it. */
class Feed<T> {
  readonly stream: ReadableStream<T>;
  #controller!: ReadableStreamDefaultController<T>;
  #done = false;
  readonly #highWaterMark: number;

  constructor(strategy: QueuingStrategy<T>, onPull: () => void) {
    this.#highWaterMark = strategy.highWaterMark ?? 1;
    this.stream = new ReadableStream<T>({
      start: (c) => {
        this.#controller = c;
      },
      pull: () => onPull(),
      cancel: () => {
        this.#done = true;
        onPull();
      },
    }, strategy);
  }

  /** Enqueues (never waits; see {@linkcode fill}). */
  push(item: T): void {
    if (!this.#done) this.#controller.enqueue(item);
  }

  /** Queued size over the high-water mark (0: empty, ≥ 1: full). */
  get fill(): number {
    if (this.#done) return 0;
    const desired = this.#controller.desiredSize ?? this.#highWaterMark;
    return (this.#highWaterMark - desired) / this.#highWaterMark;
  }

  close(): void {
    if (this.#done) return;
    this.#done = true;
    this.#controller.close();
  }
}

/** `status` of a process this client let go of (see {@linkcode RemoteProcess.detach}). */
export class ProcessDetachedError extends Error {
  /** The process. */
  readonly processId: string;
  /** `processId` was detached. */
  constructor(processId: string) {
    super(`process ${processId} was detached; attach to it to follow it again`);
    this.name = "ProcessDetachedError";
    this.processId = processId;
  }
}

/** How a process's output flows (see the module documentation). */
type Flow = "open" | "paused" | "dropping";

/** Without server-side pausing: stop buffering at this multiple of the bound. */
const DROP_FACTOR = 4;

/** See the module documentation. */
export class RemoteProcess implements AsyncDisposable {
  /** The client-chosen process id. */
  readonly processId: string;
  /** Resolves when the process exits (rejects if the connection is lost first). */
  readonly status: Promise<RemoteStatus>;

  #link: ProcessLink;
  #nextSeq = 1;
  #pending = new Map<number, RemoteProcessEvent>();
  #gapTimer: ReturnType<typeof setTimeout> | undefined;
  #filling = false;
  #stdout: Feed<Uint8Array> | null;
  #stderr: Feed<Uint8Array> | null;
  #events: Feed<RemoteProcessEvent> | null = null;
  #resolveStatus!: (s: RemoteStatus) => void;
  #rejectStatus!: (e: unknown) => void;
  #exited: RemoteStatus | null = null;
  #finished = false;
  #finishedPromise: PromiseWithResolvers<void> = Promise.withResolvers();
  #stdin: WritableStream<Uint8Array> | null = null;
  #stdinPiped: boolean;
  #writeCounter = 0;
  #flow: Flow = "open";

  /** Created by the client; use `client.spawn()`. */
  constructor(processId: string, link: ProcessLink, options: RemoteProcessOptions) {
    this.processId = processId;
    this.#link = link;
    this.#stdinPiped = options.stdinPiped;
    const hwm = options.bufferBytes ?? 8 * 1024 * 1024;
    const defaultMode = options.events ? "null" : "piped";
    const onPull = () => this.#onReaderProgress();
    const bytes = () =>
      new Feed<Uint8Array>(new ByteLengthQueuingStrategy({ highWaterMark: hwm }), onPull);
    this.#stdout = (options.stdout ?? defaultMode) === "piped" ? bytes() : null;
    this.#stderr = (options.stderr ?? defaultMode) === "piped" ? bytes() : null;
    if (options.events) {
      this.#events = new Feed<RemoteProcessEvent>({
        highWaterMark: Math.max(16, hwm / 65536),
        size: (e) => (e.kind === "output" ? Math.max(1, e.data.length / 65536) : 1),
      }, onPull);
    }
    this.status = new Promise((resolve, reject) => {
      this.#resolveStatus = resolve;
      this.#rejectStatus = reject;
    });
    this.status.catch(() => {});
  }

  /** Standard output (and, for terminals, everything the terminal prints). */
  get stdout(): ReadableStream<Uint8Array> {
    if (!this.#stdout) throw new TypeError("stdout is not piped");
    return this.#stdout.stream;
  }

  /** Standard error (empty for terminals). */
  get stderr(): ReadableStream<Uint8Array> {
    if (!this.#stderr) throw new TypeError("stderr is not piped");
    return this.#stderr.stream;
  }

  /** Every event in `seq` order (spawn with `events: true`). */
  get events(): ReadableStream<RemoteProcessEvent> {
    if (!this.#events) throw new TypeError("spawn with { events: true } to read events");
    return this.#events.stream;
  }

  /** The next `seq` this handle expects (everything before it was delivered). */
  get nextSeq(): number {
    return this.#nextSeq;
  }

  /** True once the process closed or failed. */
  get finished(): boolean {
    return this.#finished;
  }

  /** Resolves once the process has closed (or failed). */
  get done(): Promise<void> {
    return this.#finishedPromise.promise;
  }

  /**
   * Writes to stdin through `process/write` (fresh `writeId` per chunk);
   * closing it sends `process/closeStdin` where the server supports it.
   */
  get stdin(): WritableStream<Uint8Array> {
    if (!this.#stdinPiped) throw new TypeError("stdin is not piped");
    this.#stdin ??= new WritableStream<Uint8Array>({
      write: async (chunk) => {
        const { status } = await this.#link.request("process/write", {
          processId: this.processId,
          chunk: chunk.toBase64(),
          writeId: `${this.processId}:${++this.#writeCounter}:${crypto.randomUUID()}`,
        });
        if (status !== "accepted") throw new Error(`process/write: ${status}`);
      },
      close: async () => {
        if (this.#link.supports("closeStdin")) {
          await this.#link.request("process/closeStdin", { processId: this.processId });
        }
      },
    });
    return this.#stdin;
  }

  /**
   * Sends a signal to the process group (`interrupt` by default): a protocol
   * name or a `Deno.Signal` (`"SIGTERM"`; `SIGINT`, `SIGTERM`, `SIGKILL`,
   * `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`). The reference knows only
   * `interrupt`.
   */
  async signal(signal: ProcessSignalName | Deno.Signal = "interrupt"): Promise<void> {
    // A name the server does not know is sent as is: its error says so.
    const name = (DENO_SIGNALS[signal] ?? signal) as ProcessSignalName;
    await this.#link.request("process/signal", { processId: this.processId, signal: name });
  }

  /** Like `Deno.ChildProcess#kill`: `SIGTERM` by default. */
  async kill(signal: ProcessSignalName | Deno.Signal = "SIGTERM"): Promise<void> {
    await this.signal(signal);
  }

  /** Kills the process group; `graceMs` sends SIGTERM first where supported. */
  async terminate(graceMs?: number): Promise<boolean> {
    const params: ProcessTerminateParams = { processId: this.processId };
    if (graceMs !== undefined && this.#link.supports("terminateGrace")) params.graceMs = graceMs;
    const { running } = await this.#link.request("process/terminate", params);
    return running;
  }

  /** Changes a terminal's window size (servers with `ptyResize`). */
  async resize(rows: number, cols: number): Promise<void> {
    await this.#link.request("process/resize", { processId: this.processId, rows, cols });
  }

  /** Reads everything and waits for the end, like `Deno.ChildProcess#output()`. */
  async output(): Promise<RemoteStatus & { stdout: Uint8Array; stderr: Uint8Array }> {
    const collect = async (feed: Feed<Uint8Array> | null) =>
      feed ? new Uint8Array(await new Response(feed.stream).arrayBuffer()) : new Uint8Array(0);
    const [stdout, stderr] = await Promise.all([collect(this.#stdout), collect(this.#stderr)]);
    const status = await this.status;
    return { ...status, stdout, stderr };
  }

  /**
   * Lets go of the process without stopping it: this object's streams end,
   * `status` rejects with {@linkcode ProcessDetachedError}, and the process
   * keeps running on the server with its output retained, for
   * `client.attach(processId)` — from this client, or from another that
   * resumes the session (`connect({ resumeSessionId })`).
   */
  detach(): void {
    if (this.#finished) return;
    if (this.#flow === "paused") {
      // Held output is the server's to keep for the next reader.
      this.#link.request("process/resumeOutput", { processId: this.processId }).catch(() => {});
    }
    if (!this.#exited) this.#rejectStatus(new ProcessDetachedError(this.processId));
    this.#exited ??= { success: false, code: -1, signal: null };
    this.#finish();
  }

  /** Terminates the process if it is still running. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#finished) await this.terminate().catch(() => {});
  }

  /**
   * Accepts an event from a notification or a read (any order, duplicates
   * ok). Never waits: flow control is per process (module documentation).
   */
  accept(event: Exclude<RemoteProcessEvent, { kind: "failed" }>): void {
    if (this.#finished || event.seq < this.#nextSeq || this.#pending.has(event.seq)) return;
    // Not buffering while the reader catches up (see `dropping`): read again later.
    if (this.#flow === "dropping" && event.kind === "output") return;
    this.#pending.set(event.seq, event);
    this.#drain();
  }

  /** Accepts the chunks of a `process/read` answer (catch-up after a gap or a reconnect). */
  acceptRead(result: ProcessReadResult): void {
    for (const chunk of result.chunks) this.accept(chunkEvent(chunk));
  }

  #drain(): void {
    while (this.#pending.has(this.#nextSeq)) {
      const event = this.#pending.get(this.#nextSeq)!;
      this.#pending.delete(this.#nextSeq);
      this.#nextSeq++;
      this.#deliver(event);
    }
    this.#checkFlow();
    if (this.#pending.size > 0) this.#scheduleGapFill();
    else {
      clearTimeout(this.#gapTimer);
      this.#gapTimer = undefined;
    }
  }

  /** The fullest reader's backlog, relative to the bound. */
  #fill(): number {
    return Math.max(
      this.#stdout?.fill ?? 0,
      this.#stderr?.fill ?? 0,
      this.#events?.fill ?? 0,
    );
  }

  /** Pauses the server's output of this process (or stops buffering) when a reader is behind. */
  #checkFlow(): void {
    if (this.#finished || this.#flow !== "open") return;
    const fill = this.#fill();
    if (fill >= 1 && this.#link.supports("outputFlowControl")) {
      this.#flow = "paused";
      this.#link.request("process/pauseOutput", { processId: this.processId }).catch(() => {});
    } else if (fill >= DROP_FACTOR && !this.#link.supports("outputFlowControl")) {
      this.#flow = "dropping";
    }
  }

  /** A reader took from a stream: resume once it is below half the bound. */
  #onReaderProgress(): void {
    if (this.#flow === "open" || this.#finished || this.#fill() > 0.5) return;
    const was = this.#flow;
    this.#flow = "open";
    if (was === "paused") {
      this.#link.request("process/resumeOutput", { processId: this.processId }).catch(() => {});
    } else {
      // Fetch what was not buffered from the server's retained history.
      this.catchUp().catch(() => {});
    }
  }

  #scheduleGapFill(): void {
    if (this.#gapTimer !== undefined || this.#filling || this.#flow === "dropping") return;
    this.#gapTimer = setTimeout(() => {
      this.#gapTimer = undefined;
      this.catchUp().catch(() => {});
    }, GAP_FILL_MS);
  }

  /**
   * Fetches retained output after the last delivered `seq` and delivers it;
   * seqs that are still missing afterwards (evicted output, or the exit and
   * close events) are skipped, and a missed exit or close is synthesised.
   */
  async catchUp(): Promise<void> {
    if (this.#finished || this.#filling) return;
    this.#filling = true;
    try {
      const result = await this.#link.request("process/read", {
        processId: this.processId,
        afterSeq: this.#nextSeq - 1,
      });
      this.acceptRead(result);
      if (this.#pending.size > 0 && !this.#pending.has(this.#nextSeq)) {
        const resumeAt = Math.min(...this.#pending.keys());
        this.#link.reportGap?.(this.processId, this.#nextSeq, resumeAt - 1);
        this.#nextSeq = resumeAt;
        this.#drain();
      }
      if (
        !this.#finished && result.closed && this.#pending.size === 0 &&
        this.#nextSeq >= result.nextSeq
      ) {
        if (!this.#exited && result.exitCode !== null) {
          this.#deliver({
            kind: "exited",
            seq: result.nextSeq - 2,
            code: result.exitCode,
            signal: null,
          });
        }
        this.#deliver({ kind: "closed", seq: result.nextSeq - 1 });
      }
    } finally {
      this.#filling = false;
      if (this.#pending.size > 0) this.#scheduleGapFill();
    }
  }

  #deliver(event: RemoteProcessEvent): void {
    this.#events?.push(event);
    switch (event.kind) {
      case "output":
        (event.stream === "stderr" ? this.#stderr : this.#stdout)?.push(event.data);
        break;
      case "exited":
        this.#exited = { success: event.code === 0, code: event.code, signal: event.signal };
        this.#resolveStatus(this.#exited);
        break;
      case "closed":
        this.#finish();
        break;
      case "failed":
        break;
    }
  }

  #finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    clearTimeout(this.#gapTimer);
    this.#gapTimer = undefined;
    this.#stdout?.close();
    this.#stderr?.close();
    this.#events?.close();
    if (!this.#exited) {
      this.#rejectStatus(new Error(`process ${this.processId} closed without an exit status`));
    }
    this.#link.release(this.processId);
    this.#finishedPromise.resolve();
  }

  /**
   * The connection is gone for good: readers see the streams end, `status`
   * rejects with the reason, and `events` gets a `failed` event.
   */
  fail(reason: string, error: Error = new ConnectionClosedError(reason)): void {
    if (this.#finished) return;
    this.#events?.push({ kind: "failed", reason });
    if (!this.#exited) this.#rejectStatus(error);
    this.#exited ??= { success: false, code: -1, signal: null };
    this.#finish();
  }
}

/** A `process/output` notification or read chunk as an event. */
export function chunkEvent(chunk: OutputChunk): Exclude<RemoteProcessEvent, { kind: "failed" }> {
  return {
    kind: "output",
    seq: chunk.seq,
    stream: chunk.stream,
    data: Uint8Array.fromBase64(chunk.chunk),
  };
}
