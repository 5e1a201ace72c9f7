import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { concat, memoryLogger, webSocketClient } from "../helpers/wire_client.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import type { WebSocketLimits } from "../../src/websocket/handshake.ts";
import { connectWebSocket } from "../../src/websocket/handshake.ts";
import { webSocketConnection } from "../../src/jsonrpc/websocket_adapter.ts";
import { RpcPeer } from "../../src/jsonrpc/peer.ts";
import {
  applyMask,
  encodeFrame,
  type Frame,
  frameInPlace,
  FrameParser,
  Opcode,
  PayloadPool,
} from "../../src/websocket/frame.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { delay } from "../../src/util/async.ts";

const enc = new TextEncoder();

function startServer(limits: WebSocketLimits = {}) {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0, limits });
  return {
    server,
    listener,
    http: listener.url.replace("ws://", "http://"),
    async [Symbol.asyncDispose]() {
      await listener.close();
      await server.close();
    },
  };
}

/** A hand-rolled client: raw TCP, manual handshake, manual frames. */
async function rawClient(url: string) {
  const u = new URL(url);
  const conn = await Deno.connect({ hostname: u.hostname, port: Number(u.port) });
  const writer = conn.writable.getWriter();
  const reader = conn.readable.getReader();
  await writer.write(enc.encode(
    `GET / HTTP/1.1\r\nhost: ${u.host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n` +
      `sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n`,
  ));
  let head = "";
  let rest = new Uint8Array(0);
  while (!head.includes("\r\n\r\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("closed during handshake");
    const text = new TextDecoder().decode(value);
    const end = (head + text).indexOf("\r\n\r\n");
    if (end !== -1) {
      const headBytes = enc.encode((head + text).slice(0, end + 4)).length -
        enc.encode(head).length;
      rest = value.slice(headBytes);
    }
    head += text;
  }
  assertStringIncludes(head, "101 Switching Protocols");
  assertStringIncludes(head.toLowerCase(), "sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=");
  const parser = new FrameParser({ maxFramePayload: 1 << 30, expectMasked: false });
  const frames: Frame[] = parser.push(rest);
  let ended = false;
  const pump = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        frames.push(...parser.push(value));
      }
    } catch { /* reset */ }
    ended = true;
  })();
  return {
    frames,
    get ended() {
      return ended;
    },
    async send(opcode: number, payload: Uint8Array, { masked = true, fin = true } = {}) {
      const parts = encodeFrame(opcode, payload, masked, fin);
      for (const p of parts) await writer.write(p).catch(() => {});
    },
    async sendRaw(bytes: Uint8Array) {
      await writer.write(bytes).catch(() => {});
    },
    async waitFor(pred: (f: Frame) => boolean, ms = 5000): Promise<Frame> {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        const f = frames.find(pred);
        if (f) return f;
        if (ended) break;
        await delay(5);
      }
      throw new Error(`frame not seen; have opcodes ${frames.map((f) => f.opcode)}`);
    },
    async close() {
      try {
        conn.close();
      } catch { /* closed */ }
      await pump;
    },
  };
}

function closeCode(f: Frame): number {
  return new DataView(f.payload.buffer, f.payload.byteOffset).getUint16(0);
}

Deno.test("ws routes: readyz, Origin, missing upgrade, unknown paths", async () => {
  await using s = startServer();
  const get = (path: string, init?: RequestInit) => fetch(s.http + path, init);
  let r = await get("/readyz");
  assertEquals([r.status, await r.text()], [200, ""]);
  r = await get("/readyz", { method: "HEAD" });
  assertEquals(r.status, 200);
  await r.body?.cancel();
  r = await get("/readyz", { method: "POST" });
  assertEquals([r.status, r.headers.get("allow")], [405, "GET,HEAD"]);
  await r.body?.cancel();
  r = await get("/readyz", { headers: { origin: "http://evil" } });
  assertEquals(r.status, 403);
  await r.body?.cancel();
  r = await get("/");
  assertEquals([r.status, await r.text()], [400, "Connection header did not include 'upgrade'"]);
  r = await get("/other");
  assertEquals(r.status, 404);
  await r.body?.cancel();
  // Origin on an upgrade is refused before anything else.
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.listener.addr.port });
  const w = conn.writable.getWriter();
  await w.write(
    enc.encode(
      "GET / HTTP/1.1\r\nhost: x\r\norigin: http://example.com\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
    ),
  );
  const text = await new Response(conn.readable).text();
  assertStringIncludes(text, "HTTP/1.1 403 Forbidden");
});

