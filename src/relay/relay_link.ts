/**
 * Sending relay frames over one rendezvous WebSocket: whole frames, and
 * Data frames whose ciphertext is written straight into the outgoing
 * WebSocket message after the protobuf prefix (one buffer per record).
 *
 * @module
 */

import type { WebSocketChannel } from "../jsonrpc/websocket/channel.ts";
import { encodeRelayDataPrefix, encodeRelayFrame, type RelayFrame } from "./frame.ts";

/** One socket's frame sender. */
export interface RelayLink {
  /** Sends a frame; resolves when the socket took it. */
  send(frame: RelayFrame): Promise<void>;
  /** Sends a Data frame whose `length`-byte payload `fill` writes in place. */
  sendDataWith(
    streamId: string,
    seq: number,
    length: number,
    fill: (payload: Uint8Array) => void,
  ): Promise<void>;
}

/** The link over `channel`. */
export function relayLink(channel: WebSocketChannel): RelayLink {
  return {
    send: (frame) => channel.send(encodeRelayFrame(frame)),
    sendDataWith(streamId, seq, length, fill) {
      const prefix = encodeRelayDataPrefix(streamId, seq, length);
      return channel.sendBinaryWith(prefix.length + length, (message) => {
        message.set(prefix);
        fill(message.subarray(prefix.length));
      });
    },
  };
}
