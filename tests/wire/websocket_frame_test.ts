// The WebSocket frame parser on its own: which opcodes it accepts, and
// unmasking of every length and alignment (the mask is rotated to an 8-byte
// boundary and applied a 64-bit word at a time).

import { assert, assertEquals } from "../helpers/assert.ts";
import {
  encodeFrame,
  encodeFrameHeader,
  frameHeaderSize,
  FrameParser,
  Opcode,
  putFrameHeader,
  WebSocketProtocolError,
} from "../../src/websocket/frame.ts";

function wire(opcode: number, payload: Uint8Array): Uint8Array {
  const parts = encodeFrame(opcode, payload, true);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) out.set(part, (at += part.length) - part.length);
  return out;
}

Deno.test("websocket frames: exactly the six defined opcodes are accepted", () => {
  const accepted: number[] = [];
  for (let opcode = 0; opcode < 16; opcode++) {
    const parser = new FrameParser({ maxFramePayload: 1024, expectMasked: true });
    const bytes = wire(opcode, new Uint8Array([1, 2, 3]));
    bytes[0] = 0x80 | opcode; // the encoder may refuse some: set them by hand
    try {
      parser.push(bytes);
      accepted.push(opcode);
    } catch (error) {
      assert(error instanceof WebSocketProtocolError, String(error));
      assertEquals(error.message, `unknown opcode ${opcode}`);
    }
  }
  assertEquals(accepted, [0x0, 0x1, 0x2, 0x8, 0x9, 0xa]);
});

Deno.test("websocket frames: payloads of every length and alignment unmask exactly, fed whole or byte by byte", () => {
  const parser = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: true });
  for (const length of [...Array.from({ length: 41 }, (_, i) => i), 127, 1000, 65_537]) {
    for (const offset of [0, 1, 3, 7]) {
      const payload = Uint8Array.from({ length }, () => Math.floor(Math.random() * 256));
      const bytes = wire(Opcode.Binary, payload);
      // The frame at an odd place in its buffer, as reads leave it.
      const placed = new Uint8Array(bytes.length + offset).subarray(offset);
      placed.set(bytes);
      const frames = length < 200 && offset === 1
        ? Array.from(placed, (b) => parser.push(new Uint8Array([b]))).flat()
        : parser.push(placed);
      assertEquals(frames.length, 1, `length ${length}, offset ${offset}`);
      assertEquals(frames[0]!.opcode, Opcode.Binary);
      assert(
        frames[0]!.payload.every((b, i) => b === payload[i]) &&
          frames[0]!.payload.length === length,
        `length ${length}, offset ${offset}: payload differs`,
      );
    }
  }
});

Deno.test("websocket frames: a whole final text frame is lent as a view of the pushed bytes; everything else is copied", () => {
  const enc = new TextEncoder();
  const text = enc.encode('{"jsonrpc":"2.0","id":1,"method":"m"}');
  const lending = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: true, lendText: true });
  // Two whole text frames in one chunk: both views of it, unmasked in place.
  const chunk = new Uint8Array([...wire(Opcode.Text, text), ...wire(Opcode.Text, text)]);
  const frames = lending.push(chunk);
  assertEquals(frames.length, 2);
  for (const frame of frames) {
    assert(frame.payload.buffer === chunk.buffer, "a whole text frame is not copied");
    assertEquals(new TextDecoder().decode(frame.payload), new TextDecoder().decode(text));
  }
  // Binary, a non-final text fragment, and a text frame split across two
  // pushes are the parser's own copies (they outlive the chunk).
  const binary = wire(Opcode.Binary, text);
  assert(lending.push(binary)[0]!.payload.buffer !== binary.buffer);
  const fragment = wire(Opcode.Text, text);
  fragment[0] = Opcode.Text; // FIN clear
  const first = lending.push(fragment);
  assert(first[0]!.payload.buffer !== fragment.buffer && !first[0]!.fin);
  const last = wire(Opcode.Continuation, text);
  assertEquals(lending.push(last)[0]!.opcode, Opcode.Continuation);
  const split = wire(Opcode.Text, text);
  assertEquals(lending.push(split.subarray(0, 9)), []);
  const rest = split.slice(9);
  const joined = lending.push(rest);
  assert(joined[0]!.payload.buffer !== rest.buffer && joined[0]!.payload.buffer !== split.buffer);
  assertEquals(new TextDecoder().decode(joined[0]!.payload), new TextDecoder().decode(text));
  // Without the option nothing is lent.
  const plain = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: true });
  const again = wire(Opcode.Text, text);
  assert(plain.push(again)[0]!.payload.buffer !== again.buffer);
});

Deno.test("websocket frames: frames read one after another into one reused buffer unmask exactly, also once it is replaced", () => {
  const parser = new FrameParser({ maxFramePayload: 1 << 20, expectMasked: true, lendText: true });
  let scratch = new Uint8Array(4096);
  for (let round = 0; round < 40; round++) {
    const length = 8 + ((round * 37) % 300);
    const payload = Uint8Array.from({ length }, (_, i) => 0x20 + ((i * 7 + round) % 90));
    const bytes = wire(Opcode.Text, payload);
    const offset = round % 8;
    if (round === 20) {
      // The reader's buffer replaced (as a BYOB read transfers it): the
      // old one is detached; the new one must be unmasked through itself.
      scratch = new Uint8Array(scratch.buffer.transfer());
    }
    scratch.set(bytes, offset);
    const frames = parser.push(scratch.subarray(offset, offset + bytes.length));
    assertEquals(frames.length, 1);
    assert(
      frames[0]!.payload.length === length && frames[0]!.payload.every((b, i) => b === payload[i]),
      `round ${round}: payload differs`,
    );
  }
});

Deno.test("websocket frames: headers written in place are the encoder's, at every length class, masked or not", () => {
  for (const length of [0, 1, 125, 126, 127, 65_535, 65_536, 70_000]) {
    for (const mask of [undefined, new Uint8Array([1, 2, 3, 4])]) {
      const expected = encodeFrameHeader(Opcode.Text, length, true, mask);
      assertEquals(frameHeaderSize(length, mask ? 4 : 0), expected.length);
      const out = new Uint8Array(expected.length + 5).fill(0xee);
      const size = putFrameHeader(out, 3, Opcode.Text, length, true, mask);
      assertEquals(size, expected.length);
      assertEquals([...out.subarray(3, 3 + size)], [...expected], `length ${length}`);
      assertEquals([out[0], out[1], out[2], out[3 + size]], [0xee, 0xee, 0xee, 0xee]);
    }
  }
});
