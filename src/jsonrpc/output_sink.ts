/**
 * The outbound half of every transport: a queue that turns messages into
 * framed bytes and hands them to the transport — written to directly
 * ({@linkcode MessageSink}, the peer's way) or through a `WritableStream`
 * over the same queue.
 *
 * Hot path, so it is careful about copies. A message is encoded as a list of
 * string parts (large base64 payloads stay separate strings, never
 * concatenated). At each flush, every message waiting is UTF-8 encoded
 * straight into one buffer at its final offset, with the transport's framing
 * (a newline, a WebSocket header) written in place: one allocation and one
 * write for many messages, no intermediate joined string.
 *
 * Memory is bounded: once more than `highWaterMark` bytes wait, `write`
 * returns a promise that settles when the transport has taken them, which
 * propagates backpressure to every producer awaiting `ready`.
 *
 * @module
 */

import { Base64Part, encodeMessageParts, type JsonPart, type JsonRpcMessage } from "./message.ts";
import type { Framing } from "../util/framing.ts";

export type { Framing } from "../util/framing.ts";

/** Options for {@linkcode createOutputSink}. */
export interface OutputSinkOptions {
  /** Bytes that may wait for the transport before writes block. Default 1 MiB. */
  readonly highWaterMark?: number;
  /**
   * Reuse one output buffer across writes. Only for transports that are done
   * with the bytes once `writeBytes` resolves (Deno's own resource streams:
   * stdout, pipes, sockets), never for in-memory streams that pass chunks on.
   */
  readonly reuseBuffers?: boolean;
  /**
   * Messages for which this is true are framed in a batch of their own,
   * after everything before them has been handed over, and `writeBytes`
   * receives the message with its bytes (the relay puts a traced request's
   * trace context on the record it starts in).
   */
  readonly alone?: (message: JsonRpcMessage) => boolean;
}

const MAX_SCRATCH = 4 * 1024 * 1024;

/**
 * Outbound messages without Web-stream machinery: the peer's hot path (a
 * `WritableStream` costs several promises and a dozen calls per message).
 * Messages are queued in the order `write` is called.
 */
export interface MessageSink {
  /**
   * Queues `message` behind every earlier one. Returns `undefined` when it
   * was taken and there is room for more; otherwise a promise that resolves
   * once the backlog has drained (more than the high-water mark waited), or
   * rejects when the output has failed or been closed (at once if it
   * already had).
   */
  write(message: JsonRpcMessage): Promise<void> | undefined;
  /** True while more than the high-water mark waits for the transport. */
  readonly congested: boolean;
  /** Resolves once there is room (at once when there is); never rejects. */
  ready(): Promise<void>;
  /** Writes out everything queued, then ends the transport's output. */
  close(): Promise<void>;
  /** Resolves with the error if the output fails; otherwise never settles. */
  readonly failed: Promise<unknown>;
}

/** The sink, as a direct writer and as a stream sink, plus a way to fail it. */
export interface OutputSink {
  /** Direct writes (what the peer uses). */
  readonly messages: MessageSink;
  /** For `new WritableStream(sink)`: the same queue, for stream consumers. */
  readonly sink: UnderlyingSink<JsonRpcMessage>;
  /** Errors the output now (pending and later writes reject). */
  fail(error: unknown): void;
  /**
   * Resolves true once every message the sink has accepted so far has been
   * handed to the transport (false if the transport failed first).
   */
  flushed(): Promise<boolean>;
}

const encoder = new TextEncoder();

interface Pending {
  parts: JsonPart[];
  length: number;
  /** Set for a message framed in a batch of its own (options.alone). */
  alone?: JsonRpcMessage;
}

/** Input bytes per base64 piece (a multiple of 3: pieces need no padding). */
const BASE64_PIECE = 3 * 64 * 1024;

/** Writes the base64 of `bytes` into `out` at `at` piece by piece; returns the end. */
function encodeBase64Into(bytes: Uint8Array, out: Uint8Array, at: number): number {
  for (let i = 0; i < bytes.length; i += BASE64_PIECE) {
    at += encoder.encodeInto(bytes.subarray(i, i + BASE64_PIECE).toBase64(), out.subarray(at))
      .written;
  }
  return at;
}

