/**
 * Kept-alive upstream connections for forwarded requests, per scheme, host
 * and port: a response read to its end on a connection the origin keeps
 * open goes back to the pool; idle connections are closed after a while and
 * the pool per key is bounded.
 *
 * @module
 */

import type { ByteSource } from "../http1/body.ts";

/** A pooled connection and its reader (which may hold no pending bytes). */
export interface PooledConnection {
  /** The connection. */
  readonly conn: Deno.Conn;
  /** Its reader. */
  readonly source: ByteSource;
}

interface Idle extends PooledConnection {
  timer: ReturnType<typeof setTimeout>;
}

/** See the module documentation. */
export class UpstreamPool {
  readonly #idle = new Map<string, Idle[]>();
  readonly #maxPerKey: number;
  readonly #idleMs: number;
  #closed = false;

  /** Keeps at most `maxPerKey` idle connections per key, each for `idleMs`. */
  constructor(options: { maxPerKey?: number; idleMs?: number } = {}) {
    this.#maxPerKey = options.maxPerKey ?? 32;
    this.#idleMs = options.idleMs ?? 30_000;
  }

  /** An idle connection for `key`, if any. */
  take(key: string): PooledConnection | null {
    const list = this.#idle.get(key);
    const entry = list?.pop();
    if (!entry) return null;
    if (list!.length === 0) this.#idle.delete(key);
    clearTimeout(entry.timer);
    return { conn: entry.conn, source: entry.source };
  }

  /** Returns a connection whose last response was read to its end. */
  give(key: string, entry: PooledConnection): void {
    const list = this.#idle.get(key) ?? [];
    if (this.#closed || list.length >= this.#maxPerKey) return close(entry.conn);
    const idle: Idle = {
      ...entry,
      timer: setTimeout(() => {
        const l = this.#idle.get(key);
        const at = l?.indexOf(idle) ?? -1;
        if (at !== -1) l!.splice(at, 1);
        if (l?.length === 0) this.#idle.delete(key);
        close(entry.conn);
      }, this.#idleMs),
    };
    list.push(idle);
    this.#idle.set(key, list);
  }

  /** Closes every idle connection; later returns are closed at once. */
  close(): void {
    this.#closed = true;
    for (const list of this.#idle.values()) {
      for (const e of list) {
        clearTimeout(e.timer);
        close(e.conn);
      }
    }
    this.#idle.clear();
  }
}

function close(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* closed */ }
}
