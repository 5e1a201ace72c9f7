/**
 * RFC 6455 frame encoding and incremental parsing.
 *
 * The parser enforces the frame-level rules itself (reserved bits, control
 * frame size and fragmentation, masking direction, payload limit) and
 * reports violations as {@linkcode WebSocketProtocolError} with the close
 * code to send.
 *
 * @module
 */

import { messageSpare } from "../util/spare_buffer.ts";

/** Frame opcodes. */
export const Opcode = {
  Continuation: 0x0,
  Text: 0x1,
  Binary: 0x2,
  Close: 0x8,
  Ping: 0x9,
  Pong: 0xa,
} as const;

/** Close codes used by this implementation. */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  ProtocolError: 1002,
  InvalidPayload: 1007,
  PolicyViolation: 1008,
  MessageTooBig: 1009,
  InternalError: 1011,
} as const;

/** One parsed frame (payload already unmasked). */
export interface Frame {
  /** Final fragment of a message. */
  readonly fin: boolean;
  /** One of {@linkcode Opcode}. */
  readonly opcode: number;
  /** Unmasked payload. */
  readonly payload: Uint8Array;
  /** The payload is a view of the pushed chunk (`lendText`), not the frame's own memory. */
  readonly lent?: true;
}

/** A violation of the WebSocket protocol, with the close code to answer. */
export class WebSocketProtocolError extends Error {
  /** Creates the error. */
  constructor(readonly closeCode: number, message: string) {
    super(message);
    this.name = "WebSocketProtocolError";
  }
}

/** The mask rotated to an 8-byte boundary, as one 64-bit word (reused: no allocation per frame). */
const ROTATED = new Uint8Array(8);
const ROTATED_WORD = new BigInt64Array(ROTATED.buffer);

/** Largest buffer whose 64-bit view is kept for the next frame. */
const WORDS_CACHE_MAX = 256 * 1024;
let wordsBuffer: ArrayBuffer | null = null;
let wordsView: BigInt64Array | null = null;

/**
 * A 64-bit view of all of `buffer`, kept while frames keep arriving in it
 * (a connection reads every small frame into the same buffer): no view per
 * frame. Null for a large buffer (not kept alive by this cache).
 */
function wordsOf(buffer: ArrayBuffer): BigInt64Array | null {
  if (buffer === wordsBuffer) return wordsView;
  if (buffer.byteLength > WORDS_CACHE_MAX || buffer.byteLength % 8 !== 0) return null;
  wordsBuffer = buffer;
  wordsView = new BigInt64Array(buffer);
  return wordsView;
}

/**
 * XORs `data` in place with the 4-byte `mask`, `data[0]` taking mask byte
 * `phase` (a piece of a payload that starts `phase` bytes, modulo four,
 * into it).
 */
export function applyMask(data: Uint8Array, mask: Uint8Array, phase = 0): void {
  const length = data.length;
  let i = 0;
  // Bytes up to an 8-byte boundary, then whole 64-bit words (BigInt64Array
  // XOR is the fastest form V8 compiles: ~4× 32-bit words), then the tail;
  // the mask byte for data[i] is always mask[(i + phase) & 3].
  while (i < length && (data.byteOffset + i) % 8 !== 0) {
    data[i] = data[i]! ^ mask[(i + phase) & 3]!;
    i++;
  }
  const words = (length - i) >>> 3;
  if (words > 0) {
    for (let k = 0; k < 8; k++) ROTATED[k] = mask[(i + k + phase) & 3]!;
    const m = ROTATED_WORD[0]!;
    // The reused view of the whole buffer, or a view of just these words.
    const cached = wordsOf(data.buffer as ArrayBuffer);
    const w64 = cached ?? new BigInt64Array(data.buffer, data.byteOffset + i, words);
    const first = cached === null ? 0 : (data.byteOffset + i) >>> 3;
    for (let w = first; w < first + words; w++) w64[w]! ^= m;
    i += words << 3;
  }
  for (; i < length; i++) data[i] = data[i]! ^ mask[(i + phase) & 3]!;
}