/** Tells the byte parts of an encoded message that their bytes are no longer needed. */
function releaseParts(parts: readonly JsonPart[]): void {
  for (const part of parts) if (part instanceof Base64Part) part.release();
}

/**
 * Encodes a batch of messages into one framed buffer, in `scratch` when it
 * is large enough.
 */
export function frameBatch(batch: Pending[], framing: Framing, scratch?: Uint8Array): Uint8Array {
  let total = 0;
  for (const m of batch) {
    total += m.length > framing.maxFastPayload
      ? 0
      : framing.headerSize(m.length) + m.length + framing.trailer.length;
  }
  let out = scratch !== undefined && scratch.length >= total
    ? scratch.subarray(0, total)
    : new Uint8Array(total);
  let offset = 0;
  let slow: Array<[number, Uint8Array]> | null = null;
  for (let i = 0; i < batch.length; i++) {
    const m = batch[i]!;
    if (m.length > framing.maxFastPayload) {
      (slow ??= []).push([offset, framing.frameSlow(m.parts.join(""))]);
      releaseParts(m.parts);
      continue;
    }
    const header = framing.headerSize(m.length);
    const start = offset + header;
    let at = start;
    let ascii = true;
    for (const part of m.parts) {
      if (part instanceof Base64Part) {
        at = encodeBase64Into(part.bytes, out, at);
        continue;
      }
      const { read, written } = encoder.encodeInto(part, out.subarray(at, start + m.length));
      if (read !== part.length || written !== part.length) {
        ascii = false;
        break;
      }
      at += written;
    }
    if (!ascii) {
      // Non-ASCII text: its UTF-8 form is longer than its length in UTF-16
      // units. Frame it on its own and splice it in below.
      (slow ??= []).push([offset, framing.frameSlow(m.parts.join(""))]);
      releaseParts(m.parts);
      continue;
    }
    releaseParts(m.parts);
    framing.seal(out, start, m.length);
    out.set(framing.trailer, start + m.length);
    offset = start + m.length + framing.trailer.length;
  }
  if (slow !== null) {
    // Rare: splice the separately framed messages in at their positions.
    let extra = 0;
    for (const [, bytes] of slow) extra += bytes.length;
    const merged = new Uint8Array(offset + extra);
    let src = 0;
    let dst = 0;
    for (const [position, bytes] of slow) {
      merged.set(out.subarray(src, position), dst);
      dst += position - src;
      src = position;
      merged.set(bytes, dst);
      dst += bytes.length;
    }
    merged.set(out.subarray(src, offset), dst);
    out = merged;
  } else if (offset !== total) {
    out = out.subarray(0, offset);
  }
  return out;
}

/**
 * Encodes one message's parts through `buffer`, writing each time it fills
 * (and the trailer at the end): for framings without a header
 * ({@linkcode Framing.streamable}), where the payload's byte length need not
 * be known first.
 */
async function writeInPieces(
  parts: readonly JsonPart[],
  trailer: Uint8Array,
  buffer: Uint8Array,
  write: (bytes: Uint8Array) => Promise<void>,
): Promise<void> {
  let at = 0;
  const flush = async () => {
    if (at > 0) await write(buffer.subarray(0, at));
    at = 0;
  };
  for (const part of parts) {
    if (part instanceof Base64Part) {
      for (let i = 0; i < part.bytes.length; i += BASE64_PIECE) {
        const piece = part.bytes.subarray(i, i + BASE64_PIECE);
        if (buffer.length - at < Math.ceil(piece.length / 3) * 4) await flush();
        at = encodeBase64Into(piece, buffer, at);
      }
      continue;
    }
    // Text in slices that fit (encodeInto never splits a character).
    for (let rest = part; rest.length > 0;) {
      const { read, written } = encoder.encodeInto(rest, buffer.subarray(at));
      at += written;
      rest = rest.slice(read);
      if (rest.length > 0) await flush();
    }
  }
  if (buffer.length - at < trailer.length) await flush();
  buffer.set(trailer, at);
  at += trailer.length;
  releaseParts(parts);
  await flush();
}

/**
 * Creates the sink: `writeBytes` must resolve once the transport has taken
 * the bytes; `close` ends the transport's output.
 */
export function createOutputSink(
  framing: Framing,
  writeBytes: (bytes: Uint8Array, alone?: JsonRpcMessage) => Promise<void>,
  close: () => Promise<void>,
  options: OutputSinkOptions = {},
): OutputSink {
  return new OutputQueue(framing, writeBytes, close, options);
}

