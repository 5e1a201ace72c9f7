/**
 * Gives freed memory back to the operating system after bursts of work.
 *
 * Output chunks, file replies and frames are allocated outside the
 * JavaScript heap; when they are freed, glibc keeps the pages in its arenas
 * for reuse, so a server that once streamed a few hundred MiB stays that
 * large while idle. `malloc_trim(0)` (off the main thread, through FFI)
 * returns those pages. Such buffers are only freed once the garbage
 * collector finds their JavaScript owners gone, which an idle server never
 * triggers, so after a burst of them the trim is preceded by a full
 * collection (V8's `gc`, made available through `node:v8` — loaded by the
 * first such trim: Node's modules cost an idle server megabytes).
 *
 * Work only notes that it happened ({@linkcode MemoryTrimmer.note}, a
 * timestamp). A check runs a second after work begins, and then when the
 * work may have been quiet for half a second. Once it has, and the resident
 * size is more than `growthBytes` above the smallest seen (at start or after
 * a trim), it trims — with a full collection first only when `ArrayBuffer`
 * memory is `collectBytes` above its smallest too (a thousand sessions
 * starting leave little of it, and the heap's own garbage is V8's to
 * reduce). Nothing is armed after a trim: the next work looks again. After a
 * trim that returned little the memory is live (a thousand sessions, output
 * kept for reconnects), so the next one waits for new growth — or for a
 * while, which doubles (up to 30 s) as long as trims keep returning little.
 * A trim whose memory work needed again soon (it came back within eight
 * times the quiet time, and grew past `growthBytes` again) was premature —
 * on a virtual machine, faulting 100 MiB back in costs more CPU than the
 * burst's own work: the quiet time doubles, or grows to half as long again
 * as the pause the trim fell into, up to 8 times its base (4 s), and halves
 * back after longer pauses. Bursts that recur every few seconds
 * keep their memory; an idle server still gets its trim within seconds.
 * An idle server has no timer at all, however many sessions it holds. Where
 * trimming is impossible (not Linux/glibc, no `--allow-ffi`) nothing is
 * scheduled.
 *
 * @module
 */

import { releaseSpares, trimmerRunning } from "./spare_buffer.ts";

/** A full garbage collection, or null where V8 will not give one. */
async function collector(): Promise<(() => void) | null> {
  try {
    const [{ setFlagsFromString }, { runInNewContext }] = await Promise.all([
      import("node:v8"),
      import("node:vm"),
    ]);
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc");
    return typeof gc === "function" ? gc as () => void : null;
  } catch {
    return null;
  }
}

interface Libc {
  symbols: { malloc_trim(pad: bigint): Promise<number> };
  close(): void;
}

function openLibc(): Libc | null {
  if (Deno.build.os !== "linux") return null;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    return Deno.dlopen("libc.so.6", {
      malloc_trim: { parameters: ["usize"], result: "i32", nonblocking: true },
    }) as unknown as Libc;
  } catch {
    return null; // musl, or no libc.so.6
  }
}

/** Options of {@linkcode MemoryTrimmer}. */
export interface MemoryTrimmerOptions {
  /**
   * Quiet time before trimming, ms. Default 500. It grows (at least
   * doubling, up to 8×) while trims turn out premature — work came back
   * within eight times the quiet time and needed the memory again — and
   * halves back after longer pauses.
   */
  readonly quietMs?: number;
  /**
   * Growth of the resident size over its smallest that is worth a trim.
   * Default 8 MiB: a hundred connections' first requests leave about that
   * much freed compiler memory in glibc's arenas (which a trim returns).
   */
  readonly growthBytes?: number;
  /**
   * Growth of `ArrayBuffer` memory over its smallest that makes a trim run
   * a full collection first. Default 32 MiB (a thousand idle sessions hold
   * ~30 MiB of live buffers: collecting them finds nothing, at a cost).
   */
  readonly collectBytes?: number;
  /** How often the check runs while there is work, ms. Default 1000. */
  readonly checkMs?: number;
  /** The resident size and `ArrayBuffer` memory (tests); default `Deno.memoryUsage()`. */
  readonly memory?: () => MemorySample;
  /**
   * One trim (tests): `malloc_trim`, after a full collection when `collect`;
   * default the real one, or null where that is impossible.
   */
  readonly trim?: Trim | null;
  /** The clock (tests); default `performance.now`. */
  readonly now?: () => number;
}

