/**
 * The sending side's framing, without I/O: data messages into frames
 * (fragmented at the frame limit, masked on the client side), the in-place
 * framing JSON-RPC output sinks write through, batches of binary messages
 * framed into one buffer, and Close payloads. The channel
 * ({@linkcode ./channel.ts}) writes what these produce, in order.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";
import type { Framing } from "../util/framing.ts";
import { applyMask, encodeFrame, frameHeaderSize, Opcode, putFrameHeader } from "./frame.ts";

const encoder = new TextEncoder();

/** What framing depends on: the role (clients mask) and the frame limit. */
export interface FrameLimits {
  /** Client frames are masked. */
  readonly masked: boolean;
  /** Largest frame emitted; longer messages are fragmented. */
  readonly maxFrameBytes: number;
}

/** A data message as frames (fragmented at the frame limit). */
export function encodeMessage(data: string | Uint8Array, limits: FrameLimits): Uint8Array[] {
  const text = typeof data === "string";
  const payload = text ? encoder.encode(data) : data;
  const opcode = text ? Opcode.Text : Opcode.Binary;
  const { masked, maxFrameBytes } = limits;
  if (payload.length <= maxFrameBytes) return encodeFrame(opcode, payload, masked);
  const out: Uint8Array[] = [];
  for (let offset = 0; offset < payload.length; offset += maxFrameBytes) {
    const end = Math.min(payload.length, offset + maxFrameBytes);
    out.push(
      ...encodeFrame(
        offset === 0 ? opcode : Opcode.Continuation,
        payload.subarray(offset, end),
        masked,
        end === payload.length,
      ),
    );
  }
  return out;
}

/**
 * Framing for JSON-RPC output sinks: one text frame per message, written in
 * place; larger messages are fragmented at the frame limit.
 */
export function textFraming(limits: FrameLimits): Framing {
  const key = `${limits.masked} ${limits.maxFrameBytes}`;
  let framing = framings.get(key);
  if (framing === undefined) {
    framing = makeTextFraming(limits);
    // Connections share theirs (a server's all have the same limits).
    if (framings.size < 16) framings.set(key, framing);
  }
  return framing;
}

const framings = new Map<string, Framing>();

function makeTextFraming({ masked, maxFrameBytes }: FrameLimits): Framing {
  const limits: FrameLimits = { masked, maxFrameBytes };
  const maskBytes = masked ? 4 : 0;
  return {
    headerSize: (length) => frameHeaderSize(length, maskBytes),
    seal: (out, payloadOffset, length) => {
      const mask = masked ? crypto.getRandomValues(new Uint8Array(4)) : undefined;
      const at = payloadOffset - frameHeaderSize(length, maskBytes);
      putFrameHeader(out, at, Opcode.Text, length, true, mask);
      if (mask) applyMask(out.subarray(payloadOffset, payloadOffset + length), mask);
    },
    trailer: new Uint8Array(0),
    frameSlow: (text) => concatBytes(encodeMessage(text, limits)),
    maxFastPayload: maxFrameBytes,
  };
}

/**
 * Binary messages of `lengths[i]` bytes that `fill(i, payload)` writes
 * straight into their frames, all in one buffer (from `buffer(size)`),
 * masked in place afterwards on the client side. Null when one is over the
 * frame limit (send those one by one).
 */
export function frameBinaryBatch(
  lengths: readonly number[],
  fill: (index: number, payload: Uint8Array) => void,
  limits: FrameLimits,
  buffer: (size: number) => Uint8Array,
): Uint8Array | null {
  const maskBytes = limits.masked ? 4 : 0;
  let size = 0;
  for (const length of lengths) {
    if (length > limits.maxFrameBytes) return null;
    size += frameHeaderSize(length, maskBytes) + length;
  }
  const out = buffer(size);
  let at = 0;
  for (let i = 0; i < lengths.length; i++) {
    const mask = limits.masked ? crypto.getRandomValues(new Uint8Array(4)) : undefined;
    at += putFrameHeader(out, at, Opcode.Binary, lengths[i]!, true, mask);
    const payload = out.subarray(at, at + lengths[i]!);
    fill(i, payload);
    if (mask) applyMask(payload, mask);
    at += payload.length;
  }
  return out.subarray(0, size);
}

/**
 * At most `maxBytes` of `text` in UTF-8, cut at a character boundary (a
 * close reason must stay valid UTF-8 within the 125-byte control frame).
 */
export function truncateUtf8(text: string, maxBytes: number): Uint8Array {
  const bytes = encoder.encode(text);
  if (bytes.length <= maxBytes) return bytes;
  let end = maxBytes;
  // Back up over continuation bytes (10xxxxxx) to the start of a character.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

/** A Close frame's payload: the code, then the reason (truncated safely to 123 bytes). */
export function closePayload(code: number, reason: string): Uint8Array {
  const reasonBytes = truncateUtf8(reason, 123);
  const payload = new Uint8Array(2 + reasonBytes.length);
  new DataView(payload.buffer).setUint16(0, code);
  payload.set(reasonBytes, 2);
  return payload;
}
