/**
 * Uploads without their base64 as JavaScript text.
 *
 * An `fs/writeFile`, `fs/writeBlock` or `process/write` of megabytes is one
 * JSON text made almost entirely of one base64 string. Taken the general
 * way, that string is built three times (UTF-8 decoding of the message,
 * `JSON.parse`, the canonical check's `JSON.stringify`) and then decoded —
 * each a fresh multi-megabyte allocation, whose page faults are most of the
 * cost on a virtual machine. Here the string is found in the message's
 * bytes, its base64 decoded straight from them, and the rest of the message
 * (a few hundred bytes, the string replaced by a marker) parsed by the same
 * strict parser as any message. The decoded bytes take the string's place as
 * a {@linkcode Base64Part} — only where the caller said base64 belongs
 * (`params[member]` of a method it names).
 *
 * Anything else is left to the general path, which then decides exactly as
 * before: a rest that does not parse or is not a message, a marker anywhere
 * but there, a string with an escape or a character outside the base64
 * alphabet, base64 the strict decoder would refuse. So every answer and
 * every error stays the same; only valid uploads get faster.
 *
 * @module
 */

import { Base64Part, classifyMessage, type IncomingMessage } from "./message.ts";
import { parseStrictJson, type StrictJsonLimits } from "./strict_json.ts";
import type { StrictUtf8Decode } from "../util/utf8.ts";
import { messageSpare } from "../util/spare_buffer.ts";

/** Messages from this size on are looked at for a base64 string first. */
export const LARGE_MESSAGE_BYTES = 64 * 1024;

/** Shortest string taken out of a message (shorter ones cost little the general way). */
const MIN_STRING_BYTES = 32 * 1024;

/**
 * Where base64 may be taken as bytes: for each method, the `params` member
 * whose string is base64 (`fs/writeFile` → `dataBase64`).
 */
export type Base64Members = ReadonlyMap<string, string>;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const EQUALS = 0x3d;

/**
 * The contents `[start, end)` of the longest JSON string in `bytes` (read
 * as JSON text from its start: outside strings every quote opens one),
 * null when the text ends inside a string. Native `indexOf` jumps over the
 * contents, so the cost is the number of quotes, not of bytes.
 */
export function longestString(bytes: Uint8Array): [number, number] | null {
  let bestStart = -1;
  let bestEnd = -1;
  let open = bytes.indexOf(QUOTE);
  while (open !== -1) {
    let close = bytes.indexOf(QUOTE, open + 1);
    while (close !== -1 && isEscaped(bytes, close, open + 1)) {
      close = bytes.indexOf(QUOTE, close + 1);
    }
    if (close === -1) return null;
    if (close - open - 1 > bestEnd - bestStart) {
      bestStart = open + 1;
      bestEnd = close;
    }
    open = bytes.indexOf(QUOTE, close + 1);
  }
  return bestStart === -1 ? null : [bestStart, bestEnd];
}

/** True when the quote at `at` follows an odd run of backslashes (not before `from`). */
function isEscaped(bytes: Uint8Array, at: number, from: number): boolean {
  let i = at - 1;
  while (i >= from && bytes[i] === BACKSLASH) i--;
  return (at - 1 - i) % 2 === 1;
}

/** Sextet of each byte, -1 outside the standard alphabet. */
let sextets: Int32Array | undefined;

function sextetTable(): Int32Array {
  if (sextets) return sextets;
  const table = new Int32Array(256).fill(-1);
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return sextets = table;
}

/** Bytes that standard padded base64 of `n` ASCII bytes decodes to; -1 when `n` cannot be that. */
function decodedLength(src: Uint8Array): number {
  const n = src.length;
  if (n === 0 || n % 4 !== 0) return -1;
  return (n / 4) * 3 - (src[n - 1] !== EQUALS ? 0 : src[n - 2] !== EQUALS ? 1 : 2);
}

/**
 * Decodes standard padded base64 given as ASCII bytes `src` into `out`
 * (`decodedLength` bytes; `out` may start where `src` does — a decode in
 * place, each quantum written behind the one read next). False for anything
 * `decodeStrictBase64` (protocol/decode.ts) would not accept as it is — a
 * symbol outside the alphabet, padding other than one or two `=` at the
 * end — so the general path words the problem; `src` is then as it was
 * (what an in-place decode overwrote is encoded back). Trailing bits are
 * ignored, as there.
 */
