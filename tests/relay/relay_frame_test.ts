import {
  decodeRelayFrame,
  encodeRelayDataPrefix,
  encodeRelayFrame,
  frames,
  relayFrameProblem,
} from "../../src/relay/wire/frame.ts";
import {
  lengthPrefixFraming,
  MessageAssembler,
  MessageFramingError,
} from "../../src/relay/wire/message_framing.ts";
import { assertEquals, assertThrows } from "../helpers/assert.ts";

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

Deno.test("message framing: messages across, within and between records; reused record buffers", () => {
  const messages = [1, 3, 4, 5, 100, 61_440, 61_441, 200_000, 1_300_000, 7].map((n, k) =>
    new Uint8Array(n).map((_, i) => (i * 13 + k) & 0xff)
  );
  // The sender's framing agrees with the layout built by hand below.
  assertEquals(lengthPrefixFraming.frameSlow("{}").toHex(), "000000027b7d");
  const bytes = new Uint8Array(messages.reduce((n, m) => n + 4 + m.length, 0));
  let offset = 0;
  for (const m of messages) {
    new DataView(bytes.buffer).setUint32(offset, m.length);
    bytes.set(m, offset + 4);
    offset += 4 + m.length;
  }
  for (const cut of [1, 2, 3, 5, 4096, 61_440]) {
    const assembler = new MessageAssembler();
    const got: string[] = [];
    // One buffer reused for every record, as the libcrypto path does.
    const record = new Uint8Array(cut);
    for (let at = 0; at < bytes.length; at += cut) {
      const piece = bytes.subarray(at, at + cut);
      record.set(piece);
      assembler.push(record.subarray(0, piece.length), (m) => got.push(m.toHex()));
      record.fill(0xee);
    }
    assertEquals(got.length, messages.length, `cut ${cut}`);
    got.forEach((hex, i) => assertEquals(hex, messages[i]!.toHex(), `cut ${cut} message ${i}`));
  }
  // Zero and over-limit lengths are refused as soon as the prefix is known.
  assertThrows(
    () => new MessageAssembler().push(new Uint8Array([0, 0, 0, 0]), () => {}),
    MessageFramingError,
  );
  assertThrows(
    () => new MessageAssembler(10).push(new Uint8Array([0, 0, 0, 11]), () => {}),
    MessageFramingError,
  );
});
