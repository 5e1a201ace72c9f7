/**
 * The relay's protobuf `RelayMessageFrame` (package
 * `codex.exec_server.relay.v1`, proto3), hand-encoded the way prost does it:
 * fields in number order, zero and empty scalars omitted, empty messages
 * present; decoding accepts fields present or absent and skips unknown ones.
 *
 * ```
 * RelayMessageFrame { uint32 version = 1; string stream_id = 2; uint32 ack = 3;
 *   uint32 ack_bits = 4; oneof body { RelayData data = 5; RelayAck ack_frame = 6;
 *   RelayResume resume = 7; RelayReset reset = 8; RelayHeartbeat heartbeat = 9;
 *   RelayHandshake handshake = 10; } optional string traceparent = 11;
 *   optional string tracestate = 12; }
 * RelayData { uint32 seq = 1; uint32 segment_index = 2; uint32 segment_count = 3; bytes payload = 4; }
 * RelayResume { uint32 next_seq = 1; }   RelayReset { string reason = 1; }
 * RelayHandshake { bytes payload = 1; }
 * ```
 *
 * @module
 */

import { ProtoWriter, varintSize } from "../../util/protobuf.ts";

/** Relay WebSocket frame and message limit (every side of the relay). */
export const RELAY_WEBSOCKET_MAX = 262_144;

/** The frame body. */
export type RelayBody =
  | {
    readonly kind: "data";
    readonly seq: number;
    readonly segmentIndex: number;
    readonly segmentCount: number;
    readonly payload: Uint8Array;
  }
  | { readonly kind: "ack" }
  | { readonly kind: "resume"; readonly nextSeq: number }
  | { readonly kind: "reset"; readonly reason: string }
  | { readonly kind: "heartbeat" }
  | { readonly kind: "handshake"; readonly payload: Uint8Array };

/** A relay frame. */
export interface RelayFrame {
  /** Always 1. */
  readonly version: number;
  /** The virtual stream. */
  readonly streamId: string;
  /** Reserved (0). */
  readonly ack?: number;
  /** Reserved (0). */
  readonly ackBits?: number;
  /** The body (required by validation). */
  readonly body: RelayBody | null;
  /** W3C trace parent. */
  readonly traceparent?: string;
  /** W3C trace state. */
  readonly tracestate?: string;
}

/** The frame version. */
export const RELAY_FRAME_VERSION = 1;
/** The only reset reason we send. */
export const RESET_REASON = "noise_relay_protocol_error";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

const lenField = (field: number, len: number) => varintSize(field << 3) + varintSize(len) + len;
const uintField = (
  field: number,
  v: number,
) => (v === 0 ? 0 : varintSize(field << 3) + varintSize(v));

function bodyBytes(body: RelayBody): { field: number; inner: Uint8Array } {
  switch (body.kind) {
    case "data": {
      const size = uintField(1, body.seq) + uintField(2, body.segmentIndex) +
        uintField(3, body.segmentCount) +
        (body.payload.length ? lenField(4, body.payload.length) : 0);
      const w = new ProtoWriter(size);
      w.uint(1, body.seq);
      w.uint(2, body.segmentIndex);
      w.uint(3, body.segmentCount);
      if (body.payload.length) w.bytes(4, body.payload);
      return { field: 5, inner: w.finish() };
    }
    case "ack":
      return { field: 6, inner: new Uint8Array(0) };
    case "resume": {
      const w = new ProtoWriter(uintField(1, body.nextSeq));
      w.uint(1, body.nextSeq);
      return { field: 7, inner: w.finish() };
    }
    case "reset": {
      const r = encoder.encode(body.reason);
      const w = new ProtoWriter(r.length ? lenField(1, r.length) : 0);
      if (r.length) w.bytes(1, r);
      return { field: 8, inner: w.finish() };
    }
    case "heartbeat":
      return { field: 9, inner: new Uint8Array(0) };
    case "handshake": {
      const w = new ProtoWriter(body.payload.length ? lenField(1, body.payload.length) : 0);
      if (body.payload.length) w.bytes(1, body.payload);
      return { field: 10, inner: w.finish() };
    }
  }
}