/** Bytes of a frame header for a payload of `length` bytes (with `maskBytes` of mask). */
export function frameHeaderSize(length: number, maskBytes = 0): number {
  return (length < 126 ? 2 : length < 65536 ? 4 : 10) + maskBytes;
}

/**
 * Writes a frame header for a payload of `length` bytes into `out` at
 * `at`; returns its size. When `mask` is given it is written into the
 * header (the caller masks the payload).
 */
export function putFrameHeader(
  out: Uint8Array,
  at: number,
  opcode: number,
  length: number,
  fin = true,
  mask?: Uint8Array,
): number {
  const size = frameHeaderSize(length, mask ? 4 : 0);
  out[at] = (fin ? 0x80 : 0) | opcode;
  const maskBit = mask ? 0x80 : 0;
  if (length < 126) {
    out[at + 1] = maskBit | length;
  } else if (length < 65536) {
    out[at + 1] = maskBit | 126;
    out[at + 2] = length >>> 8;
    out[at + 3] = length & 0xff;
  } else {
    out[at + 1] = maskBit | 127;
    new DataView(out.buffer, out.byteOffset + at + 2, 8).setBigUint64(0, BigInt(length));
  }
  if (mask) out.set(mask, at + size - 4);
  return size;
}

/**
 * Encodes a frame header for a payload of `length` bytes. When `mask` is
 * given it is written into the header (the caller masks the payload).
 */
export function encodeFrameHeader(
  opcode: number,
  length: number,
  fin = true,
  mask?: Uint8Array,
): Uint8Array {
  const header = new Uint8Array(frameHeaderSize(length, mask ? 4 : 0));
  putFrameHeader(header, 0, opcode, length, fin, mask);
  return header;
}

/**
 * Encodes one complete frame. Client frames (`masked`) get a random mask
 * and a masked copy of the payload.
 */
export function encodeFrame(
  opcode: number,
  payload: Uint8Array,
  masked: boolean,
  fin = true,
): Uint8Array[] {
  if (!masked) return [encodeFrameHeader(opcode, payload.length, fin), payload];
  const mask = crypto.getRandomValues(new Uint8Array(4));
  const copy = payload.slice();
  applyMask(copy, mask);
  return [encodeFrameHeader(opcode, payload.length, fin, mask), copy];
}

/**
 * Spare bytes the parser leaves before every payload it allocates: room for
 * the largest unmasked header, so a received message can be sent on
 * unmasked (a server forwarding what it read) without copying its payload.
 */
const HEADROOM = 10;
const withHeadroom = new WeakSet<Uint8Array>();

/**
 * Buffers for received payloads of POOL_MIN..POOL_PAYLOAD bytes, all of one
 * size, given back by their consumer once it is done with them (a relay,
 * once it has forwarded a frame): parsers given a pool take from it, and
 * allocate exactly what each frame needs otherwise.
 */
const POOL_PAYLOAD = 64 * 1024 + 512;
const POOL_MIN = 16 * 1024;
const POOL_MAX = 64;

/** See the constants above: a bounded free list of payload buffers (64 at most). */
export class PayloadPool {
  readonly #free: ArrayBuffer[] = [];

  /** A payload of `length` bytes from the pool, or null when the size is not pooled. */
  take(length: number): Uint8Array | null {
    if (length < POOL_MIN || length > POOL_PAYLOAD) return null;
    const buffer = this.#free.pop() ?? new ArrayBuffer(HEADROOM + POOL_PAYLOAD);
    return new Uint8Array(buffer, HEADROOM, length);
  }

  /**
   * Gives a received payload's buffer back. Only for a caller that holds
   * the only reference and is done with it; anything else is ignored.
   */
  recycle(payload: Uint8Array): void {
    if (!withHeadroom.delete(payload)) return;
    const buffer = payload.buffer as ArrayBuffer;
    if (buffer.byteLength === HEADROOM + POOL_PAYLOAD && this.#free.length < POOL_MAX) {
      this.#free.push(buffer);
    }
  }
}

