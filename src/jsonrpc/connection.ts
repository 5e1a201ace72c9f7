/**
 * A connection is a pair of Web streams of JSON-RPC messages plus a `closed`
 * promise. Transports (stdio, a child's pipes, a WebSocket, an encrypted
 * relay stream) are functions that turn their medium into this shape; the
 * peer on top knows nothing of the medium.
 *
 * @module
 */

import type { IncomingMessage, JsonRpcMessage } from "./message.ts";

/** Why a connection ended. */
export interface CloseInfo {
  /** Human-readable reason, e.g. `"eof"` or `"line exceeds 67108864 bytes"`. */
  readonly reason: string;
  /** The underlying error, when the end was caused by one. */
  readonly error?: unknown;
}

/** A bidirectional stream of JSON-RPC messages. */
export interface Connection {
  /** Decoded inbound messages; ends when the peer goes away. */
  readonly readable: ReadableStream<IncomingMessage>;
  /** Outbound messages; applies backpressure from the transport. */
  readonly writable: WritableStream<JsonRpcMessage>;
  /** Resolves once, when the connection has ended for any reason. */
  readonly closed: Promise<CloseInfo>;
  /** Short description for logs, e.g. `stdio` or `ws 127.0.0.1:5000`. */
  readonly label: string;
  /** Largest encoded message the transport accepts, in bytes. */
  readonly maxMessageBytes: number;
  /** Ends the connection now (idempotent). */
  close(reason?: string): void;
}

/** A piece of encoded output: text is UTF-8 encoded on flush. */
export type OutputPiece = string | Uint8Array;

/** Options for {@linkcode createBatchingSink}. */
export interface BatchingSinkOptions {
  /**
   * Bytes (approximately: strings count their UTF-16 length) that may wait
   * for the transport before `write` starts blocking. Default 1 MiB.
   */
  readonly highWaterMark?: number;
}

const encoder = new TextEncoder();

function combine(pieces: OutputPiece[]): Uint8Array {
  if (pieces.length === 1) {
    const only = pieces[0]!;
    return typeof only === "string" ? encoder.encode(only) : only;
  }
  if (pieces.every((p) => typeof p === "string")) {
    return encoder.encode((pieces as string[]).join(""));
  }
  const parts = pieces.map((p) => typeof p === "string" ? encoder.encode(p) : p);
  let size = 0;
  for (const p of parts) size += p.byteLength;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.byteLength;
  }
  return out;
}

/**
 * A `WritableStream` sink that encodes messages with `encode` and hands them
 * to `writeBytes`, coalescing whatever accumulates while a write is in
 * progress into one buffer (one syscall for many small messages).
 *
 * Memory is bounded: once more than `highWaterMark` bytes wait, `write`
 * blocks until the transport has taken them, which propagates backpressure
 * to every producer awaiting the writer's `ready`. `fail` errors the stream
 * immediately when the transport dies.
 */
export function createBatchingSink(
  encode: (msg: JsonRpcMessage) => OutputPiece | OutputPiece[],
  writeBytes: (bytes: Uint8Array) => Promise<void>,
  close: () => Promise<void>,
  options: BatchingSinkOptions = {},
): { sink: UnderlyingSink<JsonRpcMessage>; fail: (error: unknown) => void } {
  const high = options.highWaterMark ?? 1024 * 1024;
  let pieces: OutputPiece[] = [];
  let backlog = 0;
  let flushing: Promise<void> | null = null;
  let failure: unknown = null;
  let drained: PromiseWithResolvers<void> | null = null;

  async function flushLoop(): Promise<void> {
    try {
      while (pieces.length > 0) {
        const batch = pieces;
        pieces = [];
        let size = 0;
        for (const p of batch) size += typeof p === "string" ? p.length : p.byteLength;
        await writeBytes(combine(batch));
        backlog -= size;
        if (drained !== null && backlog <= high / 2) {
          drained.resolve();
          drained = null;
        }
      }
    } catch (error) {
      failure = error;
      pieces = [];
      drained?.reject(error);
      drained = null;
    } finally {
      flushing = null;
    }
  }

  let controller: WritableStreamDefaultController | null = null;
  const sink: UnderlyingSink<JsonRpcMessage> = {
    start(c) {
      controller = c;
    },
    async write(msg) {
      if (failure !== null) throw failure;
      const encoded = encode(msg);
      if (Array.isArray(encoded)) {
        for (const p of encoded) {
          pieces.push(p);
          backlog += typeof p === "string" ? p.length : p.byteLength;
        }
      } else {
        pieces.push(encoded);
        backlog += typeof encoded === "string" ? encoded.length : encoded.byteLength;
      }
      if (flushing === null) flushing = flushLoop();
      if (backlog > high) {
        drained ??= Promise.withResolvers<void>();
        await drained.promise;
      }
    },
    async close() {
      while (flushing !== null) await flushing;
      if (failure !== null) throw failure;
      await close();
    },
    async abort() {
      pieces = [];
      await close().catch(() => {});
    },
  };
  /** Errors the stream at once (the transport is gone). */
  const fail = (error: unknown) => {
    if (failure === null) failure = error;
    pieces = [];
    drained?.reject(error);
    drained = null;
    try {
      controller?.error(error);
    } catch { /* already errored or closed */ }
  };
  return { sink, fail };
}

/** Resolves the first time it is called with a reason; later calls are no-ops. */
export function closeLatch(): {
  promise: Promise<CloseInfo>;
  resolve: (info: CloseInfo) => void;
  readonly done: boolean;
} {
  const { promise, resolve } = Promise.withResolvers<CloseInfo>();
  let done = false;
  return {
    promise,
    resolve(info: CloseInfo) {
      if (done) return;
      done = true;
      resolve(info);
    },
    get done() {
      return done;
    },
  };
}
