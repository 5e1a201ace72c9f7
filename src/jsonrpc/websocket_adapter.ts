/**
 * JSON-RPC over a {@linkcode WebSocketChannel}: one message per data frame.
 * Text and binary frames are accepted; output is always text.
 *
 * @module
 */

import {
  closeLatch,
  type Connection,
  messageConnection,
  type MessageSource,
} from "./connection.ts";
import { decodeMessage, type IncomingMessage } from "./message.ts";
import { createOutputSink } from "./output_sink.ts";
import { DEFAULT_JSON_LIMITS, type StrictJsonLimits } from "./strict_json.ts";
import { type AssembledMessage, RawText, type WebSocketChannel } from "../websocket/channel.ts";
import { decodeLargeMessage } from "./large_message.ts";
import { messageSpare } from "../util/spare_buffer.ts";
import { strictUtf8Decoder } from "../util/utf8.ts";

/** Options for {@linkcode webSocketConnection}. */
export interface WebSocketConnectionOptions {
  /** Label for logs, e.g. `ws 127.0.0.1:5000`. */
  readonly label?: string;
  /** Prefix of parse-error messages. */
  readonly parseErrorPrefix?: string;
  /** JSON value budget and depth. */
  readonly jsonLimits?: StrictJsonLimits;
  /** Output bytes that may wait before writes block. Default 1 MiB. */
  readonly outputHighWaterMark?: number;
  /**
   * Largest message the peer accepts. Default 64 MiB, the common WebSocket
   * client default (tungstenite, which Codex uses).
   */
  readonly maxOutgoingBytes?: number;
  /**
   * Where a large message's base64 may be decoded straight from its bytes
   * (see {@linkcode decodeLargeMessage}; the channel must be made with
   * `rawTextFrom`). Default: nowhere.
   */
  readonly base64Members?: ReadonlyMap<string, string>;
}

/** The message size WebSocket peers are assumed to accept unless told otherwise. */
export const DEFAULT_PEER_MESSAGE_LIMIT = 64 * 1024 * 1024;

/** Builds a {@linkcode Connection} over an open WebSocket channel. */
export function webSocketConnection(
  channel: WebSocketChannel,
  options: WebSocketConnectionOptions = {},
): Connection {
  const label = options.label ?? "websocket";
  const prefix = options.parseErrorPrefix ?? `failed to parse JSON-RPC message from ${label}`;
  const limits = options.jsonLimits ?? DEFAULT_JSON_LIMITS;
  const latch = closeLatch();
  const decode = strictUtf8Decoder();

  channel.closed.then((info) => {
    latch.resolve({
      reason: info.wasClean
        ? `closed by peer (${info.code}${info.reason ? ` ${info.reason}` : ""})`
        : info.reason || `connection lost (${info.code})`,
    });
  });

  const incoming = (value: AssembledMessage | null): IncomingMessage | Promise<null> => {
    // The end is reported once the channel has settled why.
    if (value === null) return channel.closed.then(() => null);
    if (value instanceof RawText) {
      const raw = value;
      try {
        const message = decodeLargeMessage(raw.bytes, options.base64Members, limits, decode);
        if (message !== null) return message;
        value = decode(raw.bytes);
      } catch {
        // As for any text frame that is not UTF-8: the channel fails (1007).
        return channel.failInvalidText().then(() => channel.closed).then(() => null);
      } finally {
        // Nothing refers to the message's own buffer any more.
        if (raw.owned) messageSpare.give(raw.bytes);
      }
    }
    if (typeof value !== "string") {
      try {
        value = decode(value);
      } catch {
        return { malformed: `${prefix}: invalid UTF-8 in a binary frame` };
      }
    }
    return decodeMessage(value, prefix, limits);
  };
  const readFailed = (error: unknown): null => {
    latch.resolve({ reason: `read failed: ${(error as Error).message}`, error });
    return null;
  };
  const input: MessageSource = {
    next() {
      const value = channel.nextMessage();
      return value instanceof Promise ? value.then(incoming, readFailed) : incoming(value);
    },
    cancel() {
      channel.abort("closed locally");
    },
  };

  const output = createOutputSink(
    channel.textFraming,
    (bytes) => channel.writeRaw(bytes),
    () => channel.close(),
    { highWaterMark: options.outputHighWaterMark, reuseBuffers: channel.reusableWrites },
  );
  channel.closed.then(() => output.fail(new Error("WebSocket closed")));

  return messageConnection({
    input,
    output,
    closed: latch.promise,
    label,
    maxOutgoingBytes: options.maxOutgoingBytes ?? DEFAULT_PEER_MESSAGE_LIMIT,
    close(reason) {
      latch.resolve({ reason });
      channel.close(1000, "").catch(() => {});
      // Nobody reads messages any more: keep taking frames, so the peer's
      // Close frame is seen and the handshake ends at once, not at its timeout.
      (async () => {
        try {
          while ((await channel.nextMessage()) !== null) { /* discard */ }
        } catch { /* ended */ }
      })();
    },
  });
}
