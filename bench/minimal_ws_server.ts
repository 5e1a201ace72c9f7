/**
 * The floor of a WebSocket JSON-RPC server on `Deno.listen` in JavaScript:
 * the handshake, this package's frame parser and encoder, `JSON.parse`, one
 * `Deno.lstatSync` per `fs/getMetadata` (as the server does on local
 * filesystems, see `src/fs/quick_meta.ts`), `JSON.stringify` — no peer, lanes,
 * sessions, output batching or strict JSON. Only for measuring what the
 * full server costs on top (`exec_bench.ts --ws … --vs-ws "deno run -A
 * bench/minimal_ws_server.ts"`); it answers `initialize`,
 * `fs/getMetadata` and a bare `process/start` (stdout only).
 *
 * @module
 */

import { encodeFrame, FrameParser, Opcode } from "../src/websocket/frame.ts";
import { acceptKey, readHead } from "../src/http1/head.ts";

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
console.log(`ws://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`);
const enc = new TextEncoder();
const dec = new TextDecoder();

async function serve(conn: Deno.Conn) {
  const reader = conn.readable.getReader();
  const head = await readHead(reader);
  reader.releaseLock();
  const key = head.headers.get("sec-websocket-key")!;
  await conn.write(enc.encode(
    `HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n` +
      `sec-websocket-accept: ${await acceptKey(key)}\r\n\r\n`,
  ));
  const parser = new FrameParser({ maxFramePayload: 16 << 20, expectMasked: true });
  const buffer = new Uint8Array(64 * 1024);
  // Writes in order: a partial write is finished before the next starts.
  let writing: Promise<void> = Promise.resolve();
  const send = (message: unknown): Promise<void> => {
    const frame = encodeFrame(Opcode.Text, enc.encode(JSON.stringify(message)), false);
    const bytes = new Uint8Array(frame.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const part of frame) bytes.set(part, (at += part.length) - part.length);
    writing = writing.then(async () => {
      for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
    });
    return writing;
  };
  let pending = head.leftover;
  for (;;) {
    let chunk: Uint8Array;
    if (pending.length) {
      chunk = pending;
      pending = new Uint8Array(0);
    } else {
      const n = await conn.read(buffer);
      if (n === null) return;
      chunk = buffer.subarray(0, n);
    }
    for (const frame of parser.push(chunk)) {
      if (frame.opcode === Opcode.Close) return;
      if (frame.opcode !== Opcode.Text) continue;
      const msg = JSON.parse(dec.decode(frame.payload));
      if (msg.id === undefined) continue;
      if (msg.method === "initialize") {
        await send({ jsonrpc: "2.0", id: msg.id, result: { sessionId: "s", environmentInfo: {} } });
      } else if (msg.method === "fs/getMetadata") {
        const info = Deno.lstatSync(new URL(msg.params.path).pathname);
        await send({
          jsonrpc: "2.0",
          id: msg.id,
          result: {
            isDirectory: info.isDirectory,
            isFile: info.isFile,
            isSymlink: info.isSymlink,
            createdAtMs: info.birthtime?.getTime() ?? 0,
            modifiedAtMs: info.mtime?.getTime() ?? 0,
          },
        });
      } else if (msg.method === "process/start") {
        await send({ jsonrpc: "2.0", id: msg.id, result: { processId: msg.params.processId } });
        run(msg.params, send);
      } else {
        await send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "no" } });
      }
    }
  }
}

/**
 * `process/start` at its floor: the child's stdout read in 64 KiB pieces
 * into one reused buffer,
 * each sent as a base64 `process/output` (one `toBase64`, one string, one
 * frame), then `process/exited` and `process/closed`. No stderr, stdin,
 * process groups, history or backpressure beyond awaiting each write.
 */
async function run(
  params: { processId: string; argv: string[]; env: Record<string, string> },
  send: (message: unknown) => Promise<void>,
) {
  const [program, ...args] = params.argv;
  const child = new Deno.Command(program!, {
    args,
    env: params.env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const processId = params.processId;
  let seq = 0;
  const reader = child.stdout.getReader({ mode: "byob" });
  // One buffer for every read, as the server reads (a fresh 64 KiB per read
  // costs page faults on fresh memory and full collections to free it).
  let buffer = new ArrayBuffer(64 * 1024);
  for (;;) {
    const { value, done } = await reader.read(new Uint8Array(buffer));
    if (done || value === undefined) break;
    buffer = value.buffer as ArrayBuffer;
    await send({
      jsonrpc: "2.0",
      method: "process/output",
      params: { processId, seq: ++seq, stream: "stdout", chunk: value.toBase64() },
    });
  }
  const { code } = await child.status;
  await send({ jsonrpc: "2.0", method: "process/exited", params: { processId, exitCode: code } });
  await send({ jsonrpc: "2.0", method: "process/closed", params: { processId } });
}

for await (const conn of listener) serve(conn).catch(() => {}).finally(() => conn.close());
