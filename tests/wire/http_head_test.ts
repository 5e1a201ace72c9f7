// Request heads read straight from connections into shared buffers: every
// connection gets its own bytes, however their reads interleave, and a
// buffer whose read is still pending when the deadline passes is not reused.

import { assert, assertEquals, assertRejects } from "../helpers/assert.ts";
import { HttpHeadError, readConnHead } from "../../src/http1/head.ts";

/** A connection delivering `text` in pieces of `piece` bytes. */
function conn(text: string, piece: number) {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return {
    read(p: Uint8Array): Promise<number | null> {
      // The bytes land at once, as a socket with data waiting writes them
      // during the call; the answer comes a little later.
      if (at >= bytes.length) return Promise.resolve(null);
      const n = Math.min(piece, p.length, bytes.length - at);
      p.set(bytes.subarray(at, at + n));
      at += n;
      return new Promise((r) => at % 2 ? queueMicrotask(() => r(n)) : setTimeout(() => r(n), 1));
    },
  };
}

Deno.test("request heads: concurrent connections reading in pieces each get exactly their own head", async () => {
  const heads = Array.from(
    { length: 60 },
    (_, i) =>
      `GET /c${i} HTTP/1.1\r\nhost: h${i}\r\nx-secret: ${"s".repeat(i)}${i}\r\n\r\n` +
      `after-${i}`,
  );
  const results = await Promise.all(heads.map((text, i) => readConnHead(conn(text, 1 + (i % 9)))));
  results.forEach((head, i) => {
    assertEquals(head.startLine, ["GET", `/c${i}`, "HTTP/1.1"]);
    assertEquals(head.headers.get("host"), `h${i}`);
    assertEquals(head.headers.get("x-secret"), `${"s".repeat(i)}${i}`);
    // What followed the head in the same read, if anything: its own bytes.
    const leftover = new TextDecoder().decode(head.leftover);
    assert(`after-${i}`.startsWith(leftover), `connection ${i}: leftover ${leftover}`);
  });
});

Deno.test("request heads: a read still pending at the deadline keeps its buffer", async () => {
  let late!: (n: number) => void;
  let pending: Uint8Array | null = null;
  const stuck = {
    read(p: Uint8Array) {
      pending = p;
      return new Promise<number | null>((r) => (late = r));
    },
  };
  await assertRejects(() => readConnHead(stuck, { timeoutMs: 20 }), HttpHeadError, "timed out");
  assert(pending !== null);
  // Later heads never read into the buffer the stuck read still owns.
  for (let i = 0; i < 20; i++) {
    const head = await readConnHead({
      read(p: Uint8Array) {
        assert(p.buffer !== pending!.buffer, "a pending read's buffer was handed out again");
        const text = new TextEncoder().encode(`GET /${i} HTTP/1.1\r\nhost: x\r\n\r\n`);
        p.set(text);
        return Promise.resolve(text.length);
      },
    });
    assertEquals(head.startLine[1], `/${i}`);
  }
  late(0);
});
