/**
 * The floor under `stdin_flood_bench.ts`: a server that only reads and
 * frames what the bench sends — 1 MiB reads into one reused buffer (stdin's
 * pipe grown to 1 MiB, as the server grows it), the line ends found
 * (`indexOfNewline`, the fastest search this package knows) or the
 * WebSocket frame headers followed (payloads skipped, only the first bytes
 * of each message unmasked) — and answers every request at once with
 * an empty result. No JSON parse, no UTF-8 check, no base64, nothing
 * written to a child: what no server can do without. `deno run -A
 * bench/flood_floor_server.ts [stdio | ws]`; for ws it prints its URL.
 *
 * @module
 */

import { acceptKey, readHead } from "../src/http1/head.ts";
import { concatBytes, indexOfNewline } from "../src/util/bytes.ts";
import { writeAll } from "../src/util/conn_io.ts";
import { encodeFrame, Opcode } from "../src/websocket/frame.ts";
import { C, loadLibc } from "../src/util/libc.ts";

const enc = new TextEncoder();
const READ = 1024 * 1024;
/** Bytes of a message's start kept to find its id. */
const HEAD = 128;

/** The answer to the request that starts with `head`, or null for a notification. */
function answer(head: Uint8Array): Uint8Array | null {
  const id = new TextDecoder().decode(head).match(/"id":(\d+)/)?.[1];
  return id === undefined ? null : enc.encode(`{"jsonrpc":"2.0","id":${id},"result":{}}`);
}

async function serveStdio(): Promise<void> {
  // A pipe of a megabyte, as the server grows stdin's for long lines.
  loadLibc()?.fcntl(0, C.F_SETPIPE_SZ, READ);
  const buffer = new Uint8Array(READ);
  const head = new Uint8Array(HEAD);
  let headLength = 0;
  for (;;) {
    const n = await Deno.stdin.read(buffer);
    if (n === null) return;
    const chunk = buffer.subarray(0, n);
    let start = 0;
    for (let nl = indexOfNewline(chunk);; nl = indexOfNewline(chunk, start)) {
      const end = nl === -1 ? n : nl;
      const take = Math.min(HEAD - headLength, end - start);
      if (take > 0) head.set(chunk.subarray(start, start + take), headLength);
      headLength += Math.max(take, 0);
      if (nl === -1) break;
      const reply = answer(head.subarray(0, headLength));
      if (reply) await writeAll(Deno.stdout, new Uint8Array([...reply, 0x0a]));
      headLength = 0;
      start = nl + 1;
    }
  }
}

async function serveWs(conn: Deno.TcpConn): Promise<void> {
  conn.setNoDelay(true);
  const buffer = new Uint8Array(READ);
  const reader = conn.readable.getReader();
  const request = await readHead(reader);
  reader.releaseLock();
  await writeAll(
    conn,
    enc.encode(
      "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" +
        `sec-websocket-accept: ${acceptKey(request.headers.get("sec-websocket-key")!)}\r\n\r\n`,
    ),
  );
  // Frame state: header bytes gathered, payload bytes left to skip.
  const header = new Uint8Array(14);
  let headerLength = 0;
  let left = 0;
  let at = 0;
  let fin = false;
  const mask = new Uint8Array(4);
  const head = new Uint8Array(HEAD);
  let headLength = 0;
  const take = async (chunk: Uint8Array) => {
    for (let i = 0; i < chunk.length;) {
      if (left === 0 && headerLength < 14) {
        header[headerLength++] = chunk[i++]!;
        const len7 = header[1]! & 127;
        const size = headerLength < 2 ? 14 : (len7 === 126 ? 4 : len7 === 127 ? 10 : 2) + 4;
        if (headerLength < size) continue;
        fin = (header[0]! & 0x80) !== 0;
        left = len7 === 126
          ? (header[2]! << 8) | header[3]!
          : len7 === 127
          ? Number(new DataView(header.buffer).getBigUint64(2))
          : len7;
        mask.set(header.subarray(size - 4, size));
        headerLength = 0;
        at = 0;
        if (left > 0) continue;
      } else {
        const n = Math.min(left, chunk.length - i);
        for (let k = 0; k < n && headLength < HEAD; k++, headLength++) {
          head[headLength] = chunk[i + k]! ^ mask[(at + k) & 3]!;
        }
        i += n;
        at += n;
        left -= n;
        if (left > 0) continue;
      }
      if (!fin) continue;
      const reply = answer(head.subarray(0, headLength));
      headLength = 0;
      if (reply) await writeAll(conn, concatBytes(encodeFrame(Opcode.Text, reply, false)));
    }
  };
  await take(request.leftover);
  for (;;) {
    const n = await conn.read(buffer);
    if (n === null) return;
    await take(buffer.subarray(0, n));
  }
}

if (Deno.args[0] === "ws") {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  console.log(`ws://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`);
  for await (const conn of listener) serveWs(conn).catch(() => conn.close());
} else {
  await serveStdio();
}
