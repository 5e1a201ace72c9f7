import {
  decodeRelayFrame,
  encodeRelayDataPrefix,
  encodeRelayFrame,
  frames,
  relayFrameProblem,
} from "../src/relay/frame.ts";
import { assertEquals } from "./helpers/assert.ts";

const hex = (bytes: Uint8Array) => bytes.toHex().replace(/(..)(?!$)/g, "$1 ");

Deno.test("relay frames: the byte layouts seen on the wire (noise-relay.md §3.2)", () => {
  assertEquals(hex(encodeRelayFrame(frames.resume("s-1"))), "08 01 12 03 73 2d 31 3a 00");
  const ct = new Uint8Array([0xaa, 0xbb, 0xcc]);
  assertEquals(
    hex(encodeRelayFrame(frames.data("s-1", 0, ct))),
    "08 01 12 03 73 2d 31 2a 07 18 01 22 03 aa bb cc",
  );
  assertEquals(
    hex(encodeRelayFrame(frames.data("s-1", 1, ct))),
    "08 01 12 03 73 2d 31 2a 09 08 01 18 01 22 03 aa bb cc",
  );
  assertEquals(
    hex(encodeRelayFrame(frames.reset("s-1"))),
    "08 01 12 03 73 2d 31 42 1c 0a 1a " +
      hex(new TextEncoder().encode("noise_relay_protocol_error")),
  );
  assertEquals(
    hex(encodeRelayFrame(frames.handshake("s-1", ct))),
    "08 01 12 03 73 2d 31 52 05 0a 03 aa bb cc",
  );
});

Deno.test("relay frames: a Data prefix followed by the payload is the encoded frame", () => {
  for (const seq of [0, 1, 127, 128, 16_383, 16_384, 2 ** 32 - 1]) {
    for (const length of [1, 16, 127, 128, 61_456, 65_535, 200_000]) {
      for (const id of ["s", "a-much-longer-stream-id-0123456789abcdef-0123456789abcdef"]) {
        const payload = new Uint8Array(length).map((_, i) => (i * 31 + seq) & 0xff);
        const prefix = encodeRelayDataPrefix(id, seq, length);
        const joined = new Uint8Array(prefix.length + length);
        joined.set(prefix);
        joined.set(payload, prefix.length);
        assertEquals(joined.toHex(), encodeRelayFrame(frames.data(id, seq, payload)).toHex());
        const back = decodeRelayFrame(joined);
        assertEquals(relayFrameProblem(back), null);
        assertEquals(back.body?.kind === "data" ? back.body.seq : -1, seq);
      }
    }
  }
});
