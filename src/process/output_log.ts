/**
 * The per-process event log: output chunks, the exit and the close, each
 * with a `seq` from one counter.
 *
 * Retention follows two rules. Events already delivered to a live
 * connection form a history of at most `retainBytes` (and `retainChunks`
 * entries), oldest dropped first, which `process/read` serves; logs sharing
 * a {@linkcode HistoryBudget} also keep their histories together within
 * its limit (the oldest logs' histories go first). Events not
 * yet delivered are never dropped; instead, once `maxUndeliveredBytes` of
 * output waits, {@linkcode OutputLog.room} returns a promise the reader of
 * the child's pipes awaits, so the child blocks rather than losing output.
 *
 * @module
 */

import type { OutputStream } from "../protocol/types.ts";
import { ChunkArena } from "./chunk_arena.ts";

/** One output chunk. */
export interface OutputEvent {
  /** Discriminant. */
  readonly kind: "output";
  /** Sequence number. */
  readonly seq: number;
  /** Source stream. */
  readonly stream: OutputStream;
  /**
   * The bytes. In a log's events, a view of the log's own copy that stays
   * valid while the event is retained: copy what must outlive that.
   */
  readonly chunk: Uint8Array;
}

/** The child exited. */
export interface ExitedEvent {
  /** Discriminant. */
  readonly kind: "exited";
  /** Sequence number. */
  readonly seq: number;
  /** Exit code (128+N for signal N). */
  readonly exitCode: number;
  /** Signal that killed it, if any. */
  readonly signal: string | null;
  /** The sandbox refused something the child needed (see `sandbox/denied.ts`). */
  readonly sandboxDenied: boolean;
}

/** Output and exit are complete; the last event. */
export interface ClosedEvent {
  /** Discriminant. */
  readonly kind: "closed";
  /** Sequence number. */
  readonly seq: number;
}

/** Any process event. */
export type ProcessEvent = OutputEvent | ExitedEvent | ClosedEvent;

/** An event before it is given its `seq`. */
export type NewProcessEvent =
  | Omit<OutputEvent, "seq">
  | Omit<ExitedEvent, "seq">
  | Omit<ClosedEvent, "seq">;

/**
 * A limit on the delivered history of many logs together (a server's
 * processes): past it, the histories of the oldest logs not on hold are
 * trimmed, so many chatty processes cannot each keep their full
 * `retainBytes` for as long as they are retained.
 */
export class HistoryBudget {
  #logs = new Set<OutputLog>();
  #total = 0;
  #trimming = false;

  /** Creates a budget of `limit` bytes. */
  constructor(readonly limit: number) {}

  /** Delivered history held by every log together. */
  get total(): number {
    return this.#total;
  }

  /** @internal Adds a log (oldest first). */
  register(log: OutputLog): void {
    this.#logs.add(log);
  }

