/**
 * One supervised child: its pipes, its event log, stdin, signals and
 * termination. Knows nothing of JSON-RPC: events go to a
 * {@linkcode ProcessSink} (the owning session), which reports back when each
 * event was handed to a live connection.
 *
 * The output path: a pump per pipe reads up to 64 KiB at a time (BYOB reads
 * straight into a fresh buffer, no timers), appends the chunk to the log
 * and hands it to the sink. Before each read it waits while the log holds
 * too much undelivered output or the sink is congested, so a slow or absent
 * client pauses the child instead of growing memory or dropping output.
 *
 * @module
 */

import type { OutputStream } from "../protocol/types.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import {
  type NewProcessEvent,
  OutputLog,
  type OutputLogLimits,
  type ProcessEvent,
} from "./output_log.ts";
import { signalGroup, type SignalName, SIGNALS } from "./signals.ts";
import type { SpawnedChild } from "./spawn.ts";
import { osErrorText } from "../util/os_error.ts";
import { StdinFullError, StdinQueue, type StdinQueueOptions } from "./stdin_queue.ts";

/** Receives a process's events, in `seq` order. */
export interface ProcessSink {
  /** Delivers one event; resolves true once a live connection took it. */
  deliver(process: ManagedProcess, event: ProcessEvent): Promise<boolean>;
  /** Null when the sink has room; otherwise resolves when it has. */
  ready(): Promise<void> | null;
}

/** Result of a stdin operation. */
export type StdinStatus = "accepted" | "stdinClosed";

/** Writing to stdin failed (the pipe broke). */
export class StdinWriteError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StdinWriteError";
  }
}

/** Options for {@linkcode ManagedProcess}. */
export interface ManagedProcessOptions {
  /** Client-chosen id. */
  readonly id: string;
  /** The started child. */
  readonly child: SpawnedChild;
  /** Stream name for stdout (`pty` for terminals). */
  readonly stdoutName?: OutputStream;
  /** True when the child runs on a terminal. */
  readonly tty?: boolean;
  /** Log limits. */
  readonly limits?: OutputLogLimits;
  /** Remembered `writeId`s. Default 4096. */
  readonly maxWriteIds?: number;
  /** Bounds on stdin bytes the child has not read yet (see `StdinQueue`). */
  readonly stdinQueue?: StdinQueueOptions;
  /** Where to log. */
  readonly logger?: Logger;
  /** Sends a signal to the right target (terminals: the foreground group). */
  readonly signal?: (signal: Deno.Signal) => boolean;
  /** The child's terminal, when it runs on one. */
  readonly terminal?: { resize(rows: number, cols: number): void };
  /**
   * Signals the program confined in a sandbox (the child is the sandbox
   * around it). `terminate`'s polite SIGTERM goes there instead of to the
   * child's group (which would end the sandbox before the program could
   * clean up), and its SIGKILL reaches it too (a sandbox sharing the
   * server's PID namespace does not take its processes down with it).
   */
  readonly confined?: (signal: Deno.Signal) => boolean;
  /**
   * Called once the child's process group has been killed for good (at
   * {@linkcode ManagedProcess.dispose}): it ends the group's registration
   * with the server's `OrphanGuard`.
   */
  readonly releaseGroup?: () => void;
  /**
   * Sees all output and decides `sandboxDenied` (sandboxed children). With
   * it, the exit is reported once all output is in, so the verdict covers
   * every byte.
   */
  readonly denial?: DenialObserver;
  /**
   * Called as each chunk of output arrives (the server's memory trimmer
   * counts streaming as work: trimming mid-stream hands back pages the next
   * reads fault in again).
   */
  readonly onOutput?: () => void;
}

/** Watches a sandboxed child's output for signs that the sandbox refused something. */
export interface DenialObserver {
  /**
   * Sees one chunk of output (either stream, in arrival order). The bytes
   * are the read buffer's, read into again afterwards: copy what is kept.
   */
  observe(chunk: Uint8Array): void;
  /** The verdict once the child has exited with `exitCode`. */
  denied(exitCode: number): boolean;
}

/**
 * Output read sizes: an idle process waits with FIRST_READ bytes per stream
 * (a thousand idle sessions would otherwise hold 128 MiB of empty buffers);
 * a read that fills it moves to CHUNK (64 KiB of output in two notifications,
 * not three or four).
 */
const FIRST_READ = 4 * 1024;
const CHUNK = 64 * 1024;

/**
 * Read buffers of streams that ended, for the next processes' reads: a fresh
 * buffer is zero-filled memory the first read faults in, and garbage the
 * collector frees only when it next runs — a thousand short processes left
 * 68 KiB each behind. Bounded: a burst's worth is kept, not an idle server's
 * worth of history.
 */
