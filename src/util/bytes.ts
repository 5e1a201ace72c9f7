/**
 * Joining byte arrays: the one copy loop every buffer-assembling place
 * (frames, bodies, captured output, Noise transcripts) uses.
 *
 * @module
 */

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