/** Encodes a frame. */
export function encodeRelayFrame(frame: RelayFrame): Uint8Array {
  const sid = encoder.encode(frame.streamId);
  const body = frame.body ? bodyBytes(frame.body) : null;
  const tp = frame.traceparent !== undefined ? encoder.encode(frame.traceparent) : null;
  const ts = frame.tracestate !== undefined ? encoder.encode(frame.tracestate) : null;
  const size = uintField(1, frame.version) + (sid.length ? lenField(2, sid.length) : 0) +
    uintField(3, frame.ack ?? 0) + uintField(4, frame.ackBits ?? 0) +
    (body ? lenField(body.field, body.inner.length) : 0) +
    (tp ? lenField(11, tp.length) : 0) + (ts ? lenField(12, ts.length) : 0);
  const w = new ProtoWriter(size);
  w.uint(1, frame.version);
  if (sid.length) w.bytes(2, sid);
  w.uint(3, frame.ack ?? 0);
  w.uint(4, frame.ackBits ?? 0);
  // Empty messages (Ack, Heartbeat) are present.
  if (body) w.bytes(body.field, body.inner, true);
  // `optional` strings: present when set, even empty.
  if (tp) w.bytes(11, tp, true);
  if (ts) w.bytes(12, ts, true);
  return w.finish();
}

/**
 * The bytes of a Data frame up to its payload: `prefix ++ payload` is
 * exactly `encodeRelayFrame(frames.data(streamId, seq, payload))` for any
 * non-empty payload of `payloadLength` bytes (the payload is the last field
 * of the last field), so a sender can write the payload straight after it.
 */
export function encodeRelayDataPrefix(
  streamId: string,
  seq: number,
  payloadLength: number,
): Uint8Array {
  const sid = encoder.encode(streamId);
  const inner = uintField(1, seq) + uintField(3, 1) + lenField(4, payloadLength);
  const size = uintField(1, RELAY_FRAME_VERSION) + (sid.length ? lenField(2, sid.length) : 0) +
    varintSize((5 << 3) | 2) + varintSize(inner) + (inner - payloadLength);
  const w = new ProtoWriter(size);
  w.uint(1, RELAY_FRAME_VERSION);
  if (sid.length) w.bytes(2, sid);
  w.lengthPrefix(5, inner);
  w.uint(1, seq);
  w.uint(3, 1);
  w.lengthPrefix(4, payloadLength);
  return w.finish();
}

/** The bytes are not a protobuf frame. */
export class RelayFrameError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "RelayFrameError";
  }
}

class Reader {
  at = 0;
  constructor(readonly buf: Uint8Array, readonly end = buf.length) {}
  varint(): number {
    let result = 0;
    let mult = 1;
    for (let i = 0; i < 10; i++) {
      if (this.at >= this.end) throw new RelayFrameError("truncated varint");
      const b = this.buf[this.at++]!;
      if (i < 5) result += (b & 0x7f) * mult;
      mult *= 128;
      if ((b & 0x80) === 0) return result % 4294967296; // uint32 keeps the low 32 bits
    }
    throw new RelayFrameError("varint too long");
  }
  bytes(): Uint8Array {
    const len = this.varint();
    if (this.at + len > this.end) throw new RelayFrameError("truncated field");
    const out = this.buf.subarray(this.at, this.at + len);
    this.at += len;
    return out;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.at += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.at += 4;
    else throw new RelayFrameError(`unsupported wire type ${wire}`);
    if (this.at > this.end) throw new RelayFrameError("truncated field");
  }
  *fields(): Generator<[number, number]> {
    while (this.at < this.end) {
      const key = this.varint();
      yield [Math.floor(key / 8), key & 7];
    }
  }
}

function text(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new RelayFrameError("invalid UTF-8 in a string field");
  }
}

function decodeBody(field: number, bytes: Uint8Array): RelayBody {
  const r = new Reader(bytes);
  switch (field) {
    case 5: {
      let seq = 0, segmentIndex = 0, segmentCount = 0;
      let payload: Uint8Array = new Uint8Array(0);
      for (const [f, wire] of r.fields()) {
        if (f === 1 && wire === 0) seq = r.varint();
        else if (f === 2 && wire === 0) segmentIndex = r.varint();
        else if (f === 3 && wire === 0) segmentCount = r.varint();
        else if (f === 4 && wire === 2) payload = r.bytes();
        else r.skip(wire);
      }
      return { kind: "data", seq, segmentIndex, segmentCount, payload };
    }
    case 6:
      return { kind: "ack" };
    case 7: {
      let nextSeq = 0;
      for (const [f, wire] of r.fields()) {
        if (f === 1 && wire === 0) nextSeq = r.varint();
        else r.skip(wire);
      }
      return { kind: "resume", nextSeq };
    }
    case 8: {
      let reason = "";
      for (const [f, wire] of r.fields()) {
        if (f === 1 && wire === 2) reason = text(r.bytes());
        else r.skip(wire);
      }
      return { kind: "reset", reason };
    }
    case 9:
      return { kind: "heartbeat" };
    default: {
      let payload: Uint8Array = new Uint8Array(0);
      for (const [f, wire] of r.fields()) {
        if (f === 1 && wire === 2) payload = r.bytes();
        else r.skip(wire);
      }
      return { kind: "handshake", payload };
    }
  }
}

