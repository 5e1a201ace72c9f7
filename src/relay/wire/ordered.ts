/**
 * Per-direction sequence handling before decryption: records are released
 * strictly in `seq` order (the Noise nonce is implicit, so nothing may be
 * decrypted out of order or twice). Duplicates and stale records are
 * dropped silently (the first copy wins); a gap is buffered up to 64 frames
 * ahead, 64 frames and 1 MiB in total, beyond which it is a protocol error.
 *
 * @module
 */

/** Most frames a gap may be ahead. */
export const REORDER_WINDOW = 64;
/** Most frames held. */
export const REORDER_MAX_FRAMES = 64;
/** Most bytes held. */
export const REORDER_MAX_BYTES = 1024 * 1024;
const U32_MAX = 0xffffffff;

/** The window was exceeded or the sequence space ran out. */
export class SequenceError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "SequenceError";
  }
}

/** See the module documentation. */
export class OrderedCiphertext {
  #next = 0;
  #held = new Map<number, Uint8Array>();
  #bytes = 0;

  /** The next expected sequence number. */
  get next(): number {
    return this.#next;
  }

  /** Accepts a record; returns the records now releasable, in order. */
  accept(seq: number, payload: Uint8Array): Uint8Array[] {
    if (seq < this.#next || this.#held.has(seq)) return [];
    if (seq > this.#next) {
      if (
        seq - this.#next > REORDER_WINDOW || this.#held.size >= REORDER_MAX_FRAMES ||
        this.#bytes + payload.length > REORDER_MAX_BYTES
      ) {
        throw new SequenceError("relay reorder window exceeded");
      }
      this.#held.set(seq, payload);
      this.#bytes += payload.length;
      return [];
    }
    const out = [payload];
    this.#advance();
    for (let p = this.#held.get(this.#next); p !== undefined; p = this.#held.get(this.#next)) {
      this.#held.delete(this.#next);
      this.#bytes -= p.length;
      out.push(p);
      this.#advance();
    }
    return out;
  }

  #advance(): void {
    if (this.#next === U32_MAX) throw new SequenceError("relay sequence number space exhausted");
    this.#next++;
  }
}

/** Hands out outbound sequence numbers (from 0, never wrapping). */
export class SequenceCounter {
  #next = 0;

  /** The next number. */
  take(): number {
    if (this.#next > U32_MAX) throw new SequenceError("relay sequence number space exhausted");
    return this.#next++;
  }
}
