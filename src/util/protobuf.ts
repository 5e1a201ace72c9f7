/**
 * A protobuf (proto3) writer into one growing buffer: scalars by field
 * number, zero and empty values omitted as proto3 omits them, and nested
 * messages written in place (`begin(field)` … `end()`, the length put in
 * front once it is known), so a message tree is encoded in one pass
 * without building the inner messages first.
 *
 * @module
 */

const encoder = new TextEncoder();

/** Hex digits' values (0-9, a-f, A-F; anything else 0: ids are checked hex). */
const NIBBLE = new Uint8Array(128);
for (let i = 0; i < 16; i++) {
  NIBBLE["0123456789abcdef".charCodeAt(i)] = i;
  NIBBLE["0123456789ABCDEF".charCodeAt(i)] = i;
}

/** Wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;

/** Bytes a varint of `v` (a non-negative safe integer) takes. */
export function varintSize(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

/**
 * Writes one protobuf message.
 *
 * @example
 * ```ts
 * import { ProtoWriter } from "./protobuf.ts";
 * const w = new ProtoWriter();
 * w.string(1, "a");
 * w.begin(2);
 * w.uint(1, 300);
 * w.end();
 * console.log(w.finish()); // Uint8Array [10, 1, 97, 18, 3, 8, 172, 2]
 * ```
 */
export class ProtoWriter {
  #buf: Uint8Array<ArrayBuffer>;
  #view: DataView | null = null;
  #at = 0;
  /** Where each open message's content starts (after its one-byte length). */
  #open: number[] = [];

  /**
   * A writer whose buffer starts at `capacity` bytes (it grows as needed;
   * a message of exactly `capacity` bytes is written without a copy).
   */
  constructor(capacity = 4096) {
    this.#buf = new Uint8Array(capacity);
  }

  #room(n: number): void {
    if (this.#at + n <= this.#buf.length) return;
    let size = Math.max(this.#buf.length * 2, 64);
    while (size < this.#at + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.#buf.subarray(0, this.#at));
    this.#buf = grown;
    this.#view = null;
  }

  #data(): DataView {
    return this.#view ??= new DataView(this.#buf.buffer);
  }

  #varint(v: number): void {
    // Exactly what it takes only near the end (an exactly sized buffer stays).
    if (this.#at + 10 > this.#buf.length) this.#room(varintSize(v));
    const buf = this.#buf;
    while (v >= 0x80) {
      buf[this.#at++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[this.#at++] = v;
  }

  #tag(field: number, wire: number): void {
    this.#varint(field * 8 + wire);
  }

  /**
   * A `uint32`/`uint64`/enum field (omitted when 0 unless `present`: a
   * member of a `oneof`, which is written whatever its value).
   */
  uint(field: number, v: number, present = false): void {
    if (v === 0 && !present) return;
    this.#tag(field, VARINT);
    this.#varint(v);
  }

  /** An `int64` field (omitted when 0 unless `present`; negative values as ten bytes). */
  int64(field: number, v: number, present = false): void {
    if (v === 0 && !present) return;
    this.#tag(field, VARINT);
    if (v >= 0) return this.#varint(v);
    let u = BigInt.asUintN(64, BigInt(v));
    this.#room(10);
    while (u >= 0x80n) {
      this.#buf[this.#at++] = Number(u & 0x7fn) | 0x80;
      u >>= 7n;
    }
    this.#buf[this.#at++] = Number(u);
  }

  /** A `bool` field (omitted when false unless `present`). */
  bool(field: number, v: boolean, present = false): void {
    if (!v && !present) return;
    this.#tag(field, VARINT);
    this.#varint(v ? 1 : 0);
  }

  /** A `double` field (omitted when 0 unless `present`). */
  double(field: number, v: number, present = false): void {
    if (v === 0 && !Object.is(v, -0) && !present) return;
    this.#tag(field, FIXED64);
    this.#room(8);
    this.#data().setFloat64(this.#at, v, true);
    this.#at += 8;
  }

  /** A `fixed64` field (omitted when 0). */
  fixed64(field: number, v: bigint): void {
    if (v === 0n) return;
    this.#tag(field, FIXED64);
    this.#room(8);
    this.#data().setBigUint64(this.#at, v, true);
    this.#at += 8;
  }

  /** A `fixed32` field (omitted when 0). */
  fixed32(field: number, v: number): void {
    if (v === 0) return;
    this.#tag(field, FIXED32);
    this.#room(4);
    this.#data().setUint32(this.#at, v, true);
    this.#at += 4;
  }

  /** A `string` field (omitted when empty unless `present`). */
  string(field: number, s: string, present = false): void {
    if (s.length === 0 && !present) return;
    const n = s.length;
    if (n < 0x80) {
      // Short ASCII (ids, keys, names) byte by byte: cheaper than a call
      // into the encoder.
      this.#tag(field, LENGTH);
      this.#room(n + 1);
      const buf = this.#buf;
      const at = this.#at;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[at + 1 + i] = c;
      }
      if (i === n) {
        buf[at] = n;
        this.#at = at + 1 + n;
        return;
      }
      // Not ASCII: the byte after the tag keeps the length, as in `begin`.
      this.#at = at + 1;
      this.#open.push(this.#at);
    } else {
      this.begin(field);
    }
    this.#room(n * 3);
    this.#at += encoder.encodeInto(s, this.#buf.subarray(this.#at)).written;
    this.end();
  }

  /**
   * A `bytes` field, or a message encoded apart (omitted when empty unless
   * `present`: a `oneof` member, an empty message that must be there).
   */
  bytes(field: number, data: Uint8Array, present = false): void {
    if (data.length === 0 && !present) return;
    this.#tag(field, LENGTH);
    this.#varint(data.length);
    this.#room(data.length);
    this.#buf.set(data, this.#at);
    this.#at += data.length;
  }

  /**
   * A `bytes` field from lowercase or uppercase hex (trace and span ids),
   * omitted when empty.
   */
  hexBytes(field: number, hex: string): void {
    const n = hex.length >> 1;
    if (n === 0) return;
    this.#tag(field, LENGTH);
    this.#varint(n);
    this.#room(n);
    const buf = this.#buf;
    let at = this.#at;
    for (let i = 0; i < 2 * n; i += 2) {
      buf[at++] = (NIBBLE[hex.charCodeAt(i)]! << 4) | NIBBLE[hex.charCodeAt(i + 1)]!;
    }
    this.#at = at;
  }

  /**
   * The tag and length of a length-delimited field whose `length` bytes
   * the caller writes after this writer's output (a payload not copied).
   */
  lengthPrefix(field: number, length: number): void {
    this.#tag(field, LENGTH);
    this.#varint(length);
  }

  /** Opens a nested message as field `field` (always written, even empty). */
  begin(field: number): void {
    this.#tag(field, LENGTH);
    this.#room(1);
    this.#at++;
    this.#open.push(this.#at);
  }

  /** Closes the innermost open message. */
  end(): void {
    const start = this.#open.pop();
    if (start === undefined) throw new Error("ProtoWriter.end without begin");
    const length = this.#at - start;
    if (length < 0x80) {
      this.#buf[start - 1] = length;
      return;
    }
    // The length takes more than the byte kept for it: move the content.
    const extra = varintSize(length) - 1;
    this.#room(extra);
    const buf = this.#buf;
    buf.copyWithin(start + extra, start, this.#at);
    let at = start - 1;
    let v = length;
    while (v >= 0x80) {
      buf[at++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[at] = v;
    this.#at += extra;
  }

  /** The message written (a view of the writer's buffer). */
  finish(): Uint8Array<ArrayBuffer> {
    if (this.#open.length !== 0) throw new Error("ProtoWriter.finish with a message open");
    return this.#buf.subarray(0, this.#at);
  }
}