export function decodeBase64Into(src: Uint8Array, out: Uint8Array): boolean {
  const n = src.length;
  const padding = src[n - 1] !== EQUALS ? 0 : src[n - 2] !== EQUALS ? 1 : 2;
  const t = sextetTable();
  const whole = padding === 0 ? n : n - 4;
  let o = 0;
  let i = 0;
  for (; i < whole; i += 4) {
    const a = t[src[i]!]!, b = t[src[i + 1]!]!, c = t[src[i + 2]!]!, d = t[src[i + 3]!]!;
    if ((a | b | c | d) < 0) break;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o] = v >> 16;
    out[o + 1] = v >> 8;
    out[o + 2] = v;
    o += 3;
  }
  if (i === whole && padding > 0) {
    const a = t[src[whole]!]!, b = t[src[whole + 1]!]!;
    const c = padding === 1 ? t[src[whole + 2]!]! : 0;
    if ((a | b | c) >= 0) {
      const v = (a << 18) | (b << 12) | (c << 6);
      out[o] = v >> 16;
      if (padding === 1) out[o + 1] = v >> 8;
      return true;
    }
  } else if (i === whole) {
    return true;
  }
  // Refused at quantum i: in place, the quanta before it were overwritten
  // (exactly: a whole quantum's four symbols are its three bytes' base64).
  if (out.buffer === src.buffer && out.byteOffset < src.byteOffset + i) {
    new TextEncoder().encodeInto(out.subarray(0, o).toBase64(), src.subarray(0, i));
  }
  return false;
}

/**
 * Gives back the bytes of an upload decoded here (a `Base64Part`'s bytes
 * the handler got) once nothing reads them any more — the file or the
 * process's stdin has them: their buffer may take the next large message.
 * Other bytes, or bytes given back already, are ignored.
 */
export function releaseDecoded(bytes: Uint8Array): void {
  messageSpare.give(bytes);
}

let marker: string | undefined;

/**
 * What stands for the string in the rest: random per process, so no
 * client can write it (and the rest is checked to hold it once).
 */
function markerText(): string {
  return marker ??= `exec-server:base64:${crypto.randomUUID()}`;
}

/**
 * The message in `bytes` with its long base64 string decoded to bytes, or
 * null when the general path must decide (see the module documentation).
 * Nothing is kept of `bytes` — the caller may reuse them once this returns
 * — unless `keep` says they are ours: the base64 is then decoded in place,
 * and `bytes` belong to the message until {@linkcode releaseDecoded}.
 */
export function decodeLargeMessage(
  bytes: Uint8Array,
  members: Base64Members,
  limits: StrictJsonLimits,
  decodeUtf8: StrictUtf8Decode,
  keep?: () => boolean,
): IncomingMessage | null {
  const span = longestString(bytes);
  if (span === null || span[1] - span[0] < MIN_STRING_BYTES) return null;
  const [start, end] = span;
  let rest: string;
  try {
    rest = decodeUtf8(bytes.subarray(0, start)) + markerText() + decodeUtf8(bytes.subarray(end));
  } catch {
    return null;
  }
  const mark = markerText();
  const at = rest.indexOf(mark);
  if (rest.indexOf(mark, at + 1) !== -1) return null;
  const parsed = parseStrictJson(rest, limits);
  if (!parsed.ok) return null;
  const message = classifyMessage(parsed.value, parsed.idSource);
  if (typeof message === "string" || !("method" in message)) return null;
  const member = members.get(message.method);
  const params = message.params as Record<string, unknown> | undefined;
  if (
    member === undefined || params === null || typeof params !== "object" ||
    Array.isArray(params) || params[member] !== mark
  ) {
    return null;
  }
  const base64 = bytes.subarray(start, end);
  const length = decodedLength(base64);
  if (length < 0) return null;
  // In place when the caller gives up the bytes, else into a buffer of our own.
  const decoded = keep?.() ? base64.subarray(0, length) : messageSpare.take(length);
  if (!decodeBase64Into(base64, decoded)) {
    messageSpare.give(decoded);
    return null;
  }
  params[member] = new Base64Part(decoded);
  return message;
}
