/**
 * Telling a TLS client from a server-first protocol inside a tunnel that is
 * intercepted only if it carries TLS (credential masking's bound hosts): the
 * client's first byte is a TLS handshake record (0x16) or not; a client that
 * says nothing for a moment waits for the server to speak (SSH, SMTP on a
 * bound host's port) and gets an opaque tunnel.
 *
 * @module
 */

/** How long a silent client is given before the tunnel is opened as is. */
export const SNIFF_WAIT_MS = 300;

/** What {@linkcode sniffTls} found. */
export interface SniffResult {
  /** The client began a TLS handshake. */
  readonly tls: boolean;
  /**
   * The client's first bytes (null: it closed), or — when it was silent —
   * the read still under way, to hand to the relay.
   */
  readonly first: Uint8Array | null | Promise<Uint8Array | null>;
}

/** Looks at the client's first bytes (`leftover`, or one read of `conn`). */
export async function sniffTls(
  conn: Deno.Conn,
  leftover: Uint8Array | null,
  waitMs = SNIFF_WAIT_MS,
): Promise<SniffResult> {
  if (leftover?.length) return { tls: leftover[0] === 0x16, first: leftover };
  const buffer = new Uint8Array(16 * 1024);
  const read = conn.read(buffer).then((n) => (n === null ? null : buffer.slice(0, n)));
  read.catch(() => {}); // whoever takes it over sees the failure
  let timer: ReturnType<typeof setTimeout> | undefined;
  const silent = new Promise<"silent">((
    resolve,
  ) => (timer = setTimeout(resolve, waitMs, "silent")));
  try {
    const first = await Promise.race([read, silent]);
    if (first === "silent") return { tls: false, first: read };
    return { tls: first?.[0] === 0x16, first };
  } finally {
    clearTimeout(timer);
  }
}
