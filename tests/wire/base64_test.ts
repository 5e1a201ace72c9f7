// Base64 chunks are decoded in one native pass when valid; the exact
// problem (in the Rust base64 crate's words) is found only for the rest.
// Checked against the reference rule (validate every symbol, then decode)
// on random strings built from what trips decoders up: whitespace, padding
// in every place, foreign and non-ASCII symbols, every length modulo 4.

import { assertEquals } from "../helpers/assert.ts";
import { base64Problem, decodeBase64, decodeStrictBase64 } from "../../src/protocol/decode.ts";

const PIECES = [
  "QUJD",
  "QQ==",
  "QUI=",
  "aGk=",
  "aGl=",
  "=",
  "==",
  " ",
  "\n",
  "\t",
  "\r",
  "\f",
  "*",
  "-",
  "_",
  "é",
  "A",
  "AB",
  "ABC",
  "+/+/",
];

function reference(s: string): Uint8Array | { problem: string } {
  const problem = base64Problem(s);
  return problem === null ? decodeBase64(s) : { problem };
}

Deno.test("decodeStrictBase64 agrees with validate-then-decode on 50 000 random strings", () => {
  let seed = 12345;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let i = 0; i < 50_000; i++) {
    let s = "";
    const parts = random(6);
    for (let k = 0; k < parts; k++) s += PIECES[random(PIECES.length)];
    assertEquals(decodeStrictBase64(s), reference(s), JSON.stringify(s));
  }
});

Deno.test("decodeStrictBase64: a large valid chunk, and one with a newline in it", () => {
  const data = new Uint8Array(3 * 1024 * 1024 + 2).map((_, i) => i * 7);
  const text = data.toBase64();
  assertEquals(decodeStrictBase64(text), data);
  const broken = `${text.slice(0, 1000)}\n${text.slice(1001)}`;
  assertEquals(decodeStrictBase64(broken), { problem: "Invalid symbol 10, offset 1000." });
});