const spareReadBuffers = new Map<number, ArrayBuffer[]>([[FIRST_READ, []], [CHUNK, []]]);
const MAX_SPARE_READ_BYTES = 1024 * 1024;

function takeReadBuffer(size: number): ArrayBuffer {
  return spareReadBuffers.get(size)!.pop() ?? new ArrayBuffer(size);
}

function giveReadBuffer(buffer: ArrayBuffer | undefined): void {
  if (buffer === undefined) return;
  // A buffer a failed or pending read took is detached: zero bytes, no list.
  const spare = spareReadBuffers.get(buffer.byteLength);
  if (spare && (spare.length + 1) * buffer.byteLength <= MAX_SPARE_READ_BYTES) spare.push(buffer);
}

/** See the module documentation. */
export class ManagedProcess {
  /** Client-chosen id. */
  readonly id: string;
  /** OS process id (and process group id). */
  readonly pid: number;
  /** Runs on a terminal. */
  readonly tty: boolean;
  /** The event log. */
  readonly log: OutputLog;
  /** Resolves after the `closed` event (output drained and exit known). */
  readonly finished: Promise<void>;

  #child: SpawnedChild;
  #sink: ProcessSink | null = null;
  #paused = false;
  /** Highest `seq` handed to a sink (delivered or on its way). */
  #sentSeq = 0;
  #logger: Logger;
  #exitCode: number | null = null;
  #exitSignal: string | null = null;
  #closed = false;
  #disposed = false;
  #readers: Array<ReadableStreamDefaultReader<Uint8Array> | ReadableStreamBYOBReader> = [];
  #stdin: StdinQueue | null;
  #stdinState: "open" | "closed" | "failed" | "none";
  #stdinFailure = "";
  #writeIds = new Set<string>();
  #maxWriteIds: number;
  #graceTimer: ReturnType<typeof setTimeout> | undefined;
  #signal: (signal: Deno.Signal) => boolean;
  #confined: ((signal: Deno.Signal) => boolean) | null;
  #terminal: { resize(rows: number, cols: number): void } | null;
  #denial: DenialObserver | null;
  #sandboxDenied = false;
  #terminationRequested = false;
  #releaseGroup: (() => void) | null;
  #onOutput: (() => void) | null;

  /** Wraps a spawned child and starts pumping its output. */
  constructor(options: ManagedProcessOptions) {
    this.id = options.id;
    this.#child = options.child;
    this.pid = options.child.pid;
    this.tty = options.tty ?? false;
    this.log = new OutputLog(options.limits);
    this.#logger = options.logger ?? nullLogger;
    this.#maxWriteIds = options.maxWriteIds ?? 4096;
    this.#signal = options.signal ?? ((sig) => signalGroup(this.pid, sig));
    this.#terminal = options.terminal ?? null;
    this.#confined = options.confined ?? null;
    this.#releaseGroup = options.releaseGroup ?? null;
    this.#onOutput = options.onOutput ?? null;
    const stdin = options.child.stdin?.getWriter();
    stdin?.closed.catch(() => {});
    this.#stdin = stdin ? new StdinQueue(stdin, options.stdinQueue) : null;
    this.#stdinState = this.#stdin ? "open" : "none";
    const pumps = [this.#pump(options.child.stdout, options.stdoutName ?? "stdout")];
    if (!this.tty) pumps.push(this.#pump(options.child.stderr, "stderr"));
    const denial = options.denial;
    this.#denial = denial ?? null;
    const status = denial
      ? Promise.all([options.child.status, ...pumps]).then(([status]) => status)
      : options.child.status;
    const exited = status.then(
      (status) => {
        this.#exitCode = status.code;
        this.#exitSignal = status.signal;
        this.#sandboxDenied = denial?.denied(status.code) ?? false;
        this.#logger.info("process.exited", {
          processId: this.id,
          pid: this.pid,
          exitCode: status.code,
          ...(status.signal !== null ? { signal: status.signal } : {}),
          ...(this.#sandboxDenied ? { sandboxDenied: true } : {}),
        });
        this.#emit({
          kind: "exited",
          exitCode: status.code,
          signal: status.signal,
          sandboxDenied: this.#sandboxDenied,
        });
      },
      (error) => {
        this.#logger.error("process.wait_failed", { processId: this.id, error });
        this.#exitCode = -1;
        this.#emit({ kind: "exited", exitCode: -1, signal: null, sandboxDenied: false });
      },
    );
    this.finished = Promise.all([...pumps, exited]).then(() => {
      this.#closed = true;
      if (this.#graceTimer !== undefined) {
        // The leader is gone; anything left in its group was asked to die.
        clearTimeout(this.#graceTimer);
        this.#graceTimer = undefined;
        this.#confined?.("SIGKILL");
        signalGroup(this.pid, "SIGKILL");
      }
      if (this.#stdinState === "open") {
        this.#stdinState = "closed";
        this.#stdin?.abort();
      }
      this.#emit({ kind: "closed" });
    });
  }

