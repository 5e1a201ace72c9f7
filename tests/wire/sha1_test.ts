// The handshake's SHA-1 against node:crypto, at every length around the
// block and padding boundaries, and RFC 6455's worked example.

import { createHash } from "node:crypto";
import { assertEquals } from "../helpers/assert.ts";
import { sha1 } from "../../src/util/sha1.ts";
import { acceptKey } from "../../src/http1/head.ts";

Deno.test("sha1: equals node:crypto's digest at lengths 0–300 and at 1 MiB", () => {
  const data = new Uint8Array(1 << 20);
  let x = 12345;
  for (let i = 0; i < data.length; i++) data[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
  for (const n of [...Array.from({ length: 301 }, (_, i) => i), 1 << 20]) {
    const input = data.subarray(0, n);
    const want = createHash("sha1").update(input).digest("hex");
    assertEquals(sha1(input).toHex(), want, `length ${n}`);
  }
});

Deno.test("sha1: the accept key of RFC 6455 §1.3's example", () => {
  assertEquals(acceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
});
