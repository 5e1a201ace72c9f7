/**
 * Large buffers kept for the next use of the same kind.
 *
 * A fresh multi-megabyte `ArrayBuffer` is zero-filled memory that the first
 * writes fault in page by page: a 64 MiB one is 16 384 page faults, on a
 * virtual machine most of the CPU of filling it. A buffer given back is
 * kept (up to a few per kind: pipelined uploads hold several at once) and
 * handed to the next request for that much. It is held weakly — a full
 * collection lets it go, so what a quiet server holds does not grow — and,
 * for spares made with `holdMs` in a process whose memory trimmer runs,
 * also strongly while the work goes on: a
 * stream of uploads allocates enough outside the heap to make V8 collect
 * between two of them. The strong hold ends `holdMs` after the last give,
 * or sooner when the memory trimmer finds the server quiet
 * ({@linkcode releaseSpares}, before its collection).
 *
 * @module
 */

/** Spares holding buffers strongly. */
const holding = new Set<SpareBuffer>();
/** Memory trimmers running: strong holds only while one is (it ends them when quiet). */
let trimmers = 0;

/**
 * Says a memory trimmer runs (true) or stopped (false): spares hold their
 * buffers strongly only while one runs — a process without one (a client
 * library) keeps them weakly, and has no timer of ours.
 */
export function trimmerRunning(running: boolean): void {
  trimmers += running ? 1 : -1;
  if (trimmers <= 0) {
    trimmers = 0;
    releaseSpares();
  }
}

/**
 * Ends every spare's strong hold (the memory trimmer calls it before it
 * collects): their buffers are garbage for that collection, unless taken.
 */
export function releaseSpares(): void {
  for (const spare of holding) spare.releaseHold();
}

/** How long upload buffers are held strongly after their last use, unless the trimmer ends it. */
export const SPARE_HOLD_MS = 5000;

/** Buffers from this size on are worth keeping. */
export const SPARE_FROM = 1024 * 1024;

/** Options of {@linkcode SpareBuffer}. */
export interface SpareBufferOptions {
  /**
   * A buffer is handed out for a request of `size` bytes only when it is at
   * most this many times that (a buffer held for long should not be far
   * larger than its contents). Default: any larger one.
   */
  readonly maxWaste?: number;
  /** Buffers kept at once (the largest). Default 1. */
  readonly count?: number;
  /** Held strongly this long after each give (else only weakly). */
  readonly holdMs?: number;
  /** Smallest request served from the spares. Default {@linkcode SPARE_FROM}. */
  readonly from?: number;
}

/** Spare buffers of one use (see the module documentation). */
export class SpareBuffer {
  #spares: WeakRef<ArrayBuffer>[] = [];
  /** The spares, while held strongly. */
  #held: ArrayBuffer[] = [];
  #lastGive = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Buffers handed out and not given back. */
  #lent = new WeakSet<ArrayBuffer>();
  readonly #maxWaste: number;
  readonly #count: number;
  readonly #holdMs: number | undefined;
  readonly #from: number;

  /** Spares as `options` say. */
  constructor(options: SpareBufferOptions = {}) {
    this.#from = options.from ?? SPARE_FROM;
    this.#maxWaste = options.maxWaste ?? Infinity;
    this.#count = options.count ?? 1;
    this.#holdMs = options.holdMs;
  }

