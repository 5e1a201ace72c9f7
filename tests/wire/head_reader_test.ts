// Request heads read into regions of shared slabs (`headReader`): reads in
// flight at once never share bytes, a head longer than one region is read
// whole, and chunks read before a slab is replaced keep their bytes.

import { assertEquals } from "../helpers/assert.ts";
import { headReader } from "../../src/http1/body.ts";
import { readHead } from "../../src/http1/head.ts";

const encoder = new TextEncoder();

/** A connection whose reads complete when told, with the bytes given then. */
function pendingConn() {
  const waiting: Array<(bytes: Uint8Array | null) => void> = [];
  return {
    read(p: Uint8Array): Promise<number | null> {
      return new Promise((resolve) => {
        waiting.push((bytes) => {
          if (bytes === null) return resolve(null);
          p.set(bytes);
          resolve(bytes.length);
        });
      });
    },
    deliver(bytes: Uint8Array | null) {
      waiting.shift()!(bytes);
    },
  };
}

/** A connection that hands out `data` at most `step` bytes per read. */
function scriptedConn(data: Uint8Array, step: number) {
  let at = 0;
  return {
    read(p: Uint8Array): Promise<number | null> {
      if (at >= data.length) return Promise.resolve(null);
      const n = Math.min(step, p.length, data.length - at);
      p.set(data.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
}

Deno.test("head reader: reads in flight at once get regions of their own", async () => {
  const conns = Array.from({ length: 200 }, pendingConn);
  const reads = conns.map((c) => headReader(c).read());
  // Complete them in reverse: each writes a full region of its own byte.
  for (let i = conns.length - 1; i >= 0; i--) conns[i]!.deliver(new Uint8Array(4096).fill(i % 251));
  const chunks = await Promise.all(reads);
  chunks.forEach((r, i) => {
    const bytes = r.value!;
    assertEquals(bytes.length, 4096, `read ${i}`);
    assertEquals(bytes.every((b) => b === i % 251), true, `read ${i} kept its bytes`);
  });
});

Deno.test("head reader: a head longer than a region, and one split into small reads, parse whole", async () => {
  const long = "x".repeat(9000);
  const text = `GET / HTTP/1.1\r\nHost: a\r\nX-Long: ${long}\r\n\r\nleft`;
  for (const step of [3, 4096, 100_000]) {
    const head = await readHead(headReader(scriptedConn(encoder.encode(text), step)));
    assertEquals(head.headers.get("x-long"), long, `step ${step}`);
    // What was read past the head stays for the next reader (all of it, or what came with it).
    const left = new TextDecoder().decode(head.leftover);
    assertEquals(left.length > 0 && "left".startsWith(left), true, `step ${step}: ${left}`);
  }
});

Deno.test("head reader: chunks keep their bytes after their slab is replaced", async () => {
  // 64 regions per slab: 150 reads span three slabs.
  const kept: Uint8Array[] = [];
  for (let i = 0; i < 150; i++) {
    const conn = scriptedConn(new Uint8Array(10).fill(i), 10);
    kept.push((await headReader(conn).read()).value!);
  }
  kept.forEach((chunk, i) => assertEquals([...chunk], new Array(10).fill(i), `chunk ${i}`));
});
