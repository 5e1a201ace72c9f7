import { assert, assertEquals, assertRejects } from "../helpers/assert.ts";
import { LineSplitter, ndjsonConnection } from "../../src/jsonrpc/ndjson.ts";
import { RpcPeer } from "../../src/jsonrpc/peer.ts";
import { ConnectionClosedError, RpcError } from "../../src/jsonrpc/errors.ts";
import type { IncomingMessage } from "../../src/jsonrpc/message.ts";
import { delay } from "../../src/util/async.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Two connected NDJSON endpoints over in-memory pipes. */
function pipePair(options: { maxLineBytes?: number } = {}) {
  const ab = new TransformStream<Uint8Array, Uint8Array>();
  const ba = new TransformStream<Uint8Array, Uint8Array>();
  const a = ndjsonConnection(ba.readable, ab.writable, { label: "a", ...options });
  const b = ndjsonConnection(ab.readable, ba.writable, { label: "b", ...options });
  return { a, b };
}

async function collect(readable: ReadableStream<IncomingMessage>): Promise<IncomingMessage[]> {
  const out: IncomingMessage[] = [];
  for await (const m of readable) out.push(m);
  return out;
}

Deno.test("LineSplitter joins pieces in order and enforces the limit", () => {
  const s = new LineSplitter(10);
  const lines: string[] = [];
  const on = (l: Uint8Array) => lines.push(dec.decode(l));
  assert(s.push(enc.encode("ab"), on));
  assert(s.push(enc.encode("cd\nef"), on));
  assert(s.push(enc.encode("\n\n"), on));
  assertEquals(lines, ["abcd", "ef", ""]);
  assert(s.push(enc.encode("0123456789\n"), on), "exactly the limit is accepted");
  assertEquals(s.push(enc.encode("0123456789A"), on), false, "one byte more is refused");
});

Deno.test("NDJSON: CRLF, blank lines, split messages and malformed lines", async () => {
  const input = new TransformStream<Uint8Array, Uint8Array>();
  const conn = ndjsonConnection(input.readable, new WritableStream(), { parseErrorPrefix: "P" });
  const w = input.writable.getWriter();
  const all = collect(conn.readable);
  await w.write(enc.encode('{"id":1,"met'));
  await w.write(enc.encode('hod":"a"}\r\n   \n\n{"method":"n"}\n[1]\n'));
  await w.close();
  const msgs = await all;
  assertEquals(msgs, [{ id: 1, method: "a" }, { method: "n" }, {
    malformed: "P: expected a JSON-RPC object",
  }]);
  assertEquals((await conn.closed).reason, "eof");
});

Deno.test("NDJSON: an over-long line or invalid UTF-8 ends the connection", async () => {
  for (
    const [bytes, reason] of [
      [enc.encode("x".repeat(65) + "\n"), "line exceeds 64 bytes"],
      [new Uint8Array([0x7b, 0xff, 0x7d, 0x0a]), "invalid UTF-8 in input"],
    ] as const
  ) {
    const input = new TransformStream<Uint8Array, Uint8Array>();
    const conn = ndjsonConnection(input.readable, new WritableStream(), { maxLineBytes: 64 });
    const w = input.writable.getWriter();
    const all = collect(conn.readable);
    w.write(bytes).catch(() => {});
    assertEquals((await conn.closed).reason, reason);
    assertEquals(await all, []);
    await w.abort().catch(() => {});
  }
});

Deno.test("peer: requests, notifications, errors, and out-of-order responses", async () => {
  const { a, b } = pipePair();
  const server = new RpcPeer(a, {
    onRequest: async (method, params) => {
      if (method === "slow") await delay(50);
      if (method === "fail") throw new RpcError(-32602, "bad params");
      if (method === "crash") throw new Error("boom");
      return { method, params };
    },
  });
  const client = new RpcPeer(b);
  const slow = client.request("slow", { x: 1 });
  const fast = client.request("fast");
  assertEquals(await fast, { method: "fast", params: null });
  assertEquals(await slow, { method: "slow", params: { x: 1 } });
  const err = await assertRejects(() => client.request("fail"), RpcError, "bad params");
  assertEquals((err as RpcError).code, -32602);
  const crash = await assertRejects(
    () => client.request("crash"),
    RpcError,
    "internal error: boom",
  );
  assertEquals((crash as RpcError).code, -32603);
  client.close();
  await server.closed;
  await client.closed;
});

