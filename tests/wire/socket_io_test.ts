// A channel's byte writes over a transport that takes bytes a few at a
// time: every byte arrives once, in the order the writes were made, and a
// failed write fails the ones after it.

import { assert, assertEquals, assertRejects } from "../helpers/assert.ts";
import { type ByteDuplex, SocketIo } from "../../src/websocket/socket_io.ts";

function transport(
  take: (p: Uint8Array) => Promise<number>,
): ByteDuplex & { closed: boolean } {
  return {
    readable: new ReadableStream(),
    writable: new WritableStream(),
    read: () => new Promise<number | null>(() => {}),
    write: take,
    closed: false,
    close() {
      this.closed = true;
    },
  };
}

Deno.test("socket writes: taken a few bytes at a time, overlapping writes arrive whole and in order", async () => {
  const out: number[] = [];
  let calls = 0;
  const io = new SocketIo(
    transport(async (p) => {
      calls++;
      await new Promise((r) => setTimeout(r, calls % 3)); // sometimes later
      const n = Math.min(p.length, 1 + (calls % 3));
      out.push(...p.subarray(0, n));
      return n;
    }),
    () => {},
  );
  const expected: number[] = [];
  const writes: Promise<void>[] = [];
  for (let w = 0; w < 20; w++) {
    const bytes = Uint8Array.from({ length: 1 + (w % 7) }, (_, i) => (w * 10 + i) & 0xff);
    expected.push(...bytes);
    writes.push(io.write(bytes));
    if (w % 5 === 4) await writes[w]; // some start with nothing in flight
  }
  await Promise.all(writes);
  assertEquals(out, expected);
});

Deno.test("socket writes: a failed write ends the channel; later writes fail at once", async () => {
  let failures = 0;
  let n = 0;
  const io = new SocketIo(
    transport((p) => {
      n++;
      return n === 2 ? Promise.reject(new Error("broken pipe")) : Promise.resolve(p.length);
    }),
    () => {
      failures++;
      io.close(); // as the channel does: it ends
    },
  );
  await io.write(new Uint8Array([1]));
  const second = io.write(new Uint8Array([2]));
  const third = io.write(new Uint8Array([3]));
  await assertRejects(() => second, Error, "broken pipe");
  await assertRejects(() => third, Error, "WebSocket is closed");
  await assertRejects(() => io.write(new Uint8Array([4])), Error, "WebSocket is closed");
  assert(failures >= 1);
});