Deno.test("ws: text and binary frames in, text frames out, parse errors keep the socket", async () => {
  await using s = startServer();
  const c = await webSocketClient(s.listener.url);
  const init = await c.call("initialize", { clientName: "t" });
  assert(typeof init.result.sessionId === "string");
  await c.send({ method: "initialized" });
  // binary frame
  c.ws.send(enc.encode(JSON.stringify({ jsonrpc: "2.0", id: 102, method: "environment/status" })));
  assertEquals((await c.take((m) => m.id === 102)).result, { status: "ready" });
  // a single trailing newline is fine; two messages in one frame are not
  await c.send('{"id":5,"method":"environment/status"}\n');
  assertEquals((await c.take((m) => m.id === 5)).result, { status: "ready" });
  await c.send('{"id":7,"method":"environment/status"}\n{"id":8,"method":"environment/status"}');
  const err = await c.take((m) => m.id === -1);
  assertEquals(err.error.code, -32600);
  assert(
    err.error.message.startsWith(
      "failed to parse websocket JSON-RPC message from exec-server websocket 127.0.0.1:",
    ),
    err.error.message,
  );
  assertStringIncludes(err.error.message, "trailing characters at line 2 column 1");
  // invalid UTF-8 inside a binary frame is a parse error, not a disconnect
  c.ws.send(new Uint8Array([0x7b, 0xff, 0x7d]));
  assertEquals((await c.take((m) => m.id === -1)).error.code, -32600);
  assertEquals(await c.request("environment/status"), { status: "ready" });
  await c.close();
});

Deno.test("ws: a frame over the limit is answered with close 1009", async () => {
  await using s = startServer({ maxFrameBytes: 1024, maxMessageBytes: 4096 });
  const raw = await rawClient(s.listener.url);
  await raw.send(Opcode.Text, enc.encode("x".repeat(1025)));
  const close = await raw.waitFor((f) => f.opcode === Opcode.Close);
  assertEquals(closeCode(close), 1009);
  await raw.close();
});

Deno.test("ws: a fragmented message over the limit is answered with close 1009", async () => {
  await using s = startServer({ maxFrameBytes: 1024, maxMessageBytes: 2048 });
  const raw = await rawClient(s.listener.url);
  // Within limits: three fragments reassemble into one message.
  const msg = enc.encode(
    JSON.stringify({ id: 1, method: "initialize", params: { clientName: "x".repeat(1000) } }),
  );
  await raw.send(Opcode.Text, msg.subarray(0, 600), { fin: false });
  await raw.send(Opcode.Continuation, msg.subarray(600, 1000), { fin: false });
  await raw.send(Opcode.Ping, enc.encode("hi")); // control frames may interleave
  await raw.send(Opcode.Continuation, msg.subarray(1000));
  const pong = await raw.waitFor((f) => f.opcode === Opcode.Pong);
  assertEquals(new TextDecoder().decode(pong.payload), "hi");
  const reply = await raw.waitFor((f) => f.opcode === Opcode.Text);
  assertStringIncludes(new TextDecoder().decode(reply.payload), '"sessionId"');
  // Over the message limit.
  for (let i = 0; i < 3; i++) {
    await raw.send(i === 0 ? Opcode.Text : Opcode.Continuation, new Uint8Array(1000).fill(32), {
      fin: false,
    });
  }
  const close = await raw.waitFor((f) => f.opcode === Opcode.Close);
  assertEquals(closeCode(close), 1009);
  await raw.close();
});

Deno.test("ws: the real limits: a 16 MiB + 1 frame is refused with 1009", async () => {
  await using s = startServer();
  const raw = await rawClient(s.listener.url);
  await raw.send(Opcode.Binary, new Uint8Array(16 * 1024 * 1024 + 1));
  const close = await raw.waitFor((f) => f.opcode === Opcode.Close, 20_000);
  assertEquals(closeCode(close), 1009);
  await raw.close();
});

Deno.test("ws: unmasked client frames are a protocol error (1002)", async () => {
  await using s = startServer();
  const raw = await rawClient(s.listener.url);
  await raw.send(Opcode.Text, enc.encode("{}"), { masked: false });
  const close = await raw.waitFor((f) => f.opcode === Opcode.Close);
  assertEquals(closeCode(close), 1002);
  await raw.close();
});