/** Longest wait between trims that return little. */
const MAX_DELAY_MS = 30_000;
/** The longest the quiet time grows to, as a multiple of its base. */
const MAX_QUIET_FACTOR = 8;
/** Work within this many quiet times of a trim, growing the memory again, makes it premature. */
const PREMATURE_FACTOR = 8;

/** What the trimmer watches, in bytes. */
export interface MemorySample {
  /** The resident size. */
  readonly rss: number;
  /** Memory of `ArrayBuffer`s (output, file data, frames). */
  readonly external: number;
}

function memorySample(): MemorySample {
  try {
    const { rss, external } = Deno.memoryUsage();
    return { rss, external };
  } catch {
    return { rss: 0, external: 0 };
  }
}

/** `malloc_trim`, after a full collection when `collect`; `close` releases libc. */
type Trim = ((collect: boolean) => Promise<unknown>) & { close?(): void };

/** The real trim, or null where it is impossible (opened at the first use). */
function realTrim(): Trim | null {
  const libc = openLibc();
  if (!libc) return null;
  let gc: Promise<(() => void) | null> | undefined;
  const trim = async (collect: boolean) => {
    if (collect) (await (gc ??= collector()))?.();
    return await libc.symbols.malloc_trim(0n).catch(() => 0);
  };
  return Object.assign(trim, { close: () => libc.close() });
}

/** Trims after bursts of work (see the module documentation). */
export class MemoryTrimmer {
  #trimFn: Trim | null | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #lastWork = 0;
  /** The smallest resident size seen at start or after a trim. */
  #floor: number;
  /** The resident size right after the last trim: what was live then. */
  #settled: number;
  #lastTrim = -Infinity;
  /** Least time between trims that find no new growth; doubles while they return little. */
  #backoff: number;
  /** The least `ArrayBuffer` memory seen at start or after a full collection. */
  #externalFloor: number;
  #running: Promise<unknown> | null = null;
  #closed = false;
  /** The quiet time now (see {@linkcode MemoryTrimmerOptions.quietMs}). */
  #quietMs: number;
  readonly #baseQuietMs: number;
  /** A trim ran and no work has come since. */
  #trimmedSinceWork = false;
  /**
   * The pause a trim fell into, when work came back soon after it (a check
   * that finds growth then calls the trim premature).
   */
  #prematurePause: number | undefined;
  readonly #growth: number;
  readonly #collectGrowth: number;
  readonly #checkMs: number;
  readonly #memory: () => MemorySample;
  readonly #now: () => number;

  /** Creates a trimmer (libc is opened at the first trim). */
  constructor(options: MemoryTrimmerOptions = {}) {
    trimmerRunning(true);
    this.#quietMs = this.#baseQuietMs = options.quietMs ?? 500;
    this.#growth = options.growthBytes ?? 8 * 1024 * 1024;
    this.#collectGrowth = options.collectBytes ?? 32 * 1024 * 1024;
    this.#checkMs = options.checkMs ?? 1000;
    this.#memory = options.memory ?? memorySample;
    this.#now = options.now ?? (() => performance.now());
    if (options.trim !== undefined) this.#trimFn = options.trim;
    const start = this.#memory();
    this.#floor = this.#settled = start.rss;
    this.#externalFloor = start.external;
    this.#backoff = this.#checkMs;
  }

