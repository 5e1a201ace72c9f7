/**
 * The SOCKS5 wire (RFC 1928) both ends share: reply codes, the address
 * encoding, and the client's side of a CONNECT (the sandbox's transparent
 * TCP capture speaks it to the managed proxy; the proxy's listener is
 * `proxy/socks5.ts`).
 *
 * @module
 */

import { ipBytes, ipFromBytes } from "../util/host.ts";
import { writeAll } from "../util/conn_io.ts";

/** SOCKS5 reply codes. */
export const SocksReply = {
  succeeded: 0x00,
  generalFailure: 0x01,
  notAllowed: 0x02,
  networkUnreachable: 0x03,
  hostUnreachable: 0x04,
  connectionRefused: 0x05,
  ttlExpired: 0x06,
  commandNotSupported: 0x07,
  addressTypeNotSupported: 0x08,
} as const;

/** Encodes an address for a reply or a UDP header. */
export function encodeSocksAddress(host: string, port: number): Uint8Array {
  const ip = ipBytes(host);
  let addr: Uint8Array;
  if (ip?.length === 4) addr = new Uint8Array([0x01, ...ip]);
  else if (ip?.length === 16) addr = new Uint8Array([0x04, ...ip]);
  else {
    const name = new TextEncoder().encode(host);
    addr = new Uint8Array([0x03, name.length, ...name]);
  }
  return new Uint8Array([...addr, port >> 8, port & 0xff]);
}

/** Decodes an address at `offset` of `data`: host, port and the end offset; `null` if truncated or unknown. */
export function decodeSocksAddress(
  data: Uint8Array,
  offset: number,
): { host: string; port: number; end: number; atyp: number } | null {
  const atyp = data[offset];
  let host: string;
  let at = offset + 1;
  if (atyp === 0x01) {
    if (data.length < at + 6) return null;
    host = ipFromBytes(data.subarray(at, at + 4));
    at += 4;
  } else if (atyp === 0x04) {
    if (data.length < at + 18) return null;
    host = ipFromBytes(data.subarray(at, at + 16));
    at += 16;
  } else if (atyp === 0x03) {
    const len = data[at];
    if (len === undefined || data.length < at + 1 + len + 2) return null;
    host = new TextDecoder().decode(data.subarray(at + 1, at + 1 + len));
    at += 1 + len;
  } else return null;
  return { host, port: (data[at]! << 8) | data[at + 1]!, end: at + 2, atyp: atyp! };
}

/** A CONNECT the proxy refused: its reply code. */
export class SocksRefusedError extends Error {
  /** Creates the error. */
  constructor(readonly reply: number) {
    super(`the SOCKS5 proxy refused the connection (reply ${reply})`);
    this.name = "SocksRefusedError";
  }
}

async function readExact(conn: Deno.Conn, n: number): Promise<Uint8Array> {
  const out = new Uint8Array(n);
  for (let at = 0; at < n;) {
    const read = await conn.read(out.subarray(at));
    if (read === null) throw new Error("the SOCKS5 proxy closed during the handshake");
    at += read;
  }
  return out;
}

/**
 * CONNECT through the SOCKS5 proxy on `conn` (no authentication) to
 * `host:port`; resolves once the proxy has connected, with nothing read
 * past its reply. Throws {@linkcode SocksRefusedError} with the proxy's
 * code when it refuses.
 */
export async function socks5Connect(conn: Deno.Conn, host: string, port: number): Promise<void> {
  await writeAll(conn, new Uint8Array([0x05, 0x01, 0x00]));
  const [version, method] = await readExact(conn, 2);
  if (version !== 0x05 || method !== 0x00) throw new SocksRefusedError(SocksReply.generalFailure);
  await writeAll(conn, new Uint8Array([0x05, 0x01, 0x00, ...encodeSocksAddress(host, port)]));
  const [, code, , atyp] = await readExact(conn, 4);
  const length = atyp === 0x01 ? 4 : atyp === 0x04 ? 16 : (await readExact(conn, 1))[0]!;
  await readExact(conn, length + 2);
  if (code !== SocksReply.succeeded) throw new SocksRefusedError(code!);
}
