/**
 * JSON-RPC inside the encrypted stream: each message is its JSON prefixed
 * with a big-endian u32 length (1 ≤ length ≤ 64 MiB, checked as soon as
 * the prefix arrives), cut into records of at most 61 440 bytes. Receivers
 * handle messages split across records and several messages per record.
 *
 * @module
 */

import type { Framing } from "../jsonrpc/output_sink.ts";

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
  #parts: Uint8Array[] = [];
  #have = 0;
  #need = -1;
  readonly #max: number;

  /** Rejects messages over `max` bytes. */
  constructor(max = MAX_RELAY_MESSAGE) {
    this.#max = max;
  }

  /** Feeds a record; calls `onMessage` for each complete message. */
  push(record: Uint8Array, onMessage: (message: Uint8Array) => void): void {
    let data = record;
    while (data.length > 0) {
      if (this.#need === -1) {
        // Collect the 4-byte prefix (it may itself be split).
        const want = 4 - this.#have;
        const take = Math.min(want, data.length);
        this.#parts.push(data.subarray(0, take));
        this.#have += take;
        data = data.subarray(take);
        if (this.#have < 4) return;
        const prefix = this.#join(4);
        const length = new DataView(prefix.buffer, prefix.byteOffset).getUint32(0, false);
        if (length < 1 || length > this.#max) {
          throw new MessageFramingError(
            `Noise relay JSON-RPC message exceeds maximum length of ${this.#max} bytes`,
          );
        }
        this.#need = length;
        this.#parts = [];
        this.#have = 0;
        continue;
      }
      const take = Math.min(this.#need - this.#have, data.length);
      this.#parts.push(data.subarray(0, take));
      this.#have += take;
      data = data.subarray(take);
      if (this.#have === this.#need) {
        const message = this.#join(this.#need);
        this.#parts = [];
        this.#have = 0;
        this.#need = -1;
        onMessage(message);
      }
    }
  }

  #join(n: number): Uint8Array {
    if (this.#parts.length === 1) return this.#parts[0]!;
    const out = new Uint8Array(n);
    let o = 0;
    for (const p of this.#parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }
}
