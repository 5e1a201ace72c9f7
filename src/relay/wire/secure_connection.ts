/**
 * A JSON-RPC {@linkcode Connection} over one encrypted relay stream: outbound
 * messages are length-prefixed, cut into ≤ 61 440-byte records, sealed in
 * order and sent as Data frames with consecutive `seq`; inbound Data frames
 * are put in order (never decrypted twice or out of order), opened,
 * reassembled and decoded. Any violation ends the stream.
 *
 * @module
 */

import {
  type CloseInfo,
  closeLatch,
  type Connection,
  messageConnection,
} from "../../jsonrpc/connection.ts";
import {
  decodeMessage,
  type IncomingMessage,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type TraceContext,
} from "../../jsonrpc/message.ts";
import { createOutputSink } from "../../jsonrpc/output_sink.ts";
import { MAX_RECORD_PLAINTEXT, type RecordCipher } from "../../noise/transport.ts";
import { TAGLEN } from "../../noise/primitives.ts";
import { lengthPrefixFraming, MAX_RELAY_MESSAGE, MessageAssembler } from "./message_framing.ts";
import { OrderedCiphertext, SequenceCounter } from "./ordered.ts";
import { strictUtf8Decoder } from "../../util/utf8.ts";
import { decodeLargeMessage } from "../../jsonrpc/large_message.ts";
import { DEFAULT_JSON_LIMITS } from "../../jsonrpc/strict_json.ts";

/** How the stream reaches its socket. */
export interface SecureStreamIo {
  /**
   * Sends one Data frame (with the request's trace context in clear, on the
   * first record of a traced request); resolves when the socket took it.
   */
  sendData(seq: number, ciphertext: Uint8Array, trace?: TraceContext): Promise<void>;
  /**
   * Sends Data frames (`records[i]`: sequence number and ciphertext length)
   * whose ciphertexts `fill(i, out)` writes synchronously straight into the
   * outgoing messages, in one socket write; used with libcrypto records.
   */
  sendDataBatch?(
    records: readonly { seq: number; length: number }[],
    fill: (index: number, ciphertext: Uint8Array) => void,
  ): Promise<void>;
  /** The stream ended locally or by a violation: reset/close it. */
  end(reason: string): void;
}

/** Options of {@linkcode secureConnection}. */
export interface SecureConnectionOptions {
  /** For logs. */
  readonly label: string;
  /**
   * The largest inbound message of a given kind (harness limits), or
   * `null` for the default 64 MiB.
   */
  readonly inboundLimit?: (message: IncomingMessage) => number | null;
  /** Inbound messages that may wait; more is a violation (executor: 128). `Infinity` to apply backpressure instead. */
  readonly maxQueuedMessages?: number;
  /**
   * Where a large message's base64 may be decoded straight from its bytes
   * (see `jsonrpc/large_message.ts`; the executor serving the protocol).
   */
  readonly base64Members?: ReadonlyMap<string, string>;
}

/** The connection plus the inbound entry point for its socket reader. */
export interface SecureStream {
  /** The JSON-RPC connection. */
  readonly connection: Connection;
  /**
   * Hands an inbound Data frame in; resolves when it was processed (and,
   * with backpressure, when the reader has room again).
   */
  acceptData(seq: number, payload: Uint8Array): Promise<void>;
  /** Ends the stream because its socket or peer went away. */
  terminate(reason: string): void;
}

/** The default and the harness-side limits of inbound messages. */
export const HARNESS_REQUEST_LIMIT = 8 * 1024;
/** Limit of data notifications at the harness. */
export const HARNESS_DATA_NOTIFICATION_LIMIT = 2 * 1024 * 1024;
/** Records per socket write on the libcrypto path (one recycled buffer). */
const RECORDS_PER_WRITE = 16;
/** Records sealed or opened at once (WebCrypto runs them in parallel). */
const CRYPTO_WINDOW = 4;
const DATA_NOTIFICATIONS = new Set([
  "process/output",
  "process/exited",
  "process/closed",
  "http/request/bodyDelta",
]);

/** A request carrying a trace context (sent in a batch of its own). */
function isTracedRequest(message: JsonRpcMessage): boolean {
  return "method" in message && "id" in message && (message as JsonRpcRequest).trace !== undefined;
}

/** The harness's inbound limits: 8 KiB requests/notifications, 2 MiB data notifications, 64 MiB responses. */
export function harnessInboundLimit(message: IncomingMessage): number | null {
  const m = message as { method?: unknown };
  if (typeof m.method !== "string") return null;
  return DATA_NOTIFICATIONS.has(m.method) ? HARNESS_DATA_NOTIFICATION_LIMIT : HARNESS_REQUEST_LIMIT;
}

