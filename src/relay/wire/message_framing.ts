/**
 * JSON-RPC inside the encrypted stream: each message is its JSON prefixed
 * with a big-endian u32 length (1 ≤ length ≤ 64 MiB, checked as soon as
 * the prefix arrives), cut into records of at most 61 440 bytes. Receivers
 * handle messages split across records and several messages per record.
 *
 * @module
 */

import type { Framing } from "../../util/framing.ts";

/** Largest JSON-RPC message. */
export const MAX_RELAY_MESSAGE = 64 * 1024 * 1024;

/** The length prefix was out of bounds. */
export class MessageFramingError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "MessageFramingError";
  }
}

const encoder = new TextEncoder();

/** Output-sink framing: a 4-byte big-endian length before each message. */
export const lengthPrefixFraming: Framing = {
  headerSize: () => 4,
  seal(out, payloadOffset, length) {
    new DataView(out.buffer, out.byteOffset).setUint32(payloadOffset - 4, length, false);
  },
  trailer: new Uint8Array(0),
  frameSlow(text) {
    const body = encoder.encode(text);
    const out = new Uint8Array(4 + body.length);
    new DataView(out.buffer).setUint32(0, body.length, false);
    out.set(body, 4);
    return out;
  },
  maxFastPayload: MAX_RELAY_MESSAGE,
};

/** Reassembles messages from decrypted records. */
export class MessageAssembler {
  readonly #prefix = new Uint8Array(4);
  #prefixHave = 0;
  /** Length of the message being assembled, or -1 while reading a prefix. */
  #need = -1;
  #have = 0;
  #message: Uint8Array | null = null;
  readonly #max: number;

  /** Rejects messages over `max` bytes. */
  constructor(max = MAX_RELAY_MESSAGE) {
    this.#max = max;
  }

  /**
   * Feeds a record; calls `onMessage` for each complete message. The record
   * may be a reused buffer: a message lying wholly inside it is handed out
   * as a view of it, so `onMessage` must be done with its argument when it
   * returns; parts of longer messages are copied.
   */
  push(record: Uint8Array, onMessage: (message: Uint8Array) => void): void {
    let data = record;
    while (data.length > 0) {
      if (this.#need === -1) {
        // The 4-byte prefix (it may itself be split across records).
        let length: number;
        if (this.#prefixHave === 0 && data.length >= 4) {
          length = readLength(data);
          data = data.subarray(4);
        } else {
          const take = Math.min(4 - this.#prefixHave, data.length);
          this.#prefix.set(data.subarray(0, take), this.#prefixHave);
          this.#prefixHave += take;
          data = data.subarray(take);
          if (this.#prefixHave < 4) return;
          this.#prefixHave = 0;
          length = readLength(this.#prefix);
        }
        if (length < 1 || length > this.#max) {
          throw new MessageFramingError(
            `Noise relay JSON-RPC message exceeds maximum length of ${this.#max} bytes`,
          );
        }
        this.#need = length;
        this.#have = 0;
        continue;
      }
      if (this.#message === null && data.length >= this.#need) {
        const message = data.subarray(0, this.#need);
        data = data.subarray(this.#need);
        this.#need = -1;
        onMessage(message);
        continue;
      }
      const take = Math.min(this.#need - this.#have, data.length);
      this.#reserve(this.#have + take);
      this.#message!.set(data.subarray(0, take), this.#have);
      this.#have += take;
      data = data.subarray(take);
      if (this.#have === this.#need) {
        const message = this.#message!.length === this.#need
          ? this.#message!
          : this.#message!.subarray(0, this.#need);
        this.#message = null;
        this.#need = -1;
        onMessage(message);
      }
    }
  }

  /**
   * Room for `bytes` of the current message: grown as bytes arrive (from
   * 1 MiB, doubling), so a declared length costs memory only once sent.
   */
  #reserve(bytes: number): void {
    const current = this.#message?.length ?? 0;
    if (bytes <= current) return;
    const size = Math.min(this.#need, Math.max(bytes, current * 2, 1024 * 1024));
    const grown = new Uint8Array(size);
    if (this.#message) grown.set(this.#message.subarray(0, this.#have));
    this.#message = grown;
  }
}

function readLength(bytes: Uint8Array): number {
  return ((bytes[0]! << 24) >>> 0) + (bytes[1]! << 16) + (bytes[2]! << 8) + bytes[3]!;
}
