/**
 * Byte plumbing for tunnels: full writes, and a two-way relay with
 * half-close (one side's end of input shuts down the other side's write
 * half; the tunnel ends when both directions have) and a buffer per
 * direction reused for every read — a slow reader slows the writer, memory
 * stays at two buffers per tunnel.
 *
 * @module
 */

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
  // Start small and grow while reads fill the buffer: idle tunnels stay
  // cheap, bulk transfers get large reads (fewer operations per byte).
  let buffer = new Uint8Array(Math.min(16 * 1024, maxBytes));
  let total = 0;
  for (;;) {
    const n = await from.read(buffer);
    if (n === null) break;
    await writeAll(to, buffer.subarray(0, n));
    total += n;
    if (n === buffer.length && buffer.length < maxBytes) {
      buffer = new Uint8Array(Math.min(buffer.length * 2, maxBytes));
    }
  }
  await to.closeWrite().catch(() => {});
  return total;
}

/**
 * Relays between `client` and `upstream` until both directions end (or
 * either fails), then closes both. `toUpstream` is sent first (bytes the
 * client sent past a CONNECT head).
 */
export async function relay(
  client: Deno.Conn,
  upstream: Deno.Conn,
  options: { toUpstream?: Uint8Array | null; bufferBytes?: number } = {},
): Promise<RelayStats> {
  const size = options.bufferBytes ?? 256 * 1024;
  const stats: RelayStats = { up: 0, down: 0 };
  const fail = () => {
    closeQuietly(client);
    closeQuietly(upstream);
  };
  const up = (async () => {
    if (options.toUpstream?.length) {
      await writeAll(upstream, options.toUpstream);
      stats.up += options.toUpstream.length;
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