Deno.test("peer: a lane runs at most N handlers; idle() gives the slot back", async () => {
  const { a, b } = pipePair();
  let running = 0;
  let peak = 0;
  const gate = Promise.withResolvers<void>();
  const server = new RpcPeer(a, {
    concurrency: 2,
    laneOf: (m) => (m === "control" ? "control" : "ordinary"),
    onRequest: async (method, _p, ctx) => {
      if (method === "poll") return await ctx.idle(gate.promise.then(() => "polled"));
      if (method === "control") return "control";
      running++;
      peak = Math.max(peak, running);
      await delay(20);
      running--;
      return "work";
    },
  });
  const client = new RpcPeer(b);
  // Two long polls release their slots: ordinary work still runs two at a time.
  const polls = [client.request("poll"), client.request("poll")];
  const work = await Promise.all(Array.from({ length: 6 }, () => client.request("work")));
  assertEquals(work, Array(6).fill("work"));
  assertEquals(peak, 2);
  assertEquals(await client.request("control"), "control");
  gate.resolve();
  assertEquals(await Promise.all(polls), ["polled", "polled"]);
  client.close();
  await server.closed;
});

Deno.test("peer: handlers start in arrival order", async () => {
  const { a, b } = pipePair();
  const order: number[] = [];
  const server = new RpcPeer(a, {
    concurrency: 1,
    onRequest: async (_m, params) => {
      order.push(params as number);
      await delay(1);
      return params;
    },
  });
  const client = new RpcPeer(b);
  await Promise.all(Array.from({ length: 20 }, (_, i) => client.request("x", i)));
  assertEquals(order, Array.from({ length: 20 }, (_, i) => i));
  client.close();
  await server.closed;
});

Deno.test("peer: the first close reason fails in-flight and later calls", async () => {
  const { a, b } = pipePair();
  const server = new RpcPeer(a, { onRequest: () => new Promise(() => {}) });
  const client = new RpcPeer(b);
  const pending = client.request("never");
  await delay(10);
  a.close("server went away");
  await assertRejects(() => pending, ConnectionClosedError);
  await assertRejects(() => client.request("later"), ConnectionClosedError);
  assertEquals(await client.notify("x"), false);
  await server.closed;
  await client.closed;
});

Deno.test("peer: unmatched responses and unknown notifications are ignored", async () => {
  const { a, b } = pipePair();
  const seen: string[] = [];
  const server = new RpcPeer(a, { onRequest: () => "ok", onNotification: (m) => seen.push(m) });
  const client = new RpcPeer(b);
  await client.send({ id: 999, result: {} });
  await client.notify("whatever", { a: 1 });
  assertEquals(await client.request("x"), "ok");
  assertEquals(seen, ["whatever"]);
  client.close();
  await server.closed;
});

Deno.test("peer: a client flooding requests is slowed, not buffered without bound", async () => {
  const { a, b } = pipePair();
  const gate = Promise.withResolvers<void>();
  let started = 0;
  const server = new RpcPeer(a, {
    concurrency: 1,
    maxQueued: 10,
    onRequest: async () => {
      started++;
      await gate.promise;
      return 1;
    },
  });
  const client = new RpcPeer(b);
  const calls = Array.from({ length: 200 }, () => client.request("x"));
  await delay(50);
  assertEquals(started, 1);
  gate.resolve();
  await Promise.all(calls);
  assertEquals(started, 200);
  client.close();
  await server.closed;
});
