// Autobahn-style WebSocket frame cases against our server, over a raw TCP
// socket: close codes (valid, reserved, never-on-the-wire), close payloads,
// UTF-8 (in text frames, across fragments, in close reasons), control frames
// inside fragmented messages, fragmented or oversized control frames,
// reserved bits, unknown opcodes, and continuation misuse.

import "../helpers/libc_preload.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { isValidCloseCode, truncateUtf8 } from "../../src/websocket/channel.ts";
import { assert, assertEquals } from "../helpers/assert.ts";

const encoder = new TextEncoder();

interface ServerFrame {
  fin: boolean;
  opcode: number;
  payload: Uint8Array;
}

/** A raw client: handshake done, frames in and out by hand. */
async function rawClient(port: number) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(encoder.encode(
    `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  ));
  let buffered = new Uint8Array(0);
  const read = async (): Promise<boolean> => {
    const chunk = new Uint8Array(65536);
    const n = await conn.read(chunk).catch(() => null);
    if (n === null) return false;
    const joined = new Uint8Array(buffered.length + n);
    joined.set(buffered);
    joined.set(chunk.subarray(0, n), buffered.length);
    buffered = joined;
    return true;
  };
  for (;;) {
    const text = new TextDecoder().decode(buffered);
    const end = text.indexOf("\r\n\r\n");
    if (end !== -1) {
      assert(text.startsWith("HTTP/1.1 101"), text);
      buffered = buffered.slice(end + 4);
      break;
    }
    if (!(await read())) throw new Error("no handshake answer");
  }
  return {
    /** Sends one frame (masked unless told), with raw first-byte flags. */
    async send(opcode: number, payload: Uint8Array, options: { fin?: boolean; rsv?: number } = {}) {
      const fin = options.fin ?? true;
      const head = [(fin ? 0x80 : 0) | ((options.rsv ?? 0) << 4) | opcode];
      if (payload.length < 126) head.push(0x80 | payload.length);
      else head.push(0x80 | 126, payload.length >> 8, payload.length & 0xff);
      const mask = crypto.getRandomValues(new Uint8Array(4));
      const masked = payload.map((b, i) => b ^ mask[i % 4]!);
      await conn.write(new Uint8Array([...head, ...mask, ...masked]));
    },
    /** The next frame from the server, or null at EOF. */
    async frame(): Promise<ServerFrame | null> {
      for (;;) {
        if (buffered.length >= 2) {
          let len = buffered[1]! & 0x7f;
          let at = 2;
          if (len === 126) {
            if (buffered.length < 4) {
              if (!(await read())) return null;
              continue;
            }
            len = (buffered[2]! << 8) | buffered[3]!;
            at = 4;
          }
          if (buffered.length >= at + len) {
            const frame = {
              fin: (buffered[0]! & 0x80) !== 0,
              opcode: buffered[0]! & 0x0f,
              payload: buffered.slice(at, at + len),
            };
            buffered = buffered.slice(at + len);
            return frame;
          }
        }
        if (!(await read())) return null;
      }
    },
    /** Reads until a Close frame; its code (null: EOF without one). */
    async closeCode(): Promise<number | null> {
      for (;;) {
        const f = await this.frame();
        if (f === null) return null;
        if (f.opcode === 8) {
          return f.payload.length >= 2 ? (f.payload[0]! << 8) | f.payload[1]! : 1005;
        }
      }
    },
    close() {
      try {
        conn.close();
      } catch { /* closed */ }
    },
  };
}

function closeFrame(code: number, reason: Uint8Array = new Uint8Array()): Uint8Array {
  return new Uint8Array([code >> 8, code & 0xff, ...reason]);
}

async function withServer(fn: (port: number) => Promise<void>) {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  try {
    await fn(Number(new URL(listener.url).port));
  } finally {
    await listener.close();
    await server.close();
  }
}

Deno.test("websocket: close codes — valid ones are echoed, reserved and never-sent ones are 1002", async () => {
  await withServer(async (port) => {
    for (const code of [1000, 1001, 1003, 1011, 3000, 4999]) {
      const c = await rawClient(port);
      await c.send(8, closeFrame(code, encoder.encode("bye")));
      assertEquals(await c.closeCode(), code, `code ${code}`);
      c.close();
    }
    for (const code of [0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535]) {
      const c = await rawClient(port);
      await c.send(8, closeFrame(code));
      assertEquals(await c.closeCode(), 1002, `code ${code}`);
      c.close();
    }
    // An empty close is echoed empty; a 1-byte payload is malformed.
    const empty = await rawClient(port);
    await empty.send(8, new Uint8Array());
    assertEquals(await empty.closeCode(), 1005);
    empty.close();
    const one = await rawClient(port);
    await one.send(8, new Uint8Array([3]));
    assertEquals(await one.closeCode(), 1002);
    one.close();
    // A close reason that is not UTF-8: 1007.
    const bad = await rawClient(port);
    await bad.send(8, closeFrame(1000, new Uint8Array([0xce, 0xba, 0xe1, 0xbd])));
    assertEquals(await bad.closeCode(), 1007);
    bad.close();
  });
});

Deno.test("websocket: UTF-8 in text frames, split across fragments, and invalid", async () => {
  await withServer(async (port) => {
    const request = encoder.encode(
      JSON.stringify({ id: 1, method: "initialize", params: { clientName: "κόσμε" } }),
    );
    // Split inside the two-byte "ό".
    const at = request.indexOf(0xcf) + 1;
    const c = await rawClient(port);
    await c.send(1, request.subarray(0, at), { fin: false });
    await c.send(9, encoder.encode("ping in the middle")); // a control frame between fragments
    await c.send(0, request.subarray(at));
    const pong = await c.frame();
    assertEquals(pong?.opcode, 10);
    assertEquals(new TextDecoder().decode(pong!.payload), "ping in the middle");
    const answer = await c.frame();
    assertEquals(answer?.opcode, 1);
    assert(JSON.parse(new TextDecoder().decode(answer!.payload)).result.sessionId);
    c.close();

    const invalid = await rawClient(port);
    await invalid.send(1, new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]));
    assertEquals(await invalid.closeCode(), 1007);
    invalid.close();
  });
});

Deno.test("websocket: frame-level violations end the connection with 1002", async () => {
  await withServer(async (port) => {
    const cases: Array<[string, (c: Awaited<ReturnType<typeof rawClient>>) => Promise<void>]> = [
      ["a fragmented ping", (c) => c.send(9, encoder.encode("x"), { fin: false })],
      ["a ping over 125 bytes", (c) => c.send(9, new Uint8Array(126))],
      ["reserved bits", (c) => c.send(1, encoder.encode("{}"), { rsv: 4 })],
      ["an unknown opcode", (c) => c.send(3, encoder.encode("x"))],
      ["a continuation without a start", (c) => c.send(0, encoder.encode("x"))],
      ["a new message inside a fragmented one", async (c) => {
        await c.send(1, encoder.encode("{"), { fin: false });
        await c.send(1, encoder.encode("}"));
      }],
    ];
    for (const [name, attack] of cases) {
      const c = await rawClient(port);
      await attack(c);
      assertEquals(await c.closeCode(), 1002, name);
      c.close();
    }
  });
});

Deno.test("websocket: close codes and reasons helpers", () => {
  assert(isValidCloseCode(1000) && isValidCloseCode(1014) && isValidCloseCode(4999));
  for (const code of [999, 1004, 1005, 1006, 1015, 2999, 5000]) assert(!isValidCloseCode(code));
  // 122 ASCII bytes then a 3-byte character: the cut falls before it.
  const reason = "a".repeat(122) + "€€";
  const cut = truncateUtf8(reason, 123);
  assertEquals(cut.length, 122);
  assertEquals(new TextDecoder("utf-8", { fatal: true }).decode(cut), "a".repeat(122));
  assertEquals(truncateUtf8("€".repeat(41), 123).length, 123);
  assertEquals(truncateUtf8("short", 123).length, 5);
});

Deno.test("websocket upgrade: half a head is refused with 408 at the deadline; a head that came in time is read even when the server was stalled past it", async () => {
  const { readHead } = await import("../../src/http1/head.ts");
  using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const encode = (s: string) => new TextEncoder().encode(s);
  const outcome = (p: Promise<unknown>) =>
    p.then(() => "read", (e) => `${(e as { status?: number }).status ?? e}`);
  // The attacker's bytes: a head that never ends.
  {
    using client = await Deno.connect({ hostname: "127.0.0.1", port });
    using server = await listener.accept();
    await client.write(encode("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "));
    assertEquals(await outcome(readHead(server.readable.getReader(), { timeoutMs: 100 })), "408");
  }
  // A whole head, sent at once, while this process is busy past the
  // deadline (as when thousands of connections arrive with their processes
  // spawning): the late timer gives the pending read its turn.
  {
    using client = await Deno.connect({ hostname: "127.0.0.1", port });
    using server = await listener.accept();
    const reading = outcome(readHead(server.readable.getReader(), { timeoutMs: 100 }));
    await client.write(encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    const until = performance.now() + 400;
    while (performance.now() < until) { /* the event loop is stalled */ }
    assertEquals(await reading, "read");
  }
});
