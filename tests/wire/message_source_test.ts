import { assert, assertEquals } from "../helpers/assert.ts";
import { WebSocketChannel } from "../../src/websocket/channel.ts";
import { encodeFrame, Opcode } from "../../src/websocket/frame.ts";
import { webSocketConnection } from "../../src/jsonrpc/websocket_adapter.ts";
import { ndjsonConnection } from "../../src/jsonrpc/ndjson.ts";
import { concatBytes } from "../../src/util/bytes.ts";

const enc = new TextEncoder();

/** A server-side channel reading `input`'s bytes (client frames are masked). */
function serverChannel(input: ReadableStream<Uint8Array>) {
  return new WebSocketChannel(
    { readable: input, writable: new WritableStream(), close() {} },
    { role: "server", pingIntervalMs: 0 },
  );
}

const textFrame = (text: string) => concatBytes(encodeFrame(Opcode.Text, enc.encode(text), true));

Deno.test("message source (ws): a burst read at once is handed out without promises, in order", async () => {
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const channel = serverChannel(pipe.readable);
  const source = webSocketConnection(channel).source!;
  const writer = pipe.writable.getWriter();
  // Writes resolve only once read (no buffering in the pipe): not awaited.
  const write = (bytes: Uint8Array) => void writer.write(bytes).catch(() => {});
  // Three requests in one read.
  write(
    concatBytes([1, 2, 3].map((id) => textFrame(`{"jsonrpc":"2.0","id":${id},"method":"m"}`))),
  );
  const first = source.next();
  assert(first instanceof Promise, "the first needs a read");
  assertEquals(await first, { id: 1, method: "m" });
  const second = source.next();
  const third = source.next();
  assert(
    !(second instanceof Promise) && !(third instanceof Promise),
    "parsed frames are plain values",
  );
  assertEquals([second, third], [
    { id: 2, method: "m" },
    { id: 3, method: "m" },
  ]);
  // Calls made while a read is pending are served in call order.
  const a = source.next();
  const b = source.next();
  write(textFrame('{"jsonrpc":"2.0","id":4,"method":"m"}'));
  write(textFrame('{"jsonrpc":"2.0","id":5,"method":"m"}'));
  assertEquals(await Promise.all([a, b]), [
    { id: 4, method: "m" },
    { id: 5, method: "m" },
  ]);
  // Invalid UTF-8 in a text frame is not taken by the shortcut: it fails the channel (1007).
  write(concatBytes(encodeFrame(Opcode.Text, new Uint8Array([0x7b, 0xff]), true)));
  assertEquals(await source.next(), null);
  assertEquals((await channel.closed).code, 1007);
  await writer.abort().catch(() => {});
});

Deno.test("message source (NDJSON): lines before an over-long one are delivered, then the end", async () => {
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const conn = ndjsonConnection(pipe.readable, new WritableStream(), { maxLineBytes: 64 });
  const source = conn.source!;
  const writer = pipe.writable.getWriter();
  writer.write(enc.encode(`{"id":1,"method":"a"}\n{"id":2,"method":"b"}\n${"x".repeat(65)}\n`))
    .catch(() => {});
  assertEquals(await source.next(), { id: 1, method: "a" });
  const second = source.next();
  assert(!(second instanceof Promise), "the rest of a chunk is handed out without a read");
  assertEquals(second, { id: 2, method: "b" });
  assertEquals(await source.next(), null);
  assertEquals(await source.next(), null, "the end stays the end");
  assertEquals((await conn.closed).reason, "line exceeds 64 bytes");
  await writer.abort().catch(() => {});
});

Deno.test("message source (NDJSON): a direct reader's buffer is reused safely across split lines", async () => {
  // Each read fills the caller's buffer with the next piece: lines split
  // across reads must survive the buffer being overwritten.
  const pieces = [
    '{"id":1,"method":"alpha"}\n{"id":2,"me',
    'thod":"beta"}\n{"id":3',
    ',"method":"gamma"}\n',
  ];
  let seen: Uint8Array | undefined;
  const input = {
    read(p: Uint8Array): Promise<number | null> {
      if (seen !== undefined) assert(seen.buffer === p.buffer, "one buffer for every read");
      seen = p;
      const piece = pieces.shift();
      if (piece === undefined) return Promise.resolve(null);
      const bytes = enc.encode(piece);
      p.fill(0x78); // garbage beyond what is read
      p.set(bytes);
      return Promise.resolve(bytes.length);
    },
  };
  const conn = ndjsonConnection(input, new WritableStream());
  const source = conn.source!;
  const all = [];
  for (let m = await source.next(); m !== null; m = await source.next()) all.push(m);
  assertEquals(all, [{ id: 1, method: "alpha" }, { id: 2, method: "beta" }, {
    id: 3,
    method: "gamma",
  }]);
  assertEquals((await conn.closed).reason, "eof");
});

Deno.test("message source (NDJSON): long lines read straight into their buffer arrive whole, in order, within the limit", async () => {
  const max = 400 * 1024;
  const line = (id: number, size: number) => {
    const head = `{"id":${id},"method":"m","params":{"s":"`;
    const s = "abcdefghij".repeat(size).slice(0, size - head.length - 3);
    return { text: `${head}${s}"}}`, message: { id, method: "m", params: { s } } };
  };
  const a = line(1, 300 * 1024);
  const b = line(2, 40);
  const c = line(3, max); // exactly the limit
  const d = line(4, 150 * 1024);
  const e = line(5, max + 1);
  const stream = enc.encode(`${a.text}\n${b.text}\n${c.text}\n${d.text}\r\n${e.text}\n`);
  // Pieces of pseudo-random sizes, never more than asked: newlines land
  // inside reads, at their ends and at their starts.
  let at = 0;
  let x = 48;
  let straight = 0;
  const input = {
    read(p: Uint8Array): Promise<number | null> {
      if (at === stream.length) return Promise.resolve(null);
      x = (x * 1103515245 + 12345) & 0x7fffffff;
      let n = Math.min(p.length, stream.length - at, 1 + (x % 90_000));
      // Every other newline ends a read: the next one starts with it.
      const nl = stream.indexOf(0x0a, at);
      if (nl > at && nl < at + n && x % 2 === 0) n = nl - at;
      if (p.byteOffset > 64 * 1024) straight++;
      p.set(stream.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
  const conn = ndjsonConnection(input, new WritableStream(), { maxLineBytes: max });
  const source = conn.source!;
  const all = [];
  for (let m = await source.next(); m !== null; m = await source.next()) all.push(m);
  assertEquals(all, [a.message, b.message, c.message, d.message]);
  assertEquals((await conn.closed).reason, `line exceeds ${max} bytes`);
  assert(straight > 5, `reads straight into a long line: ${straight}`);
});