  /** Ends the strong hold (see {@linkcode releaseSpares}). */
  releaseHold(): void {
    this.#held = [];
    holding.delete(this);
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * `size` bytes (a view from the start of a spare, or of a new buffer;
   * their contents are undefined).
   */
  take(size: number): Uint8Array {
    return this.#take(size, false, size);
  }

  /**
   * At least `size` bytes: all of a spare when one is taken, else a new
   * buffer of `reserve` bytes (no more than `size` costs until written: the
   * pages of a new buffer are made as they are first touched).
   */
  takeAtLeast(size: number, reserve = size): Uint8Array {
    return this.#take(size, true, Math.max(size, reserve));
  }

  #take(size: number, whole: boolean, reserve: number): Uint8Array {
    if (size < this.#from) return new Uint8Array(size);
    let buffer: ArrayBuffer | undefined;
    for (let i = 0; i < this.#spares.length; i++) {
      const spare = this.#spares[i]!.deref();
      if (spare === undefined) {
        this.#spares.splice(i--, 1);
      } else if (spare.byteLength >= size && spare.byteLength <= this.#maxWaste * size) {
        this.#spares.splice(i, 1);
        const held = this.#held.indexOf(spare);
        if (held >= 0) this.#held.splice(held, 1);
        buffer = spare;
        break;
      }
    }
    buffer ??= new ArrayBuffer(reserve);
    this.#lent.add(buffer);
    return new Uint8Array(buffer, 0, whole ? buffer.byteLength : size);
  }

  /**
   * Gives back the buffer under `bytes` (from a take) once nothing reads it;
   * kept when fewer than `count` are, or in place of a smaller one. Bytes
   * of another buffer, or given back already, are ignored.
   */
  give(bytes: Uint8Array): void {
    const buffer = bytes.buffer as ArrayBuffer;
    if (!this.#lent.delete(buffer)) return;
    this.#spares = this.#spares.filter((spare) => spare.deref() !== undefined);
    if (this.#spares.length >= this.#count) {
      let smallest = 0;
      for (let i = 1; i < this.#spares.length; i++) {
        if (this.#spares[i]!.deref()!.byteLength < this.#spares[smallest]!.deref()!.byteLength) {
          smallest = i;
        }
      }
      const dropped = this.#spares[smallest]!.deref()!;
      if (dropped.byteLength >= buffer.byteLength) return;
      this.#spares.splice(smallest, 1);
      const held = this.#held.indexOf(dropped);
      if (held >= 0) this.#held.splice(held, 1);
    }
    this.#spares.push(new WeakRef(buffer));
    if (this.#holdMs === undefined || trimmers === 0) return;
    this.#held.push(buffer);
    this.#lastGive = performance.now();
    holding.add(this);
    this.#timer ??= this.#arm(this.#holdMs);
  }

  /** Ends the hold `holdMs` after the last give (looking again if one came meanwhile). */
  #arm(ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.#timer = undefined;
      const left = this.#lastGive + this.#holdMs! - performance.now();
      if (left > 0 && this.#held.length > 0) this.#timer = this.#arm(left);
      else this.releaseHold();
    }, ms);
    // Never keeps the process alive by itself.
    Deno.unrefTimer(timer);
    return timer;
  }
}

/**
 * The spares of buffers that hold one whole incoming message (a long ndjson
 * line, a fragmented WebSocket message) — and, once an upload's base64 is
 * decoded in place, its bytes until the handler gives them back.
 */
export const messageSpare: SpareBuffer = new SpareBuffer({
  count: 4,
  holdMs: SPARE_HOLD_MS,
  // A WebSocket upload's last fragment is a fraction of a megabyte.
  from: 64 * 1024,
});

/** First size of a {@linkcode MessageBuffer}. */
const FIRST_MESSAGE_BUFFER = 16 * 1024;
/**
 * What a message buffer reserves at once past a megabyte (capped by its
 * limit): only the pages written cost, and the message is not copied to grow.
 */
const LONG_MESSAGE_RESERVE = 64 * 1024 * 1024;

/**
 * One incoming message gathered piece by piece (a long line, a fragmented
 * WebSocket message) in one buffer: doubling up to a megabyte, then room
 * for any message up to `limit` at once; large buffers come from and go
 * back to {@linkcode messageSpare}. No list of pieces joined at the end.
 */
export class MessageBuffer {
  #buffer: Uint8Array | null = null;
  #length = 0;

  /** A buffer for messages of at most `limit` bytes (appends are checked by the caller). */
  constructor(readonly limit: number) {}

  /** Bytes gathered. */
  get length(): number {
    return this.#length;
  }

  /** Appends a copy of `bytes` (the caller may reuse them). */
  append(bytes: Uint8Array): void {
    this.tail(bytes.length).set(bytes);
    this.#length += bytes.length;
  }

  /**
   * Room for the next `n` bytes, right after those gathered (a view, valid
   * until the next append, tail, release or forget): a reader may read
   * straight into it and report the bytes with {@linkcode commit}.
   */
  tail(n: number): Uint8Array {
    const length = this.#length + n;
    let buffer = this.#buffer;
    if (buffer === null || length > buffer.length) {
      const doubled = Math.max(length, 2 * (buffer?.length ?? FIRST_MESSAGE_BUFFER / 2));
      const grown = messageSpare.takeAtLeast(
        Math.min(this.limit, doubled),
        doubled < SPARE_FROM ? 0 : Math.min(this.limit, LONG_MESSAGE_RESERVE),
      );
      if (buffer !== null) {
        grown.set(buffer.subarray(0, this.#length));
        messageSpare.give(buffer);
      }
      this.#buffer = buffer = grown;
    }
    return buffer.subarray(this.#length, length);
  }

  /** Counts `n` bytes written into the last {@linkcode tail} as gathered. */
  commit(n: number): void {
    this.#length += n;
  }

  /**
   * Drops the first `offset` bytes gathered, moving the rest to the front;
   * emptied, the buffer goes back to the spares.
   */
  keepFrom(offset: number): void {
    if (offset >= this.#length) return this.release();
    this.#buffer!.copyWithin(0, offset, this.#length);
    this.#length -= offset;
  }

  /** The bytes gathered (a view, valid until the next append, release or forget). */
  view(): Uint8Array {
    return this.#buffer === null ? new Uint8Array(0) : this.#buffer.subarray(0, this.#length);
  }

  /** Empties it; the buffer goes back to the spares. */
  release(): void {
    if (this.#buffer !== null) messageSpare.give(this.#buffer);
    this.forget();
  }

  /** Empties it, leaving the buffer to whoever took it (they give it back). */
  forget(): void {
    this.#buffer = null;
    this.#length = 0;
  }
}