/** Decodes a frame (throws {@linkcode RelayFrameError} when malformed). */
export function decodeRelayFrame(bytes: Uint8Array): RelayFrame {
  const r = new Reader(bytes);
  let version = 0, ack = 0, ackBits = 0;
  let streamId = "";
  let body: RelayBody | null = null;
  let traceparent: string | undefined;
  let tracestate: string | undefined;
  for (const [f, wire] of r.fields()) {
    if (f === 1 && wire === 0) version = r.varint();
    else if (f === 2 && wire === 2) streamId = text(r.bytes());
    else if (f === 3 && wire === 0) ack = r.varint();
    else if (f === 4 && wire === 0) ackBits = r.varint();
    else if (f >= 5 && f <= 10 && wire === 2) body = decodeBody(f, r.bytes());
    else if (f === 11 && wire === 2) traceparent = text(r.bytes());
    else if (f === 12 && wire === 2) tracestate = text(r.bytes());
    else r.skip(wire);
  }
  return {
    version,
    streamId,
    ack,
    ackBits,
    body,
    ...(traceparent !== undefined ? { traceparent } : {}),
    ...(tracestate !== undefined ? { tracestate } : {}),
  };
}

/** Why a frame is invalid, or `null` (the same rules on both sides). */
export function relayFrameProblem(frame: RelayFrame): string | null {
  if (frame.version !== RELAY_FRAME_VERSION) {
    return `unsupported relay frame version ${frame.version}`;
  }
  if (frame.streamId.trim() === "") return "relay frame has no stream id";
  const body = frame.body;
  if (!body) return "relay frame has no body";
  if (body.kind === "data") {
    if (body.segmentIndex !== 0 || body.segmentCount !== 1) {
      return "segmented relay data is not supported";
    }
    if (body.payload.length === 0) return "relay data frame is empty";
  }
  if (body.kind === "reset" && body.reason === "") return "relay reset has no reason";
  if (body.kind === "handshake" && body.payload.length === 0) return "relay handshake is empty";
  return null;
}

/** Shorthands for frames we send. */
export const frames = {
  data: (
    streamId: string,
    seq: number,
    payload: Uint8Array,
    trace?: { traceparent: string; tracestate?: string },
  ): RelayFrame => ({
    version: 1,
    streamId,
    body: { kind: "data", seq, segmentIndex: 0, segmentCount: 1, payload },
    ...(trace ? { traceparent: trace.traceparent } : {}),
    ...(trace?.tracestate !== undefined ? { tracestate: trace.tracestate } : {}),
  }),
  handshake: (streamId: string, payload: Uint8Array): RelayFrame => ({
    version: 1,
    streamId,
    body: { kind: "handshake", payload },
  }),
  resume: (streamId: string, nextSeq = 0): RelayFrame => ({
    version: 1,
    streamId,
    body: { kind: "resume", nextSeq },
  }),
  reset: (streamId: string, reason = RESET_REASON): RelayFrame => ({
    version: 1,
    streamId,
    body: { kind: "reset", reason },
  }),
};

/**
 * The valid frames among a socket's messages, with the bytes they came
 * from; text messages and frames that fail to decode or validate are
 * skipped silently (the executor's rule).
 */
export async function* validRelayFrames(
  messages: ReadableStream<string | Uint8Array>,
): AsyncGenerator<[RelayFrame, Uint8Array]> {
  for await (const message of messages) {
    if (typeof message === "string") continue;
    let frame: RelayFrame;
    try {
      frame = decodeRelayFrame(message);
    } catch {
      continue;
    }
    if (relayFrameProblem(frame) === null) yield [frame, message];
  }
}