Deno.test("ws: pings on an interval; a peer that never answers stays connected", async () => {
  await using s = startServer({ pingIntervalMs: 40 });
  const raw = await rawClient(s.listener.url);
  await delay(300);
  const pings = raw.frames.filter((f) => f.opcode === Opcode.Ping);
  assert(pings.length >= 4, `expected several pings, saw ${pings.length}`);
  assert(pings.every((p) => p.payload.length === 0));
  assert(!raw.ended, "server must not drop a peer that never pongs");
  await raw.send(
    Opcode.Text,
    enc.encode(JSON.stringify({ id: 1, method: "initialize", params: { clientName: "p" } })),
  );
  await raw.waitFor((f) => f.opcode === Opcode.Text);
  await raw.close();
});

Deno.test("ws: our client and server exchange messages larger than one frame", async () => {
  await using s = startServer({ maxFrameBytes: 64 * 1024, maxMessageBytes: 8 * 1024 * 1024 });
  const channel = await connectWebSocket(s.listener.url, {
    maxFrameBytes: 64 * 1024,
    maxMessageBytes: 8 * 1024 * 1024,
  });
  const peer = new RpcPeer(webSocketConnection(channel, { label: "client" }));
  const name = "n".repeat(1024 * 1024);
  const result = await peer.request<{ sessionId: string }>("initialize", { clientName: name });
  assert(result.sessionId.length > 0);
  await peer.notify("initialized");
  assertEquals(await peer.request("environment/status"), { status: "ready" });
  peer.close();
  await peer.closed;
  await channel.closed;
});

Deno.test("ws: a dropped connection detaches the session; resume needs the exact id", async () => {
  const { logger } = memoryLogger();
  const server = new ExecServer({ logger, sessionTtlMs: 5_000 });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  try {
    const a = await webSocketClient(listener.url);
    const { sessionId } = await a.initialize();
    const b = await webSocketClient(listener.url);
    const attached = await b.call("initialize", { clientName: "b", resumeSessionId: sessionId });
    assertEquals(attached.error, {
      code: -32010,
      message: `session ${sessionId} is already attached to another connection`,
    });
    const unknown = await b.call("initialize", { clientName: "b", resumeSessionId: "bogus" });
    assertEquals(unknown.error, { code: -32600, message: "unknown session id bogus" });
    // A failed initialize does not use up the attempt.
    const fresh = await b.initialize({ clientName: "b" });
    assert(fresh.sessionId !== sessionId);
    await a.close();
    await delay(100);
    const c = await webSocketClient(listener.url);
    const resumed = await c.initialize({ clientName: "c", resumeSessionId: sessionId });
    assertEquals(resumed.sessionId, sessionId);
    await b.close();
    await c.close();
  } finally {
    await listener.close();
    await server.close();
  }
});

Deno.test("ws: refuses a non-loopback bind without auth unless allowed", async () => {
  const server = new ExecServer({ logger: nullLogger });
  try {
    let error: Error | null = null;
    try {
      listenWebSocket(server, { hostname: "0.0.0.0", port: 0 });
    } catch (e) {
      error = e as Error;
    }
    assertStringIncludes(
      String(error?.message),
      "refusing to listen on non-loopback address 0.0.0.0",
    );
    const l = listenWebSocket(server, { hostname: "0.0.0.0", port: 0, allowUnauthenticated: true });
    assert(l.url.startsWith("ws://0.0.0.0:"));
    await l.close();
  } finally {
    await server.close();
  }
});

