/**
 * JSON-RPC over a {@linkcode WebSocketChannel}: one message per data frame.
 * Text and binary frames are accepted; output is always text.
 *
 * @module
 */

import { closeLatch, type Connection, messageConnection } from "./connection.ts";
import { decodeMessage, type IncomingMessage } from "./message.ts";
import { createOutputSink } from "./output_sink.ts";
import { DEFAULT_JSON_LIMITS, type StrictJsonLimits } from "./strict_json.ts";
import type { WebSocketChannel } from "../websocket/channel.ts";
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
  const messages = channel.messages.getReader();

  channel.closed.then((info) => {
    latch.resolve({
      reason: info.wasClean
        ? `closed by peer (${info.code}${info.reason ? ` ${info.reason}` : ""})`
        : info.reason || `connection lost (${info.code})`,
    });
  });

  const readable = new ReadableStream<IncomingMessage>({
    async pull(controller) {
      let result: ReadableStreamReadResult<string | Uint8Array>;
      try {
        result = await messages.read();
      } catch (error) {
        latch.resolve({ reason: `read failed: ${(error as Error).message}`, error });
        controller.close();
        return;
      }
      if (result.done) {
        await channel.closed;
        controller.close();
        return;
      }
      let text: string;
      if (typeof result.value === "string") {
        text = result.value;
      } else {
        try {
          text = decode(result.value);
        } catch {
          controller.enqueue({ malformed: `${prefix}: invalid UTF-8 in a binary frame` });
          return;
        }
      }
      controller.enqueue(decodeMessage(text, prefix, limits));
    },
    cancel() {
      channel.abort("closed locally");
    },
  }, { highWaterMark: 0 });

  const output = createOutputSink(
    channel.textFraming,
    (bytes) => channel.writeRaw(bytes),
    () => channel.close(),
    { highWaterMark: options.outputHighWaterMark, reuseBuffers: channel.reusableWrites },
  );
  channel.closed.then(() => output.fail(new Error("WebSocket closed")));

  return messageConnection({
    readable,
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
          while (!(await messages.read()).done) { /* discard */ }
        } catch { /* ended */ }
      })();
    },
  });
}