  /** @internal Removes a log and its history from the total. */
  unregister(log: OutputLog, history: number): void {
    if (this.#logs.delete(log)) this.#total -= history;
  }

  /** @internal Records a change of one log's history, trimming when over. */
  charge(delta: number): void {
    this.#total += delta;
    if (this.#total <= this.limit || this.#trimming) return;
    this.#trimming = true;
    try {
      for (const log of this.#logs) {
        if (this.#total <= this.limit) break;
        log.trimHistory(this.#total - this.limit);
      }
    } finally {
      this.#trimming = false;
    }
  }
}

/** Limits of an {@linkcode OutputLog}. */
export interface OutputLogLimits {
  /** Delivered output kept for `process/read` (bytes). Default 1 MiB. */
  readonly retainBytes?: number;
  /** A limit shared with other logs (see {@linkcode HistoryBudget}). */
  readonly budget?: HistoryBudget;
  /** Delivered entries kept. Default 50 000. */
  readonly retainChunks?: number;
  /** Undelivered output after which the producer must wait. Default 1 MiB. */
  readonly maxUndeliveredBytes?: number;
}

/** Result of {@linkcode OutputLog.read}. */
export interface LogRead {
  /** Output chunks selected. */
  readonly chunks: OutputEvent[];
  /** Where the caller should continue. */
  readonly nextSeq: number;
}

/** Arena bytes beyond the retained output (or twice it) that compaction tolerates. */
const COMPACT_SLACK = 64 * 1024;

function bytesOf(event: ProcessEvent): number {
  return event.kind === "output" ? event.chunk.byteLength : 0;
}

/** See the module documentation. */
export class OutputLog {
  #entries: ProcessEvent[] = [];
  #head = 0;
  #nextSeq = 1;
  #deliveredSeq = 0;
  #retainedBytes = 0;
  #undeliveredBytes = 0;
  #roomWaiter: PromiseWithResolvers<void> | null = null;
  #changed: PromiseWithResolvers<void> | null = null;
  #hold = false;
  readonly #retainBytes: number;
  readonly #retainChunks: number;
  readonly #maxUndelivered: number;
  readonly #budget: HistoryBudget | undefined;
  /** History bytes last reported to the budget. */
  #charged = 0;
  /** The output bytes (copied in at append, released as events are dropped). */
  readonly #arena = new ChunkArena();

  /** Creates an empty log. */
  constructor(limits: OutputLogLimits = {}) {
    this.#retainBytes = limits.retainBytes ?? 1024 * 1024;
    this.#retainChunks = limits.retainChunks ?? 50_000;
    this.#maxUndelivered = limits.maxUndeliveredBytes ?? 1024 * 1024;
    this.#budget = limits.budget;
    this.#budget?.register(this);
  }

  /** Delivered output held for `process/read` (bytes). */
  get historyBytes(): number {
    return this.#retainedBytes - this.#undeliveredBytes;
  }

  #report(): void {
    if (!this.#budget) return;
    const now = this.historyBytes;
    const delta = now - this.#charged;
    this.#charged = now;
    if (delta !== 0) this.#budget.charge(delta);
  }

  /**
   * Drops up to `bytes` of the oldest delivered history (not while held);
   * called by the budget.
   */
  trimHistory(bytes: number): void {
    if (this.#hold) return;
    this.#evict(Math.max(0, this.historyBytes - bytes));
    this.#compactIfWasteful();
    this.#report();
  }

  /**
   * Moves the retained output into one block of its size when the arena
   * holds far more than that (after a trim, or once the process is done):
   * what a log keeps is bounded by what it retains, not by how much it once
   * streamed.
   */
  #compactIfWasteful(done = false): void {
    // A trimmed log may grow again: compact only well past what it retains
    // (the copies then stay within twice what was trimmed). A finished one
    // drops its spare blocks and keeps little more than its bytes (copying a
    // long stream's whole history into fresh memory costs more than the
    // quarter it could save).
    if (done) this.#arena.dropSpares();
    const retained = this.#retainedBytes;
    const allowed = done ? retained + retained / 4 : 2 * retained;
    if (this.#arena.capacity <= allowed + COMPACT_SLACK) return;
    const live: Uint8Array[] = [];
    for (let i = this.#head; i < this.#entries.length; i++) {
      const e = this.#entries[i]!;
      if (e.kind === "output") live.push(e.chunk);
    }
    const views = this.#arena.compact(live);
    let next = 0;
    for (let i = this.#head; i < this.#entries.length; i++) {
      const e = this.#entries[i]!;
      if (e.kind === "output") this.#entries[i] = { ...e, chunk: views[next++]! };
    }
  }

  /** Leaves the budget (the process is gone). */
  dispose(): void {
    this.#budget?.unregister(this, this.#charged);
    this.#charged = 0;
  }

  /** The next `seq` that will be assigned. */
  get nextSeq(): number {
    return this.#nextSeq;
  }

  /** Highest `seq` handed to a live connection. */
  get deliveredSeq(): number {
    return this.#deliveredSeq;
  }

  /** Output bytes held (delivered history plus undelivered). */
  get retainedBytes(): number {
    return this.#retainedBytes;
  }

  /** Memory holding the output (at least {@linkcode retainedBytes}: blocks partly used, spares). */
  get storedBytes(): number {
    return this.#arena.capacity;
  }

  /** Output bytes not yet delivered. */
  get undeliveredBytes(): number {
    return this.#undeliveredBytes;
  }

  /**
   * Assigns the next `seq` to `event`, stores it (output bytes are copied:
   * the caller may reuse its buffer) and wakes waiters.
   */
  append(event: NewProcessEvent): ProcessEvent {
    const full =
      (event.kind === "output"
        ? { ...event, chunk: this.#arena.store(event.chunk), seq: this.#nextSeq++ }
        : { ...event, seq: this.#nextSeq++ }) as ProcessEvent;
    this.#entries.push(full);
    const size = bytesOf(full);
    this.#retainedBytes += size;
    this.#undeliveredBytes += size;
    this.#evict();
    this.#report();
    // No more output comes after the exit: keep no more than is retained.
    if (full.kind !== "output") this.#compactIfWasteful(true);
    const changed = this.#changed;
    this.#changed = null;
    changed?.resolve();
    return full;
  }

  /**
   * Stops evicting delivered history (the connection that received it may
   * have lost the tail). While held, the producer also waits once history
   * plus undelivered output reach `retainBytes + maxUndeliveredBytes`.
   */
  holdHistory(): void {
    this.#hold = true;
  }

  /** Ends {@linkcode holdHistory}: the client has caught up from its cursor. */
  releaseHistory(): void {
    if (!this.#hold) return;
    this.#hold = false;
    this.#evict();
    this.#report();
    this.#wakeProducer();
  }

  /** True while history is held. */
  get holding(): boolean {
    return this.#hold;
  }

  #mustWait(): boolean {
    return this.#undeliveredBytes >= this.#maxUndelivered ||
      (this.#hold && this.#retainedBytes >= this.#retainBytes + this.#maxUndelivered);
  }

  #wakeProducer(): void {
    if (this.#roomWaiter && !this.#mustWait()) {
      this.#roomWaiter.resolve();
      this.#roomWaiter = null;
    }
  }

  /** Records that every event up to `seq` reached a live connection. */
  markDelivered(seq: number): void {
    if (seq <= this.#deliveredSeq) return;
    // Entries hold consecutive seqs, so the first undelivered one is found
    // by offset, not by walking the retained history.
    const first = this.#entries[this.#head];
    const start = first === undefined
      ? this.#entries.length
      : this.#head + Math.max(0, this.#deliveredSeq + 1 - first.seq);
    for (let i = start; i < this.#entries.length; i++) {
      const e = this.#entries[i]!;
      if (e.seq > seq) break;
      if (e.seq > this.#deliveredSeq) this.#undeliveredBytes -= bytesOf(e);
    }
    this.#deliveredSeq = seq;
    this.#evict();
    this.#report();
    this.#wakeProducer();
  }

  /** Events not yet delivered, in order (for replay to a new connection). */
  undelivered(): ProcessEvent[] {
    const out: ProcessEvent[] = [];
    for (let i = this.#head; i < this.#entries.length; i++) {
      const e = this.#entries[i]!;
      if (e.seq > this.#deliveredSeq) out.push(e);
    }
    return out;
  }

  /**
   * Null when the producer may continue; otherwise a promise resolving once
   * undelivered output drops below the limit.
   */
  room(): Promise<void> | null {
    if (!this.#mustWait()) return null;
    this.#roomWaiter ??= Promise.withResolvers<void>();
    return this.#roomWaiter.promise;
  }

  /** Releases a producer waiting in {@linkcode room} (used when discarding). */
  releaseRoom(): void {
    this.#roomWaiter?.resolve();
    this.#roomWaiter = null;
  }

  /** Resolves at the next appended event. */
  changed(): Promise<void> {
    this.#changed ??= Promise.withResolvers<void>();
    return this.#changed.promise;
  }

  /**
   * Selects retained output after `afterSeq` (`process/read`): with
   * `maxBytes`, chunks while the total stays within it, but at least one.
   */
  read(afterSeq: number, maxBytes?: number): LogRead {
    const chunks: OutputEvent[] = [];
    let total = 0;
    for (let i = this.#head; i < this.#entries.length; i++) {
      const e = this.#entries[i]!;
      if (e.seq <= afterSeq || e.kind !== "output") continue;
      if (maxBytes !== undefined && chunks.length > 0 && total + e.chunk.byteLength > maxBytes) {
        break;
      }
      chunks.push(e);
      total += e.chunk.byteLength;
      if (maxBytes !== undefined && total >= maxBytes) break;
    }
    const nextSeq = maxBytes !== undefined && chunks.length > 0
      ? chunks[chunks.length - 1]!.seq + 1
      : this.#nextSeq;
    return { chunks, nextSeq };
  }

  /** Drops delivered history beyond the limits (or beyond `maxHistory` bytes). */
  #evict(maxHistory = Infinity): void {
    if (this.#hold) return;
    const entries = this.#entries;
    while (this.#head < entries.length) {
      const e = entries[this.#head]!;
      if (e.seq > this.#deliveredSeq) break;
      const count = entries.length - this.#head;
      if (
        this.#retainedBytes <= this.#retainBytes && count <= this.#retainChunks &&
        this.historyBytes <= maxHistory
      ) break;
      this.#retainedBytes -= bytesOf(e);
      if (bytesOf(e) > 0) this.#arena.releaseOldest();
      // Drop the reference now: the slot is only reclaimed at compaction.
      entries[this.#head] = undefined as unknown as ProcessEvent;
      this.#head++;
    }
    if (this.#head >= 64 && this.#head * 2 >= entries.length) {
      this.#entries = entries.slice(this.#head);
      this.#head = 0;
    }
  }
}
