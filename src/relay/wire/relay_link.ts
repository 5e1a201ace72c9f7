/**
 * Sending relay frames over one rendezvous WebSocket: whole frames, and
 * Data frames whose ciphertext is written straight into the outgoing
 * WebSocket message after the protobuf prefix (one buffer per record).
 *
 * @module
 */

import type { WebSocketChannel } from "../../websocket/channel.ts";
import { encodeRelayDataPrefix, encodeRelayFrame, type RelayFrame } from "./frame.ts";

/** A Data frame's sequence number and payload length. */
export interface DataRecord {
  /** Sequence number. */
  readonly seq: number;
  /** Payload (ciphertext) bytes. */
  readonly length: number;
}

/** One socket's frame sender. */
export interface RelayLink {
  /** Sends a frame; resolves when the socket took it. */
  send(frame: RelayFrame): Promise<void>;
  /**
   * Sends Data frames (stream `streamId`, sequence numbers `records[i].seq`)
   * whose `records[i].length`-byte payloads `fill(i, payload)` writes in
   * place, in one socket write.
   */
  sendDataBatch(
    streamId: string,
    records: readonly DataRecord[],
    fill: (index: number, payload: Uint8Array) => void,
  ): Promise<void>;
}

/** The link over `channel`. */
export function relayLink(channel: WebSocketChannel): RelayLink {
  return {
    send: (frame) => channel.send(encodeRelayFrame(frame)),
    sendDataBatch(streamId, records, fill) {
      const prefixes = records.map((r) => encodeRelayDataPrefix(streamId, r.seq, r.length));
      return channel.sendBinaryBatch(
        records.map((r, i) => prefixes[i]!.length + r.length),
        (i, message) => {
          const prefix = prefixes[i]!;
          message.set(prefix);
          fill(i, message.subarray(prefix.length));
        },
      );
    },
  };
}