/**
 * A payload buffer: from the pool, or for a large frame a spare one
 * (`messageSpare`: the frame's consumer may give it back), or a new one
 * (`messageSpare.take` makes small ones).
 */
function allocatePayload(length: number, pool: PayloadPool | undefined): Uint8Array {
  return pool?.take(length) ??
    messageSpare.take(HEADROOM + length).subarray(HEADROOM);
}

/**
 * Frames `payload` as one unmasked frame in place when it was allocated by
 * a {@linkcode FrameParser} (its header goes into the spare bytes before
 * it); returns the whole frame, or null when `payload` has no headroom.
 */
export function frameInPlace(opcode: number, payload: Uint8Array): Uint8Array | null {
  if (!withHeadroom.has(payload)) return null;
  const header = encodeFrameHeader(opcode, payload.length);
  const start = payload.byteOffset - header.length;
  const frame = new Uint8Array(payload.buffer, start, header.length + payload.length);
  frame.set(header);
  return frame;
}

/** Options for {@linkcode FrameParser}. */
export interface FrameParserOptions {
  /** Largest accepted payload of a single frame. */
  readonly maxFramePayload: number;
  /** True on the server side: every inbound frame must be masked. */
  readonly expectMasked: boolean;
  /** Where payload buffers come from (and go back to), if pooled. */
  readonly pool?: PayloadPool;
  /**
   * Return a final text frame that arrives whole within one pushed chunk as
   * a view of that chunk (unmasked in place), not a copy: valid only until
   * the chunk's memory is reused. For a consumer that decodes each text
   * frame before it reads more (the channel): most requests are such
   * frames, and a copy is an allocation each.
   */
  readonly lendText?: boolean;
}

const EMPTY = new Uint8Array(0);

/** Incremental frame parser; feed it bytes, get frames. */
export class FrameParser {
  #buffer: Uint8Array = new Uint8Array(0);
  // The current frame's header (valid while #payload is set); its mask is
  // copied into the parser's own four bytes: nothing is allocated per frame
  // but its payload.
  #fin = false;
  #opcode = 0;
  #masked = false;
  readonly #mask = new Uint8Array(4);
  #payload: Uint8Array | null = null;
  #filled = 0;
  #payloadLength = 0;

  /** Creates a parser with the given limits. */
  constructor(readonly options: FrameParserOptions) {}

