import { assertEquals, assertThrows } from "../helpers/assert.ts";
import { parsePathUri, parsePathUriSlow } from "../../src/protocol/path_uri.ts";

function outcome(parse: (uri: string) => string, uri: string): string {
  try {
    return `ok ${parse(uri)}`;
  } catch (error) {
    return `error ${(error as Error).message}`;
  }
}

Deno.test("path URIs: the plain-path shortcut gives exactly what the URL parser gives", () => {
  // Random URIs over an alphabet full of the characters that matter: dot
  // segments, doubled and trailing slashes, percent escapes, ? and #, a
  // backslash, a colon (drive letters), space, tab, non-ASCII.
  const alphabet = [
    "a",
    "Z",
    "0",
    ".",
    "..",
    "/",
    "//",
    "-",
    "_",
    "~",
    "+",
    ",",
    "=",
    "@",
    "%2e",
    "%41",
    "%",
    "?",
    "#",
    "\\",
    ":",
    " ",
    "\t",
    "é",
    "C:",
  ];
  const prefixes = ["file:///", "file://", "file:////", "FILE:///", "file:/", "file:///C:"];
  let seed = 42;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let i = 0; i < 20000; i++) {
    let uri = prefixes[random(prefixes.length)]!;
    const length = random(8);
    for (let j = 0; j < length; j++) uri += alphabet[random(alphabet.length)]!;
    assertEquals(outcome(parsePathUri, uri), outcome(parsePathUriSlow, uri), uri);
  }
  for (const uri of ["file:///", "file:///tmp/x", "file:///tmp/x/", "file:///a.b/c-d_e~f"]) {
    assertEquals(outcome(parsePathUri, uri), outcome(parsePathUriSlow, uri), uri);
  }
  assertEquals(parsePathUri("file:///tmp/a/"), "/tmp/a");
  assertEquals(parsePathUri("file:///tmp/./a/../b"), "/tmp/b");
  assertThrows(() => parsePathUri("file:///tmp/a?x"), Error, "query parameters");
});
