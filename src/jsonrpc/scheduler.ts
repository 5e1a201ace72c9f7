/**
 * How an {@linkcode RpcPeer} runs the requests it receives: in lanes (each
 * with its own concurrency limit, so a slow lane never blocks another),
 * requests about the same thing (an ordering key) in arrival order across
 * lanes, and a bound on queued requests past which the peer stops reading
 * its connection (backpressure on a flooding client).
 *
 * @module
 */

/** One lane: requests running, and those waiting for a slot. */
export interface Lane {
  active: number;
  readonly queue: Array<() => void>;
}

/** A request's place in its key's order: what to wait for, and how to let the next one go. */
export interface Turn {
  /** Settles when the previous request with the same key let this one start (null: none). */
  readonly after: Promise<void> | null;
  /** Lets the next request with the same key start (idempotent). */
  readonly pass: () => void;
}

/** Lanes, ordering turns and the queue bound of one peer. */
export class RequestScheduler {
  readonly #concurrency: number;
  readonly #maxQueued: number;
  readonly #lanes = new Map<string, Lane>();
  /** Per ordering key: settles when the last request with that key lets the next one start. */
  readonly #orderTails = new Map<string, Promise<void>>();
  #queued = 0;
  #queueSpace: PromiseWithResolvers<void> | null = null;
  #closed = false;

  /** `concurrency` requests at once per lane; reading pauses past `maxQueued` waiting. */
  constructor(concurrency: number, maxQueued: number) {
    this.#concurrency = Math.max(1, concurrency);
    this.#maxQueued = maxQueued;
  }

  /** The lane called `name`. */
  lane(name: string): Lane {
    let lane = this.#lanes.get(name);
    if (!lane) {
      lane = { active: 0, queue: [] };
      this.#lanes.set(name, lane);
    }
    return lane;
  }

  /** Takes a slot of `lane`: null when one was free, else resolves once one is. */
  acquire(lane: Lane): Promise<void> | null {
    if (lane.active < this.#concurrency) {
      lane.active++;
      return null;
    }
    this.#queued++;
    return new Promise<void>((resolve) =>
      lane.queue.push(() => {
        this.#unqueue();
        lane.active++;
        resolve();
      })
    );
  }

  /** Gives a slot of `lane` back (to the next waiting request, if any). */
  release(lane: Lane): void {
    lane.active--;
    const next = lane.queue.shift();
    if (next) next();
  }

  /**
   * Takes `key`'s turn for a request that just arrived; until its turn
   * comes it counts as queued (a flood of them stops reading).
   */
  takeTurn(key: string): Turn {
    const previous = this.#orderTails.get(key) ?? null;
    const gate = Promise.withResolvers<void>();
    this.#orderTails.set(key, gate.promise);
    let passed = false;
    let after: Promise<void> | null = null;
    if (previous) {
      this.#queued++;
      after = previous.then(() => this.#unqueue());
    }
    return {
      after,
      pass: () => {
        if (passed) return;
        passed = true;
        if (this.#orderTails.get(key) === gate.promise) this.#orderTails.delete(key);
        gate.resolve();
      },
    };
  }

  /**
   * Null when fewer than the bound are queued (or after {@linkcode close});
   * otherwise resolves once that is so.
   */
  roomToRead(): Promise<void> | null {
    return this.#queued >= this.#maxQueued && !this.#closed ? this.#waitForRoom() : null;
  }

  async #waitForRoom(): Promise<void> {
    while (this.#queued >= this.#maxQueued && !this.#closed) {
      this.#queueSpace = Promise.withResolvers<void>();
      await this.#queueSpace.promise;
    }
  }

  /** The peer is closed: nothing waits for room any more. */
  close(): void {
    this.#closed = true;
    this.#queueSpace?.resolve();
  }

  /** One queued request less; reading resumes once the queue has room. */
  #unqueue(): void {
    this.#queued--;
    if (this.#queueSpace && this.#queued < this.#maxQueued) {
      this.#queueSpace.resolve();
      this.#queueSpace = null;
    }
  }
}