Deno.test("ws: fs/readFile answers beyond the assumed 64 MiB peer limit fail at once unless the client declares more", async () => {
  await using s = startServer();
  const dir = await Deno.realPath(await Deno.makeTempDir());
  try {
    const f = await Deno.open(`${dir}/big`, { create: true, write: true });
    await f.truncate(49 * 1024 * 1024); // 65.3 MiB of base64
    f.close();
    const path = `file://${dir}/big`;
    const a = await webSocketClient(s.listener.url);
    await a.initialize();
    const refused = await a.call("fs/readFile", { path });
    assertEquals(refused.error.code, -32600);
    assertStringIncludes(refused.error.message, "fs/open and fs/readBlock");
    await a.close();
    const b = await webSocketClient(s.listener.url);
    await b.initialize({ clientName: "big", maxMessageBytes: 128 * 1024 * 1024 });
    const ok = await b.request("fs/readFile", { path }, 60_000);
    assertEquals(ok.dataBase64.length, 4 * Math.ceil(49 * 1024 * 1024 / 3));
    await b.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ws frames: parsed payloads filled directly or in pieces forward in place byte-exact", () => {
  for (const length of [0, 1, 125, 126, 65_535, 65_536, 300_000]) {
    const payload = new Uint8Array(length).map((_, i) => (i * 7) & 0xff);
    const wire = concat(encodeFrame(Opcode.Binary, payload, true));
    // Piecewise: odd-sized chunks through push().
    const a = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: true });
    const got: Frame[] = [];
    for (let at = 0; at < wire.length; at += 4093) {
      got.push(...a.push(wire.subarray(at, at + 4093)));
    }
    // Direct: the header through push(), the payload read into payloadTail().
    const b = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: true });
    const headerLength = wire.length - length;
    got.push(...b.push(wire.subarray(0, headerLength + Math.min(length, 10))));
    let at = headerLength + Math.min(length, 10);
    while (at < wire.length) {
      const tail = b.payloadTail();
      const n = Math.min(tail.length, 50_000);
      tail.set(wire.subarray(at, at + n));
      got.push(...b.filledTail(tail.subarray(0, n)));
      at += n;
    }
    assertEquals(got.length, 2);
    for (const frame of got) {
      assertEquals(frame.payload.toHex(), payload.toHex());
      const forwarded = frameInPlace(Opcode.Binary, frame.payload)!;
      assertEquals(forwarded.toHex(), concat(encodeFrame(Opcode.Binary, payload, false)).toHex());
    }
  }
  assertEquals(frameInPlace(Opcode.Binary, new Uint8Array(8)), null);
});

Deno.test("ws frames: a recycled payload buffer serves the next frame, once", () => {
  const wire = (fill: number) =>
    concat(encodeFrame(Opcode.Binary, new Uint8Array(50_000).fill(fill), false));
  // Without a pool, payloads get exactly-sized buffers.
  const plain = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: false });
  const [exact] = plain.push(wire(0));
  assertEquals(exact!.payload.buffer.byteLength, 50_010);
  const pool = new PayloadPool();
  const parser = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: false, pool });
  const [first] = parser.push(wire(1));
  const buffer = first!.payload.buffer;
  pool.recycle(first!.payload);
  pool.recycle(first!.payload); // a second call is ignored
  pool.recycle(new Uint8Array(50_000)); // not the parser's: ignored
  const [second] = parser.push(wire(2));
  assert(second!.payload.buffer === buffer, "the recycled buffer is reused");
  assert(second!.payload.every((b) => b === 2));
  const [third] = parser.push(wire(3));
  assert(third!.payload.buffer !== buffer, "a buffer serves one frame at a time");
  // Small payloads are never pooled.
  const [small] = parser.push(concat(encodeFrame(Opcode.Binary, new Uint8Array(100), false)));
  assertEquals(small!.payload.buffer.byteLength, 110);
});

Deno.test("ws frames: masking matches the byte-wise definition at every alignment", () => {
  const mask = Uint8Array.from([0x9a, 0x01, 0xfe, 0x37]);
  for (const length of [0, 1, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 4099, 70_001]) {
    for (let offset = 0; offset < 10; offset++) {
      // A piece of a payload starting `phase` bytes into it (frames are
      // unmasked piece by piece as they arrive).
      const phase = (offset * 7 + length) % 5;
      const backing = new Uint8Array(offset + length + 3).map((_, i) => (i * 29 + 5) & 0xff);
      const data = backing.subarray(offset, offset + length);
      const expected = data.map((b, i) => b ^ mask[(i + phase) & 3]!);
      const before = backing.slice();
      applyMask(data, mask, phase);
      assertEquals(
        data.toHex(),
        expected.toHex(),
        `length ${length} offset ${offset} phase ${phase}`,
      );
      // Bytes around the view are untouched.
      assertEquals(backing.subarray(0, offset).toHex(), before.subarray(0, offset).toHex());
      assertEquals(
        backing.subarray(offset + length).toHex(),
        before.subarray(offset + length).toHex(),
      );
    }
  }
});
