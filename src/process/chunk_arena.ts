/**
 * Where an output log keeps its bytes. Each chunk is copied into a block;
 * a block whose chunks have all been released is used again. A process that
 * streams therefore reads into one buffer and keeps its history in a few
 * blocks it recycles, instead of a fresh 64 KiB buffer per read — each a new
 * allocation the runtime zero-fills (page faults on fresh memory) and only a
 * full collection frees: that was about half of the server's CPU while one
 * process streamed (`ws` stdout, 256 MiB: 4.7–5.9 s/GiB and 99–128 page
 * faults per MiB before, 2.6–2.9 s/GiB and 45–47 faults per MiB with this).
 *
 * Chunks are released in the order they were stored (a log drops its oldest
 * first), so a counter per block is all the bookkeeping. A view handed out
 * stays valid until its chunk is released; whoever keeps bytes longer copies
 * them.
 *
 * @module
 */

/** The first block (bytes); each new one doubles, up to {@linkcode MAX_BLOCK}. */
const MIN_BLOCK = 1024;
/** The largest block, unless one chunk is larger. */
const MAX_BLOCK = 1024 * 1024;
/** Emptied blocks kept for reuse. */
const MAX_SPARE = 2;

interface Block {
  readonly bytes: Uint8Array;
  /** Bytes handed out (the next chunk starts here). */
  used: number;
  /** Chunks not yet released. */
  live: number;
}

/** See the module documentation. */
export class ChunkArena {
  /** Blocks holding live chunks, oldest first; chunks go into the last. */
  #blocks: Block[] = [];
  #spare: Uint8Array[] = [];
  #lastSize = 0;

  /** Copies `bytes` in; the returned view holds them until released. */
  store(bytes: Uint8Array): Uint8Array {
    const length = bytes.byteLength;
    if (length === 0) return new Uint8Array(0);
    let block = this.#blocks.at(-1);
    if (block === undefined || block.bytes.length - block.used < length) {
      block = { bytes: this.#take(length), used: 0, live: 0 };
      this.#blocks.push(block);
    }
    const view = block.bytes.subarray(block.used, block.used + length);
    view.set(bytes);
    block.used += length;
    block.live++;
    return view;
  }

  /** Releases the oldest chunk still held (empty chunks were never held). */
  releaseOldest(): void {
    const block = this.#blocks[0];
    if (block === undefined || block.live === 0) return;
    if (--block.live > 0) return;
    if (this.#blocks.length === 1) {
      // The block chunks go into, now empty: fill it again from the start.
      block.used = 0;
      return;
    }
    this.#blocks.shift();
    this.#keepSpare(block.bytes);
  }

  /**
   * Keeps an emptied block for reuse: the largest few. (Keeping the first
   * ones emptied kept a stream's first, smallest blocks for good — too small
   * for its chunks — and every later block was dropped and allocated anew:
   * 250 MiB of fresh memory per 256 MiB streamed.)
   */
  #keepSpare(bytes: Uint8Array): void {
    const spare = this.#spare;
    if (spare.length < MAX_SPARE) {
      spare.push(bytes);
      return;
    }
    let smallest = 0;
    for (let i = 1; i < spare.length; i++) {
      if (spare[i]!.length < spare[smallest]!.length) smallest = i;
    }
    if (spare[smallest]!.length < bytes.length) spare[smallest] = bytes;
  }

  /**
   * Copies `live` — every chunk still held, oldest first — into one block of
   * their size and lets go of every other block (spares too); returns the
   * new views in the same order. The old views stay valid (their blocks are
   * dropped, never reused). For a log that is done growing or was trimmed:
   * its few remaining bytes no longer pin large blocks.
   */
  compact(live: readonly Uint8Array[]): Uint8Array[] {
    let total = 0;
    for (const chunk of live) total += chunk.byteLength;
    this.#spare = [];
    this.#lastSize = 0;
    // One block that fits them exactly: storing them again fills it.
    this.#blocks = total === 0 ? [] : [{ bytes: new Uint8Array(total), used: 0, live: 0 }];
    return live.map((chunk) => this.store(chunk));
  }

  /** Lets go of the emptied blocks kept for reuse (nothing more will be stored). */
  dropSpares(): void {
    this.#spare = [];
  }

  /** Bytes of the blocks held (in use and spare). */
  get capacity(): number {
    let total = 0;
    for (const block of this.#blocks) total += block.bytes.length;
    for (const spare of this.#spare) total += spare.length;
    return total;
  }

  #take(length: number): Uint8Array {
    const at = this.#spare.findIndex((spare) => spare.length >= length);
    if (at !== -1) return this.#spare.splice(at, 1)[0]!;
    const size = Math.max(length, Math.min(MAX_BLOCK, Math.max(MIN_BLOCK, this.#lastSize * 2)));
    this.#lastSize = size;
    return new Uint8Array(size);
  }
}
