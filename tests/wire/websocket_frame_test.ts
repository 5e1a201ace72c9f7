// The WebSocket frame parser on its own: which opcodes it accepts, and
// unmasking of every length and alignment (the mask is rotated to an 8-byte
// boundary and applied a 64-bit word at a time).

import { assert, assertEquals } from "../helpers/assert.ts";
import {
  encodeFrame,
  FrameParser,
  Opcode,
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