  /** Feeds bytes; returns every frame completed by them. Throws on violations. */
  push(chunk: Uint8Array): Frame[] {
    const frames: Frame[] = [];
    let data = chunk;
    if (this.#buffer.length > 0) {
      const joined = new Uint8Array(this.#buffer.length + chunk.length);
      joined.set(this.#buffer);
      joined.set(chunk, this.#buffer.length);
      data = joined;
      this.#buffer = EMPTY;
    }
    let offset = 0;
    while (offset < data.length) {
      if (this.#payload === null) {
        const consumed = this.#parseHeader(data, offset);
        if (consumed === 0) {
          this.#buffer = data.slice(offset);
          return frames;
        }
        offset += consumed;
        const length = this.#payloadLength;
        if (
          this.options.lendText === true && this.#opcode === Opcode.Text && this.#fin &&
          offset + length <= data.length
        ) {
          const payload = data.subarray(offset, offset + length);
          if (this.#masked) applyMask(payload, this.#mask);
          frames.push({ fin: true, opcode: Opcode.Text, payload, lent: true });
          offset += length;
          continue;
        }
        this.#payload = allocatePayload(length, this.options.pool);
        this.#filled = 0;
        if (length > 0) continue;
      } else {
        const take = Math.min(this.#payload.length - this.#filled, data.length - offset);
        this.#payload.set(data.subarray(offset, offset + take), this.#filled);
        this.#unmaskFilled(this.#payload.subarray(this.#filled, this.#filled + take));
        this.#filled += take;
        offset += take;
      }
      if (this.#filled === this.#payload!.length) frames.push(this.#finishFrame());
    }
    if (this.#payload !== null && this.#payload.length === 0) frames.push(this.#finishFrame());
    return frames;
  }

  /**
   * The unfilled rest of the current frame's payload (empty between
   * payloads): a reader may read straight into it and report the bytes with
   * {@linkcode filledTail}.
   */
  payloadTail(): Uint8Array {
    if (this.#payload === null || this.#buffer.length > 0) return EMPTY;
    return this.#payload.subarray(this.#filled);
  }

  /**
   * Accounts for `view`, bytes read into {@linkcode payloadTail} (possibly
   * on a transferred buffer, as BYOB reads return); returns the frame when
   * it is complete.
   */
  filledTail(view: Uint8Array): Frame[] {
    // The old view is detached now (its length reads 0): use the recorded one.
    const length = this.#payloadLength;
    this.#payload = new Uint8Array(view.buffer, view.byteOffset - this.#filled, length);
    this.#unmaskFilled(view);
    this.#filled += view.length;
    return this.#filled === length ? [this.#finishFrame()] : [];
  }

  /**
   * Unmasks `piece`, the payload's bytes from `#filled` on, as they arrive:
   * while they are still in the cache (a frame of megabytes unmasked at its
   * end is read back from memory).
   */
  #unmaskFilled(piece: Uint8Array): void {
    if (this.#masked) applyMask(piece, this.#mask, this.#filled);
  }

  #finishFrame(): Frame {
    const payload = this.#payload!;
    withHeadroom.add(payload);
    this.#payload = null;
    this.#filled = 0;
    return { fin: this.#fin, opcode: this.#opcode, payload };
  }

  /**
   * Parses a header at `at` in `data` into the parser's fields; returns
   * bytes consumed (0: need more).
   */
  #parseHeader(data: Uint8Array, at: number): number {
    const available = data.length - at;
    if (available < 2) return 0;
    const b0 = data[at]!;
    const b1 = data[at + 1]!;
    const fin = (b0 & 0x80) !== 0;
    if ((b0 & 0x70) !== 0) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, "reserved bits set");
    }
    const opcode = b0 & 0x0f;
    const masked = (b1 & 0x80) !== 0;
    let length = b1 & 0x7f;
    let size = 2;
    if (length === 126) {
      if (available < 4) return 0;
      length = (data[at + 2]! << 8) | data[at + 3]!;
      size = 4;
    } else if (length === 127) {
      if (available < 10) return 0;
      const big = new DataView(data.buffer, data.byteOffset + at + 2, 8).getBigUint64(0);
      if (big > BigInt(Number.MAX_SAFE_INTEGER)) {
        throw new WebSocketProtocolError(CloseCode.MessageTooBig, "frame too large");
      }
      length = Number(big);
      size = 10;
    }
    const isControl = opcode >= 0x8;
    // Known: continuation, text, binary, close, ping, pong.
    if ((opcode > 0x2 && opcode < 0x8) || opcode > 0xa) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, `unknown opcode ${opcode}`);
    }
    if (isControl && (length > 125 || !fin)) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, "invalid control frame");
    }
    if (masked !== this.options.expectMasked) {
      throw new WebSocketProtocolError(
        CloseCode.ProtocolError,
        masked ? "unexpected masked frame" : "unmasked client frame",
      );
    }
    if (length > this.options.maxFramePayload) {
      throw new WebSocketProtocolError(
        CloseCode.MessageTooBig,
        `frame of ${length} bytes exceeds the limit of ${this.options.maxFramePayload} bytes`,
      );
    }
    if (masked) {
      if (available < size + 4) return 0;
      const mask = this.#mask;
      for (let k = 0; k < 4; k++) mask[k] = data[at + size + k]!;
      size += 4;
    }
    this.#fin = fin;
    this.#opcode = opcode;
    this.#masked = masked;
    this.#payloadLength = length;
    return size;
  }
}
