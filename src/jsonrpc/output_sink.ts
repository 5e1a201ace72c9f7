/**
 * The outbound half of every transport: a `WritableStream` sink that turns
 * messages into framed bytes and hands them to the transport.
 *
 * Hot path, so it is careful about copies. A message is encoded as a list of
 * string parts (large base64 payloads stay separate strings, never
 * concatenated). At each flush, every message waiting is UTF-8 encoded
 * straight into one buffer at its final offset, with the transport's framing
 * (a newline, a WebSocket header) written in place: one allocation and one
 * write for many messages, no intermediate joined string.
 *
 * Memory is bounded: once more than `highWaterMark` bytes wait, `write`
 * blocks until the transport has taken them, which propagates backpressure
 * to every producer awaiting the writer's `ready`.
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
  const high = options.highWaterMark ?? 1024 * 1024;
  const isAlone = options.alone;
  let pending: Pending[] = [];
  /** How many of `pending` are framed alone (batches end before and after each). */
  let alones = 0;
  let backlog = 0;
  let flushing: Promise<void> | null = null;
  let failure: unknown = null;
  let closing = false;
  let closed: Promise<void> | null = null;
  let drained: PromiseWithResolvers<void> | null = null;
  let controller: WritableStreamDefaultController | null = null;
  const failed = Promise.withResolvers<unknown>();
  // Grown to the batches actually written (an idle connection holds none).
  let scratch: Uint8Array | undefined = options.reuseBuffers ? new Uint8Array(0) : undefined;
  // Receipts: one promise per batch, shared by every message in it.
  let accumulating: PromiseWithResolvers<boolean> | null = null;
  let inFlight: PromiseWithResolvers<boolean> | null = null;

  /** Frames `batch` (in the reused buffer when it fits) and writes it. */
  function writeBatch(batch: Pending[]): Promise<void> {
    let size = 0;
    for (const m of batch) size += m.length;
    if (scratch !== undefined && scratch.length < size * 1.1 && size <= MAX_SCRATCH) {
      scratch = new Uint8Array(Math.min(MAX_SCRATCH, Math.max(4096, Math.ceil(size * 1.25))));
    }
    return writeBytes(frameBatch(batch, framing, scratch), batch[0]!.alone);
  }

  /**
   * Writes `batch`; with a streamable framing, a message larger than the
   * reused buffer goes out through it in pieces (a file's base64 is then
   * never in memory whole), the messages around it batched as usual.
   */
  async function writeInParts(batch: Pending[]): Promise<void> {
    let start = 0;
    for (let i = 0; i < batch.length; i++) {
      const m = batch[i]!;
      if (m.length <= MAX_SCRATCH || m.alone) continue;
      if (i > start) await writeBatch(batch.slice(start, i));
      if (scratch!.length < MAX_SCRATCH) scratch = new Uint8Array(MAX_SCRATCH);
      await writeInPieces(m.parts, framing.trailer, scratch!, writeBytes);
      start = i + 1;
    }
    if (start < batch.length) await writeBatch(start === 0 ? batch : batch.slice(start));
  }

  function writeOut(batch: Pending[], size: number): Promise<void> {
    return scratch !== undefined && framing.streamable && size > MAX_SCRATCH
      ? writeInParts(batch)
      : writeBatch(batch);
  }

  /** The next batch: everything waiting, cut before and after a message framed alone. */
  function takeBatch(): Pending[] {
    const batch = pending;
    if (alones > 0) {
      let cut = 1;
      if (batch[0]!.alone === undefined) {
        while (cut < batch.length && batch[cut]!.alone === undefined) cut++;
      } else {
        alones--;
      }
      if (cut < batch.length) {
        pending = batch.slice(cut);
        return batch.slice(0, cut);
      }
    }
    pending = [];
    // The receipt of everything accepted so far goes with the last batch.
    inFlight = accumulating;
    accumulating = null;
    return batch;
  }

  // The batch being written, and its size; one write at a time.
  let writingSize = 0;

  /**
   * Writes the next batch, and the next once that one is out, while
   * messages wait (no async frame per batch: one `then` on the write).
   */
  function pump(): void {
    const batch = takeBatch();
    let size = 0;
    for (const m of batch) size += m.length;
    writingSize = size;
    let written: Promise<void>;
    try {
      written = writeOut(batch, size);
    } catch (error) {
      written = Promise.reject(error);
    }
    flushing = written.then(batchWritten, batchFailed);
  }

  function batchWritten(): void {
    inFlight?.resolve(true);
    inFlight = null;
    backlog -= writingSize;
    if (drained !== null && backlog <= high / 2) {
      drained.resolve();
      drained = null;
    }
    if (pending.length > 0 && failure === null) return pump();
    flushing = null;
  }

  function batchFailed(error: unknown): void {
    flushing = null;
    fail(error);
  }

  function settleReceipts(): void {
    inFlight?.resolve(false);
    accumulating?.resolve(false);
    inFlight = accumulating = null;
  }

  const messages: MessageSink = {
    write(msg) {
      if (failure !== null) return Promise.reject(failure);
      if (closing) return Promise.reject(new TypeError("the output is closed"));
      const parts = encodeMessageParts(msg);
      let length = 0;
      for (const p of parts) length += p.length;
      if (isAlone?.(msg) === true) {
        pending.push({ parts, length, alone: msg });
        alones++;
      } else {
        pending.push({ parts, length });
      }
      backlog += length;
      if (flushing === null) pump();
      if (backlog <= high) return undefined;
      drained ??= Promise.withResolvers<void>();
      return drained.promise;
    },
    get congested() {
      return backlog > high && failure === null;
    },
    ready() {
      return backlog > high && failure === null
        ? (drained ??= Promise.withResolvers<void>()).promise.catch(() => {})
        : Promise.resolve();
    },
    close() {
      closing = true;
      return closed ??= (async () => {
        while (flushing !== null) await flushing;
        if (failure !== null) throw failure;
        await close();
      })();
    },
    failed: failed.promise,
  };

  const sink: UnderlyingSink<JsonRpcMessage> = {
    start(c) {
      controller = c;
    },
    write: (msg) => messages.write(msg),
    close: () => messages.close(),
    async abort() {
      pending = [];
      alones = 0;
      closing = true;
      await close().catch(() => {});
    },
  };

  function fail(error: unknown): void {
    if (failure !== null) return;
    failure = error;
    pending = [];
    alones = 0;
    settleReceipts();
    drained?.reject(error);
    drained = null;
    failed.resolve(error);
    try {
      controller?.error(error);
    } catch { /* already errored or closed */ }
  }
  const flushed = (): Promise<boolean> => {
    if (failure !== null) return Promise.resolve(false);
    if (pending.length > 0) {
      accumulating ??= Promise.withResolvers<boolean>();
      return accumulating.promise;
    }
    if (inFlight !== null) return inFlight.promise;
    return Promise.resolve(true);
  };
  return { messages, sink, fail, flushed };
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