/**
 * The queue behind {@linkcode createOutputSink}: one object per connection,
 * its methods shared (a connection holds no closure per method).
 */
class OutputQueue implements OutputSink, MessageSink {
  readonly #framing: Framing;
  readonly #writeBytes: (bytes: Uint8Array, alone?: JsonRpcMessage) => Promise<void>;
  readonly #closeTransport: () => Promise<void>;
  readonly #high: number;
  readonly #isAlone: ((message: JsonRpcMessage) => boolean) | undefined;
  #pending: Pending[] = [];
  /** How many of `#pending` are framed alone (batches end before and after each). */
  #alones = 0;
  #backlog = 0;
  /** Settles when the batch being written is out (null: none is). */
  #flushing: Promise<void> | null = null;
  /** The size of the batch being written. */
  #writingSize = 0;
  #failure: unknown = null;
  #closing = false;
  #closed: Promise<void> | null = null;
  #drained: PromiseWithResolvers<void> | null = null;
  #controller: WritableStreamDefaultController | null = null;
  #failed: PromiseWithResolvers<unknown> | null = null;
  #sink: UnderlyingSink<JsonRpcMessage> | null = null;
  /** Grown to the batches actually written (an idle connection holds none). */
  #scratch: Uint8Array | undefined;
  // Receipts: one promise per batch, shared by every message in it.
  #accumulating: PromiseWithResolvers<boolean> | null = null;
  #inFlight: PromiseWithResolvers<boolean> | null = null;

  constructor(
    framing: Framing,
    writeBytes: (bytes: Uint8Array, alone?: JsonRpcMessage) => Promise<void>,
    close: () => Promise<void>,
    options: OutputSinkOptions,
  ) {
    this.#framing = framing;
    this.#writeBytes = writeBytes;
    this.#closeTransport = close;
    this.#high = options.highWaterMark ?? 1024 * 1024;
    this.#isAlone = options.alone;
    this.#scratch = options.reuseBuffers ? new Uint8Array(0) : undefined;
  }

  get messages(): MessageSink {
    return this;
  }