  /** True once the child has been reaped. */
  get exited(): boolean {
    return this.#exitCode !== null;
  }

  /** Exit code once exited, else null. */
  get exitCode(): number | null {
    return this.#exitCode;
  }

  /** True when the child ran in a sandbox and exited because the sandbox refused something. */
  get sandboxDenied(): boolean {
    return this.#sandboxDenied;
  }

  /** Signal that killed the child, if any. */
  get exitSignal(): string | null {
    return this.#exitSignal;
  }

  /** True once output is drained and the exit is known. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Routes events to `sink` (or nowhere). A new sink first receives, in
   * order, every event not yet delivered.
   */
  setSink(sink: ProcessSink | null): void {
    this.#sink = sink;
    if (sink === null || this.#paused) return;
    for (const event of this.log.undelivered()) this.#deliver(sink, event);
  }

  /**
   * Holds this process's events (the client's reader of it is behind): they
   * wait in the log, and once `maxUndeliveredBytes` wait the child's pipes
   * are no longer read, so the child blocks. Other processes and every
   * answer keep flowing.
   */
  pauseOutput(): void {
    this.#paused = true;
  }

  /** Ends {@linkcode pauseOutput}: what waited is sent, in order. */
  resumeOutput(): void {
    if (!this.#paused) return;
    this.#paused = false;
    if (this.#sink !== null) {
      // Events handed to the connection before the pause are on their way.
      for (const event of this.log.undelivered()) {
        if (event.seq > this.#sentSeq) this.#deliver(this.#sink, event);
      }
    }
  }

  #deliver(sink: ProcessSink, event: ProcessEvent): void {
    if (event.seq > this.#sentSeq) this.#sentSeq = event.seq;
    sink.deliver(this, event).then((ok) => {
      if (ok) this.log.markDelivered(event.seq);
    });
  }

  #emit(event: NewProcessEvent): void {
    const full = this.log.append(event);
    if (this.#sink !== null && !this.#paused) this.#deliver(this.#sink, full);
  }

  async #pump(stream: ReadableStream<Uint8Array>, name: OutputStream): Promise<void> {
    let byob: ReadableStreamBYOBReader | null = null;
    let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
    try {
      byob = stream.getReader({ mode: "byob" });
      this.#readers.push(byob);
    } catch {
      reader = stream.getReader();
      this.#readers.push(reader);
    }
    let size = FIRST_READ;
    let buffer = byob !== null ? takeReadBuffer(size) : undefined;
    try {
      for (;;) {
        // A disposed process stops waiting (releaseRoom wakes it once; the
        // log may still say "full" for a session that kept its history).
        let room = this.log.room();
        if (room !== null) {
          this.#logger.debug("process.output_paused", {
            processId: this.id,
            undeliveredBytes: this.log.undeliveredBytes,
          });
        }
        for (; room !== null && !this.#disposed; room = this.log.room()) await room;
        const ready = this.#sink?.ready() ?? null;
        if (ready !== null) await ready;
        if (this.#disposed) break;
        let chunk: Uint8Array;
        if (byob !== null) {
          const { value, done } = await byob.read(new Uint8Array(buffer!));
          // The read took the buffer; the result's view hands it back.
          buffer = value?.buffer as ArrayBuffer | undefined;
          if (done || value === undefined) break;
          chunk = value;
          // The log copies what it keeps: the same buffer takes the next read.
          if (value.byteLength === size && size < CHUNK) {
            giveReadBuffer(buffer);
            buffer = takeReadBuffer(size = CHUNK);
          }
        } else {
          const { value, done } = await reader!.read();
          if (done) break;
          chunk = value;
        }
        if (chunk.byteLength > 0) {
          this.#onOutput?.();
          this.#denial?.observe(chunk);
          this.#emit({ kind: "output", stream: name, chunk });
        }
      }
    } catch (error) {
      if (!this.#disposed) {
        this.#logger.warn("process.read_failed", { processId: this.id, stream: name, error });
      }
    } finally {
      giveReadBuffer(buffer);
      try {
        (byob ?? reader)!.releaseLock();
      } catch { /* a read is still pending after cancel */ }
    }
  }

  /**
   * Writes `bytes` to stdin, in call order; settles when the pipe has taken
   * them. A `writeId` seen before is acknowledged without writing again.
   * Bytes the child has not read yet are bounded (`StdinQueue`): past the
   * bound a write waits for room, then fails with a clear
   * {@linkcode StdinWriteError} (and its `writeId` is forgotten, so a retry
   * writes).
   */
  async write(bytes: Uint8Array, writeId: string): Promise<StdinStatus> {
    if (this.#stdinState === "none") return "stdinClosed";
    if (this.#writeIds.has(writeId)) return "accepted";
    if (this.#stdinState === "failed") {
      throw new StdinWriteError(`failed to write to process stdin: ${this.#stdinFailure}`);
    }
    if (this.#stdinState === "closed" || this.exited) return "stdinClosed";
    this.#rememberWriteId(writeId);
    try {
      await this.#stdin!.write(bytes);
    } catch (error) {
      if (error instanceof StdinFullError) {
        // Not accepted: a retry with the same writeId must write.
        this.#writeIds.delete(writeId);
        throw new StdinWriteError(error.message, { cause: error });
      }
      if ((this.#stdinState as string) !== "closed") {
        this.#stdinState = "failed";
        this.#stdinFailure = osErrorText(error);
      }
      throw new StdinWriteError(`failed to write to process stdin: ${osErrorText(error)}`, {
        cause: error,
      });
    }
    return "accepted";
  }

  #rememberWriteId(writeId: string): void {
    this.#writeIds.add(writeId);
    if (this.#writeIds.size > this.#maxWriteIds) {
      const oldest = this.#writeIds.values().next().value;
      if (oldest !== undefined) this.#writeIds.delete(oldest);
    }
  }

  /** Closes stdin after pending writes, so the child reads EOF. */
  async closeStdin(): Promise<StdinStatus> {
    if (this.#stdinState !== "open") return "stdinClosed";
    this.#stdinState = "closed";
    await this.#stdin!.close().catch(() => {});
    return "accepted";
  }

  /** Sends a signal to the process group; false when the child has exited. */
  signal(name: SignalName): boolean {
    if (this.exited) return false;
    return this.#reach(this.#signal, SIGNALS[name]);
  }

  /**
   * Signals the whole group (through `toGroup`); before the child has become
   * a group leader (it does so when `setsid` runs, just after the spawn) the
   * group does not exist yet, so the child itself is signalled — and then the
   * group once more: the child may have become its leader, and forked,
   * between the two. Its pid cannot have been reused: it is not reaped yet.
   */
  #reach(toGroup: (signal: Deno.Signal) => boolean, signal: Deno.Signal): boolean {
    if (toGroup(signal)) return true;
    const leader = this.#signalLeader(signal);
    return toGroup(signal) || leader;
  }

  #signalTree(signal: Deno.Signal): void {
    this.#reach((sig) => signalGroup(this.pid, sig), signal);
  }

  #signalLeader(signal: Deno.Signal): boolean {
    if (this.exited) return false;
    try {
      Deno.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** Whether it was asked to terminate before it exited. */
  get terminationRequested(): boolean {
    return this.#terminationRequested;
  }

  /** Resizes the child's terminal; throws when it has none or it is closed. */
  resize(rows: number, cols: number): void {
    if (!this.#terminal) throw new Error(`process ${this.id} is not running on a terminal`);
    this.#terminal.resize(rows, cols);
  }

  /**
   * Kills the process group: at once with SIGKILL, or with SIGTERM first and
   * SIGKILL after `graceMs`. Returns false when the child had already exited.
   */
  terminate(graceMs = 0): boolean {
    if (this.exited) return false;
    this.#terminationRequested = true;
    if (graceMs > 0) {
      if (!this.#confined?.("SIGTERM")) this.#signalTree("SIGTERM");
      clearTimeout(this.#graceTimer);
      this.#graceTimer = setTimeout(() => {
        this.#graceTimer = undefined;
        this.#kill();
      }, graceMs);
    } else {
      this.#kill();
    }
    return true;
  }

  #kill(): void {
    this.#confined?.("SIGKILL");
    this.#signalTree("SIGKILL");
  }

  /**
   * Kills the whole group (even after the leader exited), stops reading and
   * releases every resource. Resolves once the child is reaped.
   */
  async dispose(): Promise<void> {
    if (!this.#disposed) {
      this.#disposed = true;
      clearTimeout(this.#graceTimer);
      this.#graceTimer = undefined;
      this.#kill();
      this.#sink = null;
      this.log.releaseRoom();
      this.log.dispose();
      for (const reader of this.#readers) reader.cancel().catch(() => {});
      if (this.#stdinState === "open") {
        this.#stdinState = "closed";
        this.#stdin?.abort();
      }
    }
    await this.#child.status.catch(() => {});
    await this.finished.catch(() => {});
    this.#releaseGroup?.();
  }
}
