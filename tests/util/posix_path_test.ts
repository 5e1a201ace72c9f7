import { assertEquals } from "../helpers/assert.ts";
import { posix } from "node:path";
import { dirname, isAbsolute, join, normalize, resolve } from "../../src/util/posix_path.ts";

/** Every path of up to four segments over a small alphabet (slashes, dots, names). */
function corpus(): string[] {
  const pieces = ["", "/", "//", ".", "..", "a", "b.c", "...", "a/"];
  const out = new Set<string>([""]);
  let frontier = [""];
  for (let depth = 0; depth < 4; depth++) {
    const next: string[] = [];
    for (const prefix of frontier) {
      for (const piece of pieces) {
        const path = prefix + piece;
        if (!out.has(path)) {
          out.add(path);
          next.push(path);
        }
      }
    }
    frontier = next;
  }
  return [...out];
}

Deno.test("posix_path: the same answers as node:path's posix functions on every path of the corpus", () => {
  const paths = corpus();
  for (const path of paths) {
    assertEquals(normalize(path), posix.normalize(path), `normalize(${JSON.stringify(path)})`);
    assertEquals(dirname(path), posix.dirname(path), `dirname(${JSON.stringify(path)})`);
    assertEquals(isAbsolute(path), posix.isAbsolute(path), `isAbsolute(${JSON.stringify(path)})`);
    assertEquals(resolve(path), posix.resolve(path), `resolve(${JSON.stringify(path)})`);
  }
  for (const a of paths.slice(0, 400)) {
    for (const b of ["", "x", "/y", "../z", "./", "a//b/"]) {
      assertEquals(
        join(a, b),
        posix.join(a, b),
        `join(${JSON.stringify(a)}, ${JSON.stringify(b)})`,
      );
      assertEquals(
        resolve(a, b),
        posix.resolve(a, b),
        `resolve(${JSON.stringify(a)}, ${JSON.stringify(b)})`,
      );
      assertEquals(
        resolve(b, a),
        posix.resolve(b, a),
        `resolve(${JSON.stringify(b)}, ${JSON.stringify(a)})`,
      );
    }
  }
  assertEquals(join(), posix.join());
  assertEquals(resolve(), posix.resolve());
});
