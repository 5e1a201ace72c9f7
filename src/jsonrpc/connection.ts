/**
 * A connection is a pair of Web streams of JSON-RPC messages plus a `closed`
 * promise (and, for the peer's hot path, the same messages as a
 * {@linkcode MessageSource} and a `MessageSink` without stream machinery).
 * Transports (stdio, a
 * child's pipes, a WebSocket, an encrypted relay stream) are functions that
 * turn their medium into this shape; the peer on top knows nothing of the
 * medium.
 *
 * @module
 */

import type { IncomingMessage, JsonRpcMessage } from "./message.ts";
import type { MessageSink, OutputSink } from "./output_sink.ts";

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
  /**
   * The same messages as a pull source, when the transport has one (cheaper
   * than `readable`). A consumer reads one or the other, never both.
   */
  readonly source?: MessageSource;
  /** Outbound messages; applies backpressure from the transport. */
  readonly writable: WritableStream<JsonRpcMessage>;
  /**
   * The same outbound queue as a direct writer, when the transport has one
   * (cheaper than `writable`). A producer writes to one or the other.
   */
  readonly sink?: MessageSink;
  /** Resolves once, when the connection has ended for any reason. */
  readonly closed: Promise<CloseInfo>;
  /** Short description for logs, e.g. `stdio` or `ws 127.0.0.1:5000`. */
  readonly label: string;
  /**
   * Largest encoded message the peer is known (or assumed) to accept, in
   * bytes; `Infinity` when the transport has no limit.
   */
  readonly maxOutgoingBytes: number;
  /** Ends the connection now (idempotent). */
  close(reason?: string): void;
  /**
   * Resolves true once everything written so far has been handed to the
   * operating system (false if the transport failed first). Optional:
   * transports without it count acceptance as delivery.
   */
  flushed?(): Promise<boolean>;
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

/**
 * Inbound messages pulled one at a time, without Web-stream machinery: a
 * message already decoded is returned as a plain value (a burst of pipelined
 * requests costs no promise per message), otherwise a promise. `null` means
 * the input ended (read errors end it too; `closed` says why). Calls are
 * serialised by the source: a call made while another is pending waits for
 * it.
 */
export interface MessageSource {
  /** The next message, or `null` at the end. */
  next(): IncomingMessage | null | Promise<IncomingMessage | null>;
  /** Stops reading (the consumer is gone). */
  cancel(): void;
}

/** A `ReadableStream` view of `source` (for consumers that want a stream). */
export function sourceStream(source: MessageSource): ReadableStream<IncomingMessage> {
  return new ReadableStream<IncomingMessage>({
    async pull(controller) {
      const message = await source.next();
      if (message === null) controller.close();
      else controller.enqueue(message);
    },
    cancel() {
      source.cancel();
    },
  }, { highWaterMark: 0 });
}

/** The parts every message transport (NDJSON, WebSocket, relay stream) is built from. */
export interface ConnectionParts {
  /** For logs. */
  readonly label: string;
  /** Decoded inbound messages: a pull source, or a stream. */
  readonly input: MessageSource | ReadableStream<IncomingMessage>;
  /** Encodes, batches and writes outbound messages. */
  readonly output: OutputSink;
  /** Resolves once, when the connection has ended. */
  readonly closed: Promise<CloseInfo>;
  /** Largest message the peer accepts. */
  readonly maxOutgoingBytes: number;
  /** Ends the transport (idempotent). */
  close(reason: string): void;
}

/** Assembles a {@linkcode Connection} from a transport's parts. */
export function messageConnection(parts: ConnectionParts): Connection {
  const { output, input } = parts;
  const source = input instanceof ReadableStream ? undefined : input;
  let readable = input instanceof ReadableStream ? input : undefined;
  let writable: WritableStream<JsonRpcMessage> | undefined;
  return {
    // Streams over the source and the sink only for a consumer that asks.
    get readable() {
      return readable ??= sourceStream(source!);
    },
    ...(source ? { source } : {}),
    get writable() {
      return writable ??= new WritableStream(output.sink);
    },
    sink: output.messages,
    closed: parts.closed,
    label: parts.label,
    maxOutgoingBytes: parts.maxOutgoingBytes,
    flushed: () => output.flushed(),
    close: (reason = "closed locally") => parts.close(reason),
  };
}