/** Builds the stream over the split cipher states. */
export function secureConnection(
  send: RecordCipher,
  receive: RecordCipher,
  io: SecureStreamIo,
  options: SecureConnectionOptions,
): SecureStream {
  return new RelayStream(send, receive, io, options);
}

/** See {@linkcode secureConnection}. */
class RelayStream implements SecureStream {
  readonly connection: Connection;
  readonly #send: RecordCipher;
  readonly #receive: RecordCipher;
  readonly #io: SecureStreamIo;
  readonly #options: SecureConnectionOptions;
  readonly #latch = closeLatch();
  readonly #ordered = new OrderedCiphertext();
  readonly #seq = new SequenceCounter();
  readonly #assembler = new MessageAssembler();
  readonly #scratch = new Uint8Array(MAX_RECORD_PLAINTEXT);
  readonly #decode = strictUtf8Decoder();
  readonly #maxQueued: number;
  readonly #output: ReturnType<typeof createOutputSink>;
  #controller!: ReadableStreamDefaultController<IncomingMessage>;
  /** Records being opened (WebCrypto), in nonce order. */
  readonly #decrypting: Promise<Uint8Array>[] = [];
  #processing: Promise<void> | null = null;
  #room: PromiseWithResolvers<void> | null = null;
  #progress: PromiseWithResolvers<void> | null = null;
  readonly #deliver = (bytes: Uint8Array) => this.#deliverMessage(bytes);

