/**
 * A child's stdin with a bounded queue.
 *
 * Writes reach the pipe in call order, and each one settles when the pipe
 * has taken all of it. Bytes accepted but not yet taken — because the child
 * is not reading — are bounded by `limitBytes` (default 8 MiB): a write that
 * does not fit waits, in order, for the child to make room, for at most
 * `waitMs` (default 10 s), and fails with {@linkcode StdinFullError} then.
 * Waiting writes are bounded by the same amount: beyond it a write fails at
 * once. A single write larger than the limit is accepted when the queue is
 * empty (its size is already bounded by the message size). So one process
 * holds at most about twice the limit (plus one message) of stdin data, and
 * a client that floods a child which never reads gets a clear error instead
 * of growing the server without bound.
 *
 * @module
 */

/** Default bound on queued stdin bytes per process. */
export const STDIN_QUEUE_LIMIT = 8 * 1024 * 1024;
/** Default longest wait for room. */
export const STDIN_QUEUE_WAIT_MS = 10_000;

/** A write found the queue full (and still full after waiting). */
export class StdinFullError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "StdinFullError";
  }
}

/** Options of {@linkcode StdinQueue}. */
export interface StdinQueueOptions {
  /** Bound on bytes accepted but not yet taken by the pipe. */
  readonly limitBytes?: number;
  /** Longest wait for room before failing, ms. */
  readonly waitMs?: number;
}

/** See the module documentation. */
export class StdinQueue {
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #limit: number;
  #waitMs: number;
  /** The pipe writes, one after another. */
  #chain: Promise<void> = Promise.resolve();
  /** Writes waiting for room, one after another. */
  #admission: Promise<unknown> = Promise.resolve();
  #queued = 0;
  #waiting = 0;
  #roomWaiters = new Set<() => void>();

  /** Wraps the writer of a child's stdin. */
  constructor(writer: WritableStreamDefaultWriter<Uint8Array>, options: StdinQueueOptions = {}) {
    this.#writer = writer;
    this.#limit = options.limitBytes ?? STDIN_QUEUE_LIMIT;
    this.#waitMs = options.waitMs ?? STDIN_QUEUE_WAIT_MS;
  }

  /** Bytes accepted and not yet taken by the pipe. */
  get queuedBytes(): number {
    return this.#queued;
  }

  /**
   * Queues `bytes`; settles once the pipe has taken them. Rejects with
   * {@linkcode StdinFullError} when there is no room (see the module
   * documentation), or with the pipe's error.
   */
  write(bytes: Uint8Array): Promise<void> {
    const n = bytes.byteLength;
    if (this.#waiting === 0 && this.#fits(n)) return this.#enqueue(bytes);
    if (this.#waiting + n > this.#limit) return Promise.reject(this.#full(n, false));
    this.#waiting += n;
    const turn = this.#admission.then(async () => {
      try {
        await this.#room(n);
      } finally {
        this.#waiting -= n;
      }
      // Wrapped: the turn ends when the write is queued, not when it is written.
      return { written: this.#enqueue(bytes) };
    });
    this.#admission = turn.catch(() => {});
    return turn.then((t) => t.written);
  }

  /** Closes stdin after the queued writes (the child reads EOF). */
  close(): Promise<void> {
    const op = this.#chain.then(() => this.#writer.close());
    this.#chain = op.catch(() => {});
    return op;
  }

  /** Ends stdin now: queued writes fail, and so do writes waiting for room. */
  abort(): void {
    this.#writer.abort().catch(() => {});
    this.#wake();
  }

  #fits(n: number): boolean {
    return this.#queued === 0 || this.#queued + n <= this.#limit;
  }

  #enqueue(bytes: Uint8Array): Promise<void> {
    const n = bytes.byteLength;
    this.#queued += n;
    const writer = this.#writer;
    const op = this.#chain.then(() => n > 0 ? writer.write(bytes) : undefined);
    this.#chain = op.catch(() => {});
    const release = () => {
      this.#queued -= n;
      this.#wake();
    };
    op.then(release, release);
    return op;
  }

  #wake(): void {
    for (const wake of this.#roomWaiters) wake();
  }

  /** Waits until `n` bytes fit, for at most the wait time. */
  async #room(n: number): Promise<void> {
    const deadline = Date.now() + this.#waitMs;
    while (!this.#fits(n)) {
      const left = deadline - Date.now();
      if (left <= 0) throw this.#full(n, true);
      let wake!: () => void;
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const timer = setTimeout(wake, left);
      this.#roomWaiters.add(wake);
      try {
        await woken;
      } finally {
        clearTimeout(timer);
        this.#roomWaiters.delete(wake);
      }
      // After an abort, the queued writes have failed and freed their room:
      // this write then fails at the pipe, like any write after the end.
    }
  }

  #full(n: number, waited: boolean): StdinFullError {
    const why = waited
      ? `after waiting ${this.#waitMs} ms`
      : `with ${this.#waiting} more bytes already waiting`;
    return new StdinFullError(
      `process stdin is full: ${this.#queued} bytes are queued for a child that is not ` +
        `reading them (limit ${this.#limit}); this write of ${n} bytes was not accepted ${why}`,
    );
  }
}
