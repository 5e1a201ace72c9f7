/**
 * A WebSocket endpoint over any duplex byte stream (a TCP connection after
 * the HTTP upgrade), for either role.
 *
 * Unlike Deno's event-based `WebSocket`, inbound messages are pulled
 * ({@linkcode WebSocketChannel.nextMessage}, or the `messages` stream):
 * bytes are read from the socket only when the consumer asks, so a slow
 * consumer slows the sender through TCP. Outbound writes resolve when the
 * transport has taken the bytes. Pings go out on a fixed interval; a peer
 * that never answers is not disconnected for it.
 *
 * The parts, by role: `socket_io.ts` moves the bytes (three transport
 * kinds), `assembler.ts` turns frames into messages, `sender.ts` turns
 * messages into frames; this module runs the connection — the read loop,
 * control frames, the closing handshake and keep-alive.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";
import {
  CloseCode,
  encodeFrame,
  type Frame,
  frameInPlace,
  FrameParser,
  Opcode,
  type PayloadPool,
  WebSocketProtocolError,
} from "./frame.ts";
import type { Framing } from "../util/framing.ts";
import {
  type AssembledMessage,
  MessageAssembler,
  RawText,
  type WebSocketMessage,
} from "./assembler.ts";
import { type ByteDuplex, SocketIo } from "./socket_io.ts";
import {
  closePayload,
  encodeMessage,
  frameBinaryBatch,
  type FrameLimits,
  textFraming,
} from "./sender.ts";

export {
  type AssembledMessage,
  isValidCloseCode,
  RawText,
  type WebSocketMessage,
} from "./assembler.ts";
export { truncateUtf8 } from "./sender.ts";
export type { ByteDuplex } from "./socket_io.ts";

/**
 * What this package's own servers add to {@linkcode WebSocketChannelOptions}
 * (not part of the public options): pooled payload buffers, for a consumer
 * that recycles what it has forwarded (the relay).
 */
export interface PooledChannelOptions extends WebSocketChannelOptions {
  /** Where received payloads are parsed into, and go back to. */
  readonly payloadPool?: PayloadPool;
}

/** Options for {@linkcode WebSocketChannel}. */
export interface WebSocketChannelOptions {
  /** `server` expects masked frames and sends unmasked ones; `client` the reverse. */
  readonly role: "server" | "client";
  /** Largest accepted frame payload. Default 16 MiB. */
  readonly maxFrameBytes?: number;
  /** Largest accepted reassembled message. Default 64 MiB. */
  readonly maxMessageBytes?: number;
  /** Ping interval in milliseconds; 0 disables pings. Default 30 000. */
  readonly pingIntervalMs?: number;
  /**
   * End the channel (reason `pong_timeout`) when a ping is not answered
   * within this many milliseconds; no new ping goes out while one is
   * outstanding. Default: never (idle peers are kept).
   */
  readonly pongTimeoutMs?: number;
  /** Bytes already read past the HTTP head. */
  readonly leftover?: Uint8Array;
  /**
   * The transport is done with written bytes once a write resolves (true
   * for Deno sockets), so output buffers may be reused. Default false.
   */
  readonly reusableWrites?: boolean;
  /**
   * Text messages of this many bytes or more are handed out as their bytes
   * ({@linkcode RawText}: UTF-8 checked by the consumer, who calls
   * {@linkcode WebSocketChannel.failInvalidText} when it is not). Default:
   * none.
   */
  readonly rawTextFrom?: number;
}

/** How a channel ended. */
export interface WebSocketCloseInfo {
  /** Close code received or sent (1006: no close frame). */
  readonly code: number;
  /** Close reason text. */
  readonly reason: string;
  /** True when the close handshake completed. */
  readonly wasClean: boolean;
}

/** An unmasked ping with no payload: FIN + opcode 9, length 0. */
const UNMASKED_EMPTY_PING = new Uint8Array([0x80 | Opcode.Ping, 0]);
/** Size of a recycled batch buffer: 16 relay records with their headers. */
const SPARE_MAX = 16 * (64 * 1024 + 256);
/** Recycled batch buffers kept per channel. */
const SPARE_BUFFERS = 2;

/** A WebSocket endpoint; see the module documentation. */
export class WebSocketChannel {
  /** Resolves once when the channel has ended. */
  readonly closed: Promise<WebSocketCloseInfo>;
  /** Largest message this side accepts. */
  readonly maxMessageBytes: number;
  /** Largest frame this side accepts (and emits). */
  readonly maxFrameBytes: number;
  /** Written buffers may be reused once a write resolves. */
  readonly reusableWrites: boolean;

