// indexOfNewline is Uint8Array#indexOf(0x0a) made faster by searching long
// stretches as text: it must agree with it everywhere — newlines before,
// at and past the byte-searched head and the text slices' ends, non-ASCII
// and invalid UTF-8 in a slice (where character and byte indices part).

import { assertEquals } from "../helpers/assert.ts";
import { indexOfNewline } from "../../src/util/bytes.ts";

Deno.test("indexOfNewline finds what indexOf finds, at every place and in any bytes", () => {
  let x = 48;
  const next = (n: number) => (x = (x * 1103515245 + 12345) & 0x7fffffff) % n;
  // Around the 4 KiB head and the 32 KiB slices after it.
  const edges = [0, 1, 4095, 4096, 4097, 4096 + 32767, 4096 + 32768, 4096 + 65536 + 1];
  for (let round = 0; round < 400; round++) {
    const size = round < 100 ? next(10_000) : 40_000 + next(120_000);
    const bytes = new Uint8Array(size);
    const kind = round % 4;
    for (let i = 0; i < size; i++) {
      // ASCII without newlines; or with multi-byte characters, stray
      // continuation bytes and truncated sequences mixed in.
      bytes[i] = kind === 0 ? 0x41 + next(26) : next(8) === 0 ? 0x80 + next(0x78) : 0x20 + next(90);
    }
    const places = round % 5 === 0 ? [] : [edges[next(edges.length)]! + next(3) - 1, next(size)];
    for (const at of places) if (at >= 0 && at < size) bytes[at] = 0x0a;
    for (const from of [0, next(size + 1)]) {
      assertEquals(
        indexOfNewline(bytes, from),
        bytes.indexOf(0x0a, from),
        `round ${round} from ${from}`,
      );
    }
  }
  // A character of several bytes right before the newline in a slice.
  const text = new TextEncoder().encode("a".repeat(5000) + "\u00e9\u20ac\u{1f600}" + "\n");
  assertEquals(indexOfNewline(text), text.length - 1);
});