  constructor(
    send: RecordCipher,
    receive: RecordCipher,
    io: SecureStreamIo,
    options: SecureConnectionOptions,
  ) {
    this.#send = send;
    this.#receive = receive;
    this.#io = io;
    this.#options = options;
    this.#maxQueued = options.maxQueuedMessages ?? Infinity;
    const readable = new ReadableStream<IncomingMessage>({
      start: (c) => {
        this.#controller = c;
      },
      pull: () => {
        this.#room?.resolve();
        this.#room = null;
      },
      cancel: () => this.#finish({ reason: "closed locally" }, true),
    }, { highWaterMark: 16 });
    this.#output = createOutputSink(
      lengthPrefixFraming,
      (bytes, alone) => this.#sendBatch(bytes, alone),
      () => {
        this.#finish({ reason: "closed locally" }, true);
        return Promise.resolve();
      },
      // Every record is sealed (copied) before the write resolves.
      { reuseBuffers: true, alone: isTracedRequest },
    );
    this.connection = messageConnection({
      input: readable,
      output: this.#output,
      closed: this.#latch.promise,
      label: options.label,
      maxOutgoingBytes: MAX_RELAY_MESSAGE,
      close: (reason) => this.#finish({ reason }, true),
    });
  }

  acceptData(s: number, payload: Uint8Array): Promise<void> {
    if (this.#latch.done) return Promise.resolve();
    let released: Uint8Array[];
    try {
      released = this.#ordered.accept(s, payload);
    } catch (error) {
      this.#finish({ reason: (error as Error).message, error }, true);
      return Promise.resolve();
    }
    if (this.#receive.native) {
      // libcrypto: opened synchronously, in order, into one reused buffer.
      try {
        for (const record of released) {
          this.#assembler.push(this.#receive.openNextInto(record, this.#scratch), this.#deliver);
        }
      } catch (error) {
        this.#finish({ reason: (error as Error).message, error }, true);
        return Promise.resolve();
      }
    } else {
      for (const record of released) {
        // The nonce is taken now, in order; decryptions overlap.
        const opened = this.#receive.openNext(record);
        opened.catch(() => {});
        this.#decrypting.push(opened);
      }
      if (!this.#processing && this.#decrypting.length > 0) this.#processing = this.#process();
    }
    if (this.#maxQueued !== Infinity) return Promise.resolve();
    return this.#waitForRoom();
  }

  terminate(reason: string): void {
    this.#finish({ reason }, false);
  }

  #finish(info: CloseInfo, notifyPeer: boolean): void {
    if (this.#latch.done) return;
    this.#latch.resolve(info);
    this.#output.fail(new Error(`relay stream closed: ${info.reason}`));
    try {
      this.#controller.close();
    } catch { /* closed */ }
    this.#room?.resolve();
    this.#progress?.resolve();
    if (notifyPeer) this.#io.end(info.reason);
  }

  #deliverMessage(bytes: Uint8Array): void {
    const options = this.#options;
    const message =
      decodeLargeMessage(bytes, options.base64Members, DEFAULT_JSON_LIMITS, this.#decode) ??
        this.#decodeText(bytes);
    const limit = options.inboundLimit?.(message) ?? null;
    if (limit !== null && bytes.length > limit) {
      throw new Error(`Noise relay JSON-RPC message exceeds maximum length of ${limit} bytes`);
    }
    this.#controller.enqueue(message);
    if ((this.#controller.desiredSize ?? 0) < -this.#maxQueued) {
      throw new Error("relay stream inbound queue overflow");
    }
  }

  /** The message the general way (invalid UTF-8 ends the stream). */
  #decodeText(bytes: Uint8Array): IncomingMessage {
    let text: string;
    try {
      text = this.#decode(bytes);
    } catch {
      throw new Error("invalid UTF-8 in a relay JSON-RPC message");
    }
    return decodeMessage(text, `failed to parse JSON-RPC message from ${this.#options.label}`);
  }

  /** Hands decrypted records, in order, to the message assembler. */
  async #process(): Promise<void> {
    try {
      while (this.#decrypting.length > 0 && !this.#latch.done) {
        const plaintext = await this.#decrypting[0]!;
        this.#decrypting.shift();
        this.#assembler.push(plaintext, this.#deliver);
        this.#progress?.resolve();
        this.#progress = null;
      }
    } catch (error) {
      this.#finish({ reason: (error as Error).message, error }, true);
    } finally {
      this.#processing = null;
      this.#progress?.resolve();
      this.#progress = null;
    }
  }

  /**
   * Backpressure for a socket that carries only this stream (the harness):
   * holds the reader while records wait to be decrypted or messages to be read.
   */
  async #waitForRoom(): Promise<void> {
    for (;;) {
      if (this.#latch.done) return;
      if (this.#decrypting.length >= CRYPTO_WINDOW) {
        this.#progress ??= Promise.withResolvers<void>();
        await this.#progress.promise;
      } else if ((this.#controller.desiredSize ?? 1) <= 0) {
        this.#room ??= Promise.withResolvers<void>();
        await this.#room.promise;
      } else return;
    }
  }

  /** Seals a batch of framed messages into records and sends them in nonce order. */
  async #sendBatch(bytes: Uint8Array, alone: unknown): Promise<void> {
    const io = this.#io;
    const send = this.#send;
    const seq = this.#seq;
    // A traced request travels in a batch of its own: its first record
    // carries the trace context in the frame's cleartext header, for the
    // relay's logs.
    const trace = (alone as JsonRpcRequest | undefined)?.trace;
    if (trace) {
      const first = bytes.subarray(0, MAX_RECORD_PLAINTEXT);
      await io.sendData(seq.take(), await send.seal(first), trace);
      bytes = bytes.subarray(first.length);
    }
    if (send.native && io.sendDataBatch) {
      // Sealed synchronously into the socket's frames, in nonce order, up
      // to RECORDS_PER_WRITE records per socket write.
      for (let at = 0; at < bytes.length; at += MAX_RECORD_PLAINTEXT * RECORDS_PER_WRITE) {
        const plaintexts: Uint8Array[] = [];
        const end = Math.min(bytes.length, at + MAX_RECORD_PLAINTEXT * RECORDS_PER_WRITE);
        for (let p = at; p < end; p += MAX_RECORD_PLAINTEXT) {
          plaintexts.push(bytes.subarray(p, Math.min(end, p + MAX_RECORD_PLAINTEXT)));
        }
        await io.sendDataBatch(
          plaintexts.map((p) => ({ seq: seq.take(), length: p.length + TAGLEN })),
          (i, out) => send.sealInto(plaintexts[i]!, out),
        );
      }
      return;
    }
    // Seal up to CRYPTO_WINDOW records at once (WebCrypto runs them in
    // parallel), send them in nonce order.
    const inFlight: Promise<Uint8Array>[] = [];
    for (let at = 0; at < bytes.length; at += MAX_RECORD_PLAINTEXT) {
      inFlight.push(send.seal(bytes.subarray(at, at + MAX_RECORD_PLAINTEXT)));
      if (inFlight.length >= CRYPTO_WINDOW) {
        await io.sendData(seq.take(), await inFlight.shift()!);
      }
    }
    while (inFlight.length > 0) await io.sendData(seq.take(), await inFlight.shift()!);
  }
}