  #io: SocketIo;
  /** Recycled buffers of {@linkcode sendBinaryBatch}. */
  #spare: Uint8Array[] = [];
  #parser: FrameParser;
  #resolveClosed!: (info: WebSocketCloseInfo) => void;
  #ended = false;
  #closeSent = false;
  #pingTimer: ReturnType<typeof setTimeout> | undefined;
  #pingIntervalMs: number;
  #pongTimeoutMs: number;
  #pongTimer: ReturnType<typeof setTimeout> | undefined;
  #pendingFrames: Frame[] = [];
  /** True while {@linkcode #next} runs. */
  #inNext = false;
  #leftover: Uint8Array | undefined;
  /** The read in progress, if any (reads are serialised). */
  #reading: Promise<AssembledMessage | null> | null = null;
  /** Set once {@linkcode nextMessage} is used: that consumer drains at close. */
  #directConsumer = false;
  /** {@linkcode messages}, made on first use. */
  #messages: ReadableStream<WebSocketMessage> | null = null;
  #assembler: MessageAssembler;
  #limits: FrameLimits;

  /** Wraps `transport`; the HTTP handshake must already be done. */
  constructor(transport: ByteDuplex, options: WebSocketChannelOptions) {
    this.#io = new SocketIo(
      transport,
      () => this.#end({ code: 1006, reason: "write failed", wasClean: false }),
    );
    this.maxFrameBytes = options.maxFrameBytes ?? 16 * 1024 * 1024;
    this.maxMessageBytes = options.maxMessageBytes ?? 64 * 1024 * 1024;
    this.reusableWrites = options.reusableWrites ?? false;
    this.#parser = new FrameParser({
      maxFramePayload: this.maxFrameBytes,
      expectMasked: options.role === "server",
      // Text frames are decoded before the next read reuses the buffer
      // (pending frames are all handled before reading again).
      lendText: true,
      ...((options as PooledChannelOptions).payloadPool
        ? { pool: (options as PooledChannelOptions).payloadPool! }
        : {}),
    });
    this.#leftover = options.leftover && options.leftover.length > 0 ? options.leftover : undefined;
    this.#pingIntervalMs = options.pingIntervalMs ?? 30_000;
    this.#pongTimeoutMs = options.pongTimeoutMs ?? 0;
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    this.#assembler = new MessageAssembler(this.maxMessageBytes, options.rawTextFrom);
    this.#limits = { masked: options.role === "client", maxFrameBytes: this.maxFrameBytes };
    this.#schedulePing();
  }

  /**
   * Inbound data messages as a stream, pulled on demand (made on first use:
   * a consumer of {@linkcode nextMessage} never pays for it). Cancelling it
   * closes the channel (1001).
   */
  get messages(): ReadableStream<WebSocketMessage> {
    return this.#messages ??= new ReadableStream<WebSocketMessage>({
      pull: async (controller) => {
        const message = await this.#nextMessage();
        if (message === null) {
          controller.close();
        } else if (message instanceof RawText) {
          const text = this.#assembler.text(message);
          if (text === null) {
            await this.failInvalidText();
            controller.close();
          } else {
            controller.enqueue(text);
          }
        } else {
          controller.enqueue(message);
        }
      },
      cancel: () => this.close(CloseCode.GoingAway, "consumer cancelled"),
    }, { highWaterMark: 0 });
  }

  /** True once the channel has ended. */
  get ended(): boolean {
    return this.#ended;
  }

  #schedulePing(): void {
    if (this.#pingIntervalMs <= 0 || this.#ended) return;
    this.#pingTimer = setTimeout(() => {
      this.#pingTimer = undefined;
      if (this.#ended || this.#closeSent) return;
      if (this.#pongTimer === undefined) {
        // A server's ping is always the same two bytes (a client's is masked).
        const ping = this.#limits.masked
          ? encodeFrame(Opcode.Ping, new Uint8Array(0), true)
          : [UNMASKED_EMPTY_PING];
        this.writeRaw(...ping).catch(() => {});
        if (this.#pongTimeoutMs > 0) {
          this.#pongTimer = setTimeout(() => this.abort("pong_timeout"), this.#pongTimeoutMs);
        }
      }
      this.#schedulePing();
    }, this.#pingIntervalMs);
  }

  /** Writes pre-encoded frame bytes, in order with every other write. */
  writeRaw(...chunks: Uint8Array[]): Promise<void> {
    if (this.#ended) return Promise.reject(new Error("WebSocket is closed"));
    return this.#io.write(chunks.length === 1 ? chunks[0]! : concatBytes(chunks));
  }

  /**
   * Encodes a data message into frames (fragmented at the frame limit).
   * Returns the bytes to hand to {@linkcode writeRaw}.
   */
  encodeMessage(data: string | Uint8Array): Uint8Array[] {
    return encodeMessage(data, this.#limits);
  }

  /**
   * Framing for JSON-RPC output sinks: one text frame per message, written
   * in place; larger messages are fragmented at the frame limit.
   */
  get textFraming(): Framing {
    return textFraming(this.#limits);
  }

  /** Sends one data message; resolves when the transport has taken it. */
  send(data: string | Uint8Array): Promise<void> {
    if (!this.#limits.masked && typeof data !== "string" && data.length <= this.maxFrameBytes) {
      // A payload this process received: framed in place, not copied.
      const framed = frameInPlace(Opcode.Binary, data);
      if (framed) return this.writeRaw(framed);
    }
    return this.writeRaw(...this.encodeMessage(data));
  }

  /**
   * Sends binary messages of `lengths[i]` bytes that `fill(i, payload)`
   * writes straight into their outgoing frames (masked in place afterwards
   * on the client side): one buffer and one write for all of them, no copy
   * of any payload. Resolves when the transport has taken them. Messages
   * over the frame limit are fragmented as {@linkcode send} does.
   */
  sendBinaryBatch(
    lengths: readonly number[],
    fill: (index: number, payload: Uint8Array) => void,
  ): Promise<void> {
    // With a transport that is done with bytes once a write resolves, batch
    // buffers are recycled (a few, each up to SPARE_MAX bytes).
    let buffer: Uint8Array | undefined;
    const framed = frameBinaryBatch(lengths, fill, this.#limits, (size) => {
      const pooled = this.reusableWrites ? this.#spare.pop() : undefined;
      buffer = pooled !== undefined && pooled.length >= size
        ? pooled
        : new Uint8Array(this.reusableWrites && size <= SPARE_MAX ? SPARE_MAX : size);
      return buffer;
    });
    if (framed === null) return this.#sendLargeBatch(lengths, fill);
    const written = this.writeRaw(framed);
    const used = buffer!;
    if (!this.reusableWrites || used.length !== SPARE_MAX) return written;
    return written.then(() => {
      if (this.#spare.length < SPARE_BUFFERS) this.#spare.push(used);
    });
  }

  async #sendLargeBatch(
    lengths: readonly number[],
    fill: (index: number, payload: Uint8Array) => void,
  ): Promise<void> {
    for (let i = 0; i < lengths.length; i++) {
      const payload = new Uint8Array(lengths[i]!);
      fill(i, payload);
      await this.send(payload);
    }
  }

  /**
   * Starts the closing handshake (or finishes it); the transport is closed
   * once the peer answers or after `timeoutMs`.
   */
  async close(code: number = CloseCode.Normal, reason = "", timeoutMs = 2000): Promise<void> {
    if (this.#ended) return;
    if (!this.#closeSent) {
      this.#closeSent = true;
      try {
        await this.writeRaw(
          ...encodeFrame(Opcode.Close, closePayload(code, reason), this.#limits.masked),
        );
      } catch {
        this.#end({ code, reason, wasClean: false });
        return;
      }
    }
    const timer = setTimeout(() => this.#end({ code, reason, wasClean: false }), timeoutMs);
    try {
      // A consumer (nextMessage, or a reader holding the stream) sees the
      // end itself; otherwise keep reading until the peer's Close frame (or
      // EOF) ends the channel.
      if (this.#directConsumer || this.#messages?.locked) {
        await this.closed;
      } else {
        while ((await this.#nextMessage()) !== null) { /* discard */ }
      }
    } catch {
      // Reading failed: the channel ends anyway.
      await this.closed;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Drops the connection without a closing handshake. */
  abort(reason = "aborted"): void {
    this.#end({ code: 1006, reason, wasClean: false });
  }

  #end(info: WebSocketCloseInfo): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#pingTimer);
    this.#pingTimer = undefined;
    clearTimeout(this.#pongTimer);
    this.#pongTimer = undefined;
    this.#io.close();
    this.#resolveClosed(info);
  }

  async #fail(error: WebSocketProtocolError): Promise<void> {
    if (!this.#closeSent) {
      this.#closeSent = true;
      await this.writeRaw(
        ...encodeFrame(
          Opcode.Close,
          closePayload(error.closeCode, error.message),
          this.#limits.masked,
        ),
      ).catch(() => {});
    }
    this.#end({ code: error.closeCode, reason: error.message, wasClean: false });
  }

  /**
   * The next data message, or `null` once the channel has ended: a plain
   * value when a complete frame is already parsed, else a promise. Calls are
   * serialised (a call while another is pending waits for it). For a single
   * consumer in place of {@linkcode messages}, without its stream machinery.
   */
  nextMessage(): AssembledMessage | null | Promise<AssembledMessage | null> {
    this.#directConsumer = true;
    return this.#nextMessage();
  }

  #nextMessage(): AssembledMessage | null | Promise<AssembledMessage | null> {
    if (this.#reading !== null) {
      const again = () => this.#nextMessage();
      return this.#reading.then(again, again);
    }
    const frame = this.#pendingFrames[0];
    if (frame !== undefined && !this.#ended && this.#assembler.isWholeData(frame)) {
      // A complete data frame is waiting: no promise.
      try {
        const message = this.#assembler.complete(frame.opcode, frame.payload, frame.lent !== true);
        this.#pendingFrames.shift();
        return message;
      } catch { /* over the limit or invalid UTF-8: the general path fails the channel */ }
    }
    const reading = this.#next();
    // #next clears #reading as it finishes: unless it already has (without
    // waiting for anything), later calls wait for it.
    if (this.#inNext) this.#reading = reading;
    return reading;
  }

  async #next(): Promise<AssembledMessage | null> {
    this.#inNext = true;
    try {
      for (;;) {
        if (this.#ended) return null;
        while (this.#pendingFrames.length > 0) {
          const frame = this.#pendingFrames.shift()!;
          let message: AssembledMessage | null;
          try {
            // A whole data frame needs no await (control frames may write).
            message = this.#assembler.isWholeData(frame)
              ? this.#assembler.complete(frame.opcode, frame.payload, frame.lent !== true)
              : await this.#handleFrame(frame);
          } catch (error) {
            if (await this.#failedOn(error)) return null;
            throw error;
          }
          if (this.#ended) return null;
          if (message !== null) return message;
        }
        let read;
        if (this.#leftover) {
          read = { chunk: this.#leftover, intoTail: false };
          this.#leftover = undefined;
        } else {
          read = await this.#io.read(this.#parser.payloadTail());
          if (read === null) {
            this.#end({
              code: 1006,
              reason: "connection closed without a close frame",
              wasClean: false,
            });
            return null;
          }
        }
        try {
          // Every pending frame was handled before this read.
          this.#pendingFrames = read.intoTail
            ? this.#parser.filledTail(read.chunk)
            : this.#parser.push(read.chunk);
        } catch (error) {
          if (await this.#failedOn(error)) return null;
          throw error;
        }
      }
    } finally {
      this.#inNext = false;
      this.#reading = null;
    }
  }

  /**
   * Ends the channel as for a text message that is not UTF-8 (close code
   * 1007): what a consumer of a {@linkcode RawText} does when its check fails.
   */
  async failInvalidText(): Promise<void> {
    await this.#fail(
      new WebSocketProtocolError(CloseCode.InvalidPayload, "invalid UTF-8 in a text frame"),
    );
  }

  /** Ends the channel on a protocol violation (its close code sent); false for other errors. */
  async #failedOn(error: unknown): Promise<boolean> {
    if (!(error instanceof WebSocketProtocolError)) return false;
    await this.#fail(error);
    return true;
  }

  /** Handles one frame; returns a completed data message, if any. */
  async #handleFrame(frame: Frame): Promise<AssembledMessage | null> {
    switch (frame.opcode) {
      case Opcode.Ping:
        if (!this.#closeSent) {
          await this.writeRaw(...encodeFrame(Opcode.Pong, frame.payload, this.#limits.masked))
            .catch(() => {});
        }
        return null;
      case Opcode.Pong:
        clearTimeout(this.#pongTimer);
        this.#pongTimer = undefined;
        return null;
      case Opcode.Close: {
        const { code, reason } = this.#assembler.closeFrame(frame.payload);
        if (!this.#closeSent) {
          this.#closeSent = true;
          const echo = frame.payload.length >= 2 ? frame.payload.subarray(0, 2) : new Uint8Array(0);
          await this.writeRaw(...encodeFrame(Opcode.Close, echo, this.#limits.masked)).catch(
            () => {},
          );
        }
        this.#end({ code, reason, wasClean: true });
        return null;
      }
      case Opcode.Text:
      case Opcode.Binary:
      case Opcode.Continuation:
        return this.#assembler.data(frame);
      default:
        throw new WebSocketProtocolError(
          CloseCode.ProtocolError,
          `unexpected opcode ${frame.opcode}`,
        );
    }
  }
}
