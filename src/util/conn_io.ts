/**
 * Byte plumbing for tunnels: full writes, and a two-way relay with
 * half-close (one side's end of input shuts down the other side's write
 * half; the tunnel ends when both directions have) and a buffer per
 * direction reused for every read — a slow reader slows the writer, memory
 * stays at two buffers per tunnel.
 *
 * @module
 */

import { acceptConnections, type ConnectionLoop } from "./accept_loop.ts";

/** Something bytes can be read from into the caller's buffer, like `Deno.stdin`. */
export interface ByteReader {
  /** Reads some bytes into `p`; returns how many, or `null` at the end. */
  read(p: Uint8Array): Promise<number | null>;
}

/** Something bytes can be written to, like `Deno.Conn`. */
export interface ByteWriter {
  /** Writes some bytes; returns how many. */
  write(data: Uint8Array): Promise<number>;
}

/** Writes all of `data`. */
export async function writeAll(to: ByteWriter, data: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < data.length) offset += await to.write(data.subarray(offset));
}

/** Bytes moved by a tunnel. */
export interface RelayStats {
  /** Client → upstream. */
  up: number;
  /** Upstream → client. */
  down: number;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}

async function pump(from: Deno.Conn, to: Deno.Conn, maxBytes: number): Promise<number> {
  // Two buffers: the next read runs while the previous chunk is written.
  // They start small and grow while reads fill them: idle tunnels stay
  // cheap, bulk transfers get large reads (fewer operations per byte).
  const buffers = [new Uint8Array(Math.min(16 * 1024, maxBytes)), new Uint8Array(0)];
  let current = 0;
  let writing: Promise<void> | null = null;
  let total = 0;
  try {
    for (;;) {
      let buffer = buffers[current]!;
      if (buffer.length < buffers[current ^ 1]!.length) {
        buffer = buffers[current] = new Uint8Array(buffers[current ^ 1]!.length);
      }
      const n = await from.read(buffer);
      if (n === null) break;
      if (writing) await writing;
      writing = writeAll(to, buffer.subarray(0, n));
      writing.catch(() => {}); // awaited on the next turn or below
      total += n;
      if (n === buffer.length && buffer.length < maxBytes) {
        buffers[current] = new Uint8Array(Math.min(buffer.length * 2, maxBytes));
      }
      current ^= 1;
    }
    if (writing) await writing;
  } finally {
    await to.closeWrite().catch(() => {});
  }
  return total;
}

/**
 * Relays between `client` and `upstream` until both directions end (or
 * either fails), then closes both. `toUpstream` is sent first (bytes the
 * client sent past a CONNECT head, or a read of the client's still under
 * way: the client is read again only once it is done).
 */
export async function relay(
  client: Deno.Conn,
  upstream: Deno.Conn,
  options: {
    toUpstream?: Uint8Array | null | Promise<Uint8Array | null>;
    bufferBytes?: number;
  } = {},
): Promise<RelayStats> {
  const size = options.bufferBytes ?? 256 * 1024;
  const stats: RelayStats = { up: 0, down: 0 };
  const fail = () => {
    closeQuietly(client);
    closeQuietly(upstream);
  };
  const up = (async () => {
    const first = await options.toUpstream;
    if (first?.length) {
      await writeAll(upstream, first);
      stats.up += first.length;
    }
    stats.up += await pump(client, upstream, size);
  })().catch(fail);
  const down = (async () => {
    stats.down += await pump(upstream, client, size);
  })().catch(fail);
  await Promise.all([up, down]);
  fail();
  return stats;
}

/**
 * Accepts from `listener` and relays each connection to a fresh `dial()`;
 * a connection whose dial fails is closed.
 */
export function forwardConnections(
  listener: Deno.Listener,
  dial: () => Promise<Deno.Conn>,
): ConnectionLoop {
  return acceptConnections(listener, async (conn) => {
    let upstream: Deno.Conn;
    try {
      upstream = await dial();
    } catch {
      conn.close();
      return;
    }
    await relay(conn, upstream);
  });
}
