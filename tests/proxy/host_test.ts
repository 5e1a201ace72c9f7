// IP literal parsing (`src/util/host.ts`) against `node:net` and the URL
// parser: the policies' Origin, Host and egress checks use it, so it must
// accept exactly what Node's does and read exactly the address the URL
// parser reads.

import { isIPv4 as nodeIsIPv4, isIPv6 as nodeIsIPv6 } from "node:net";
import { assertEquals } from "../helpers/assert.ts";
import { ipBytes, ipFromBytes, isIPv4, isIPv6 } from "../../src/util/host.ts";

/** A seeded generator (mulberry32): failures name their seed and input. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EDGES = [
  "",
  "::",
  ":::",
  "::1",
  "1::",
  "1:::2",
  ":1",
  "1:",
  "1::2::3",
  "1:2:3:4:5:6:7:8",
  "1:2:3:4:5:6:7:8:9",
  "1:2:3:4:5:6:7",
  "1:2:3:4:5:6:7::",
  "::2:3:4:5:6:7:8",
  "1:2:3:4::5:6:7:8",
  "1::2:3:4:5:6:7",
  "::ffff:1.2.3.4",
  "::ffff:01.2.3.4",
  "::ffff:1.2.3.256",
  "::1.2.3.4",
  "1.2.3.4::",
  "1:2:3:4:5:6:1.2.3.4",
  "1:2:3:4:5:6:7:1.2.3.4",
  "1:2:3:4:5::1.2.3.4",
  "1:2:3:4:5:6::1.2.3.4",
  "1:1.2.3.4:2::",
  "fe80::1%lo0",
  "fe80::1%",
  "fe80::1%a%b",
  "fe80::1%eth0.1:x-y",
  "fe80::1%25",
  "0000:0000:0000:0000:0000:0000:0000:0001",
  "00000::1",
  "FFFF::fFfF",
  "g::1",
  " ::1",
  "::1 ",
  "::1\n",
  "1.2.3.4",
  "01.2.3.4",
  "1.2.3.04",
  "0.0.0.0",
  "255.255.255.255",
  "256.1.1.1",
  "1.2.3",
  "1.2.3.4.5",
  "1..3.4",
  "1.2.3.4.",
  "+1.2.3.4",
  "1.2.3.4%lo",
  "１.2.3.4",
  "0x1.2.3.4",
  "1e2.1.1.1",
];

function candidates(seed: number, count: number): string[] {
  const r = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const hex = "0123456789abcdefABCDEF";
  const group = () => {
    const len = r() < 0.05 ? pick([0, 5]) : 1 + Math.floor(r() * 4);
    let g = "";
    for (let i = 0; i < len; i++) g += r() < 0.02 ? pick(["g", " ", "."]) : pick([...hex]);
    return g;
  };
  const octet =
    () => (r() < 0.1 ? pick(["01", "256", "", "00", "300"]) : String(Math.floor(r() * 256)));
  const out: string[] = [];
  for (let k = 0; k < count; k++) {
    if (r() < 0.2) {
      // Free-form text over the characters that matter.
      let s = "";
      const len = Math.floor(r() * 24);
      for (let i = 0; i < len; i++) s += pick([..."0123456789abcdefAF:.%-xz "]);
      out.push(s);
      continue;
    }
    if (r() < 0.15) {
      out.push([octet(), octet(), octet(), octet()].slice(0, r() < 0.1 ? 3 : 4).join("."));
      continue;
    }
    const n = Math.floor(r() * 9);
    const groups = Array.from({ length: n }, group);
    const quad = r() < 0.3 ? `${octet()}.${octet()}.${octet()}.${octet()}` : null;
    if (quad) groups.push(quad);
    let text = groups.join(":");
    if (r() < 0.7) {
      const at = Math.floor(r() * (groups.length + 1));
      text = [groups.slice(0, at).join(":"), groups.slice(at).join(":")].join("::");
      if (r() < 0.05) text += "::";
    }
    if (r() < 0.15) text += pick(["%lo0", "%", "%eth0.1", "%a%b", "%1:2", "%x y"]);
    out.push(text);
  }
  return out;
}

Deno.test("host: IPv4 and IPv6 literals are accepted exactly as node:net accepts them", () => {
  let valid4 = 0;
  let valid6 = 0;
  for (const text of [...EDGES, ...candidates(20261204, 40_000)]) {
    const want4 = nodeIsIPv4(text);
    const want6 = nodeIsIPv6(text);
    assertEquals([isIPv4(text), isIPv6(text)], [want4, want6], JSON.stringify(text));
    assertEquals(ipBytes(text) !== null, want4 || want6, JSON.stringify(text));
    if (want4) valid4++;
    if (want6) valid6++;
  }
  // The generator reaches both answers often enough to mean something.
  assertEquals([valid4 > 1000, valid6 > 3000], [true, true], `${valid4} / ${valid6}`);
});

Deno.test("host: an IP literal's bytes are the address the URL parser reads", () => {
  for (const text of [...EDGES, ...candidates(7, 20_000)]) {
    const bytes = ipBytes(text);
    if (!bytes) continue;
    const unzoned = text.split("%")[0]!;
    const host = new URL(`http://${bytes.length === 4 ? unzoned : `[${unzoned}]`}/`).hostname;
    const canonical = bytes.length === 4 ? host : host.slice(1, -1);
    assertEquals(ipFromBytes(bytes), canonical, JSON.stringify(text));
  }
});
