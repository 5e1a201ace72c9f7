/**
 * Joining byte arrays: the one copy loop every buffer-assembling place
 * (frames, bodies, captured output, Noise transcripts) uses; and the search
 * for a line's end in a long stretch of bytes.
 *
 * @module
 */

import { lenientUtf8Decoder, TEXT_SLICE_BYTES } from "./utf8.ts";

/**
 * The bytes of `parts` one after another in a new array. `total`, when the
 * caller already counted it, saves a pass over the parts.
 */
export function concatBytes(parts: readonly Uint8Array[], total?: number): Uint8Array {
  let size = total ?? 0;
  if (total === undefined) { for (const p of parts) size += p.length; }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/**
 * The last `capacity` bytes pushed, in order, copied into one ring that
 * grows (doubling) to `capacity` as bytes come: the caller's buffers may be
 * reused once `push` returns.
 */
export class ByteTail {
  #ring = new Uint8Array(0);
  /** Where the next byte goes once the ring is full (it wraps there). */
  #at = 0;
  #size = 0;

  /** Keeps at most `capacity` bytes. */
  constructor(readonly capacity: number) {}

  /** Appends `bytes` (dropping the oldest beyond the capacity). */
  push(bytes: Uint8Array): void {
    if (bytes.length >= this.capacity) {
      this.#grow(this.capacity);
      this.#ring.set(bytes.subarray(bytes.length - this.capacity));
      this.#at = 0;
      this.#size = this.capacity;
      return;
    }
    this.#grow(Math.min(this.capacity, this.#size + bytes.length));
    const ring = this.#ring;
    // Until the ring has its full size the bytes are at [0, size): no wrap.
    const first = Math.min(bytes.length, ring.length - this.#at);
    ring.set(bytes.subarray(0, first), this.#at);
    ring.set(bytes.subarray(first), 0);
    this.#at = (this.#at + bytes.length) % ring.length;
    this.#size = Math.min(ring.length, this.#size + bytes.length);
  }

  /** The bytes held, oldest first (a copy when they wrap). */
  bytes(): Uint8Array {
    const ring = this.#ring;
    if (this.#size < ring.length) return ring.subarray(0, this.#size);
    return concatBytes([ring.subarray(this.#at), ring.subarray(0, this.#at)], ring.length);
  }

  #grow(needed: number): void {
    if (this.#ring.length >= needed) return;
    const grown = new Uint8Array(
      Math.min(this.capacity, Math.max(needed, this.#ring.length * 2, 4096)),
    );
    grown.set(this.#ring.subarray(0, this.#size));
    this.#ring = grown;
    this.#at = this.#size;
  }
}

/** Bytes looked through with `Uint8Array#indexOf` before a search goes by text. */
const NEWLINE_BYTE_SEARCH = 4096;

/**
 * Index of the first `\n` in `bytes` from `from` on, -1 when there is none
 * — `bytes.indexOf(0x0a, from)`, faster over long stretches: past the first
 * 4 KiB the bytes are looked at 32 KiB at a time as text, whose `indexOf` is
 * V8's vectorised search (0.09 ms per MiB, decoding included, against 0.3
 * for the byte array's). A slice whose text is not one character per byte
 * (not ASCII) is searched as bytes.
 */
export function indexOfNewline(bytes: Uint8Array, from = 0): number {
  if (bytes.length - from <= NEWLINE_BYTE_SEARCH) return bytes.indexOf(0x0a, from);
  const head = bytes.subarray(from, from + NEWLINE_BYTE_SEARCH).indexOf(0x0a);
  if (head !== -1) return from + head;
  const td = lenientUtf8Decoder();
  for (let at = from + NEWLINE_BYTE_SEARCH; at < bytes.length; at += TEXT_SLICE_BYTES) {
    const slice = bytes.subarray(at, at + TEXT_SLICE_BYTES);
    const text = td.decode(slice);
    // No byte becomes more than one UTF-16 unit: equal lengths mean every
    // byte is one character, at its own index.
    const i = text.length === slice.length ? text.indexOf("\n") : slice.indexOf(0x0a);
    if (i !== -1) return at + i;
  }
  return -1;
}