  /** Notes that work happened (cheap: call it per request; bound, so it can be passed on). */
  readonly note = (): void => {
    const now = this.#now();
    const pause = now - this.#lastWork;
    this.#lastWork = now;
    if (this.#timer === undefined && !this.#closed && this.#trimFn !== null) {
      // The first work since a trim (no check is armed after one). After a
      // long pause the trim was right: the quiet time shrinks back.
      if (this.#trimmedSinceWork) {
        if (now - this.#lastTrim < PREMATURE_FACTOR * this.#quietMs) this.#prematurePause = pause;
        else this.#quietMs = Math.max(this.#quietMs / 2, this.#baseQuietMs);
        this.#trimmedSinceWork = false;
      }
      this.#arm(this.#checkMs);
    }
  };

  #arm(delay: number): void {
    // One check at a time: work noted while a trim runs has armed it already.
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#check();
    }, delay);
    // Never keeps the process alive by itself.
    Deno.unrefTimer(this.#timer);
  }

  #check(): void {
    if (this.#closed) return;
    const now = this.#now();
    if (this.#running) {
      this.#arm(this.#checkMs);
      return;
    }
    // Busy: look again when it may have been quiet long enough — a burst's
    // memory goes back half a second after it, not up to a check later.
    const quietFor = now - this.#lastWork;
    if (quietFor < this.#quietMs) {
      this.#arm(Math.max(this.#quietMs - quietFor, 50));
      return;
    }
    const prematurePause = this.#prematurePause;
    this.#prematurePause = undefined;
    const { rss, external } = this.#memory();
    // Nothing worth returning: stop until the next work.
    if (rss - this.#floor < this.#growth) return;
    // Grown no further since a trim that returned little: what is resident
    // is live (many sessions, kept output). A full collection of it would
    // find nothing, at a cost that grows with it; look again only after a
    // while, and only when there is work again — never on an idle server.
    if (rss - this.#settled < this.#growth / 2 && now - this.#lastTrim < this.#backoff) return;
    // Grown again soon after a trim: what it returned was faulted in again
    // (a loop of builds, a client reading file after file) — such a trim
    // costs more than it saves, so wait longer: at least twice as long, and
    // half as long again as the pause that trim fell into.
    if (prematurePause !== undefined) {
      this.#quietMs = Math.min(
        Math.max(this.#quietMs * 2, prematurePause * 1.5),
        this.#baseQuietMs * MAX_QUIET_FACTOR,
      );
      if (quietFor < this.#quietMs) {
        this.#arm(Math.max(this.#quietMs - quietFor, 50));
        return;
      }
    }
    // Buffers (output, file data, frames) are freed only by a collection of
    // their owners; without a burst of them, what glibc holds free goes back
    // without one (the heap's own garbage is V8's to reduce).
    this.#trim(rss, external - this.#externalFloor >= this.#collectGrowth);
  }

  #trim(before: number, collect: boolean): void {
    if (this.#trimFn === undefined) this.#trimFn = realTrim();
    const trim = this.#trimFn;
    if (!trim) return;
    // The buffers kept for the next upload are what a quiet server can give back.
    releaseSpares();
    this.#running = trim(collect).finally(() => {
      this.#running = null;
      const { rss: after, external } = this.#memory();
      if (collect) this.#externalFloor = Math.min(this.#externalFloor, external);
      this.#floor = Math.min(this.#floor, after);
      this.#settled = after;
      this.#lastTrim = this.#now();
      this.#trimmedSinceWork = true;
      // Little came back: it is in use — back off. A burst came back: the
      // next work may look again a check later. Either way nothing is armed
      // here: an idle server has no timer.
      this.#backoff = before - after < this.#growth / 2
        ? Math.min(this.#backoff * 2, MAX_DELAY_MS)
        : this.#checkMs;
    });
  }

  /** Stops trimming, ends the spares' strong hold and releases libc. */
  async close(): Promise<void> {
    if (!this.#closed) trimmerRunning(false);
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
    this.#trimFn?.close?.();
    this.#trimFn = null;
  }
}
