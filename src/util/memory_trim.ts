/**
 * Gives freed memory back to the operating system after bursts of work.
 *
 * Output chunks, file replies and frames are allocated outside the
 * JavaScript heap; when they are freed, glibc keeps the pages in its arenas
 * for reuse, so a server that once streamed a few hundred MiB stays that
 * large while idle. `malloc_trim(0)` returns those pages. Such buffers are
 * only freed once the garbage collector finds their JavaScript owners gone,
 * which an idle server never triggers, so a trim is a full collection (V8's
 * `gc`, made available through `node:v8`) followed by `malloc_trim` (off the
 * main thread, through FFI).
 *
 * Work only notes that it happened ({@linkcode MemoryTrimmer.note}, a
 * timestamp). While there is recent work a one-second check runs: once work
 * has been quiet for half a second and the resident size is more than
 * `growthBytes` above the smallest seen (at start or after a trim), it
 * trims. While the size stays up (a reply still being written when it
 * trimmed, output history kept for reconnects) it looks again later, less
 * and less often (up to every 30 s) while trims return little; it stops
 * once there is nothing left to return. An idle server at its usual size
 * has no timer at all. Where trimming is impossible (not Linux/glibc, no
 * `--allow-ffi`) nothing is scheduled.
 *
 * @module
 */

import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** A full garbage collection, or null where V8 will not give one. */
function collector(): (() => void) | null {
  try {
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
  /** Quiet time before trimming, ms. Default 500. */
  readonly quietMs?: number;
  /** Growth of the resident size over its smallest that is worth a trim. Default 32 MiB. */
  readonly growthBytes?: number;
  /** How often the check runs while there is work, ms. Default 1000. */
  readonly checkMs?: number;
}

/** Longest wait between checks while memory stays up. */
const MAX_DELAY_MS = 30_000;

function residentBytes(): number {
  try {
    return Deno.memoryUsage().rss;
  } catch {
    return 0;
  }
}

/** Trims after bursts of work (see the module documentation). */
export class MemoryTrimmer {
  #libc: Libc | null | undefined;
  #gc: (() => void) | null | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #lastWork = 0;
  /** The smallest resident size seen at start or after a trim. */
  #floor = residentBytes();
  #delay: number;
  #running: Promise<unknown> | null = null;
  #closed = false;
  readonly #quietMs: number;
  readonly #growth: number;
  readonly #checkMs: number;

  /** Creates a trimmer (libc is opened at the first trim). */
  constructor(options: MemoryTrimmerOptions = {}) {
    this.#quietMs = options.quietMs ?? 500;
    this.#growth = options.growthBytes ?? 32 * 1024 * 1024;
    this.#checkMs = options.checkMs ?? 1000;
    this.#delay = this.#checkMs;
  }

  /** Notes that work happened (cheap: call it per request). */
  note(): void {
    this.#lastWork = performance.now();
    this.#delay = this.#checkMs;
    if (this.#timer === undefined && !this.#closed && this.#libc !== null) this.#arm();
  }

  #arm(): void {
    // One check at a time: work noted while a trim runs has armed it already.
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#check();
    }, this.#delay);
    // Never keeps the process alive by itself.
    Deno.unrefTimer(this.#timer);
  }

  #check(): void {
    if (this.#closed) return;
    if (this.#running || performance.now() - this.#lastWork < this.#quietMs) {
      this.#arm();
      return;
    }
    const rss = residentBytes();
    // Nothing worth returning: stop until the next work.
    if (rss - this.#floor < this.#growth) return;
    this.#trim(rss);
  }

  #trim(before: number): void {
    if (this.#libc === undefined) this.#libc = openLibc();
    if (!this.#libc) return;
    if (this.#gc === undefined) this.#gc = collector();
    this.#gc?.();
    this.#running = this.#libc.symbols.malloc_trim(0n).catch(() => 0).finally(() => {
      this.#running = null;
      const after = residentBytes();
      this.#floor = Math.min(this.#floor, after);
      // Memory still in use (a reply being written, output history): look
      // again later, less and less often while trims return little.
      if (before - after < this.#growth / 2) {
        this.#delay = Math.min(this.#delay * 2, MAX_DELAY_MS);
      }
      if (!this.#closed && after - this.#floor >= this.#growth) this.#arm();
    });
  }

  /** Stops trimming and releases libc. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
    this.#libc?.close();
    this.#libc = null;
  }
}