  get sink(): UnderlyingSink<JsonRpcMessage> {
    return this.#sink ??= {
      start: (c) => {
        this.#controller = c;
      },
      write: (msg) => this.write(msg),
      close: () => this.close(),
      abort: async () => {
        this.#pending = [];
        this.#alones = 0;
        this.#closing = true;
        await this.#closeTransport().catch(() => {});
      },
    };
  }

  get failed(): Promise<unknown> {
    return (this.#failed ??= Promise.withResolvers<unknown>()).promise;
  }

  get congested(): boolean {
    return this.#backlog > this.#high && this.#failure === null;
  }

  write(msg: JsonRpcMessage): Promise<void> | undefined {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#closing) return Promise.reject(new TypeError("the output is closed"));
    const parts = encodeMessageParts(msg);
    let length = 0;
    for (const p of parts) length += p.length;
    if (this.#isAlone?.(msg) === true) {
      this.#pending.push({ parts, length, alone: msg });
      this.#alones++;
    } else {
      this.#pending.push({ parts, length });
    }
    this.#backlog += length;
    if (this.#flushing === null) this.#pump();
    if (this.#backlog <= this.#high) return undefined;
    return (this.#drained ??= Promise.withResolvers<void>()).promise;
  }

  ready(): Promise<void> {
    return this.congested
      ? (this.#drained ??= Promise.withResolvers<void>()).promise.catch(() => {})
      : Promise.resolve();
  }

  close(): Promise<void> {
    this.#closing = true;
    return this.#closed ??= (async () => {
      while (this.#flushing !== null) await this.#flushing;
      if (this.#failure !== null) throw this.#failure;
      await this.#closeTransport();
    })();
  }

  fail(error: unknown): void {
    if (this.#failure !== null) return;
    this.#failure = error;
    this.#pending = [];
    this.#alones = 0;
    this.#inFlight?.resolve(false);
    this.#accumulating?.resolve(false);
    this.#inFlight = this.#accumulating = null;
    this.#drained?.reject(error);
    this.#drained = null;
    (this.#failed ??= Promise.withResolvers<unknown>()).resolve(error);
    try {
      this.#controller?.error(error);
    } catch { /* already errored or closed */ }
  }

  flushed(): Promise<boolean> {
    if (this.#failure !== null) return Promise.resolve(false);
    if (this.#pending.length > 0) {
      this.#accumulating ??= Promise.withResolvers<boolean>();
      return this.#accumulating.promise;
    }
    if (this.#inFlight !== null) return this.#inFlight.promise;
    return Promise.resolve(true);
  }

  /** Frames `batch` (in the reused buffer when it fits) and writes it. */
  #writeBatch(batch: Pending[]): Promise<void> {
    let size = 0;
    for (const m of batch) size += m.length;
    const scratch = this.#scratch;
    if (scratch !== undefined && scratch.length < size * 1.1 && size <= MAX_SCRATCH) {
      this.#scratch = new Uint8Array(
        Math.min(MAX_SCRATCH, Math.max(4096, Math.ceil(size * 1.25))),
      );
    }
    return this.#writeBytes(frameBatch(batch, this.#framing, this.#scratch), batch[0]!.alone);
  }

  /**
   * Writes `batch`; with a streamable framing, a message larger than the
   * reused buffer goes out through it in pieces (a file's base64 is then
   * never in memory whole), the messages around it batched as usual.
   */
  async #writeInParts(batch: Pending[]): Promise<void> {
    let start = 0;
    for (let i = 0; i < batch.length; i++) {
      const m = batch[i]!;
      if (m.length <= MAX_SCRATCH || m.alone) continue;
      if (i > start) await this.#writeBatch(batch.slice(start, i));
      if (this.#scratch!.length < MAX_SCRATCH) this.#scratch = new Uint8Array(MAX_SCRATCH);
      await writeInPieces(m.parts, this.#framing.trailer, this.#scratch!, this.#writeBytes);
      start = i + 1;
    }
    if (start < batch.length) await this.#writeBatch(start === 0 ? batch : batch.slice(start));
  }

  /** The next batch: everything waiting, cut before and after a message framed alone. */
  #takeBatch(): Pending[] {
    const batch = this.#pending;
    if (this.#alones > 0) {
      let cut = 1;
      if (batch[0]!.alone === undefined) {
        while (cut < batch.length && batch[cut]!.alone === undefined) cut++;
      } else {
        this.#alones--;
      }
      if (cut < batch.length) {
        this.#pending = batch.slice(cut);
        return batch.slice(0, cut);
      }
    }
    this.#pending = [];
    // The receipt of everything accepted so far goes with the last batch.
    this.#inFlight = this.#accumulating;
    this.#accumulating = null;
    return batch;
  }

  /**
   * Writes the next batch, and the next once that one is out, while
   * messages wait (no async frame per batch: one `then` on the write).
   */
  #pump(): void {
    const batch = this.#takeBatch();
    let size = 0;
    for (const m of batch) size += m.length;
    this.#writingSize = size;
    let written: Promise<void>;
    try {
      written = this.#scratch !== undefined && this.#framing.streamable && size > MAX_SCRATCH
        ? this.#writeInParts(batch)
        : this.#writeBatch(batch);
    } catch (error) {
      written = Promise.reject(error);
    }
    this.#flushing = written.then(this.#batchWritten, this.#batchFailed);
  }

  readonly #batchWritten = (): void => {
    this.#inFlight?.resolve(true);
    this.#inFlight = null;
    this.#backlog -= this.#writingSize;
    if (this.#drained !== null && this.#backlog <= this.#high / 2) {
      this.#drained.resolve();
      this.#drained = null;
    }
    if (this.#pending.length > 0 && this.#failure === null) return this.#pump();
    this.#flushing = null;
  };

  readonly #batchFailed = (error: unknown): void => {
    this.#flushing = null;
    this.fail(error);
  };
}

const NEWLINE = new Uint8Array([0x0a]);

/** Newline-delimited JSON framing. */
export const ndjsonFraming: Framing = {
  headerSize: () => 0,
  seal: () => {},
  trailer: NEWLINE,
  frameSlow(text) {
    const bytes = encoder.encode(text);
    const out = new Uint8Array(bytes.length + 1);
    out.set(bytes);
    out[bytes.length] = 0x0a;
    return out;
  },
  maxFastPayload: Number.MAX_SAFE_INTEGER,
  streamable: true,
};
