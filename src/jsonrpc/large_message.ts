/**
 * Uploads without their base64 as JavaScript text.
 *
 * An `fs/writeFile`, `fs/writeBlock` or `process/write` of megabytes is one
 * JSON text made almost entirely of one base64 string. Taken the general
 * way, that string is built three times (UTF-8 decoding of the message,
 * `JSON.parse`, the canonical check's `JSON.stringify`) and then decoded —
 * each a fresh multi-megabyte allocation, whose page faults are most of the
 * cost on a virtual machine. Here the string is found in the message's
 * bytes (short strings skipped with `indexOf`, the first long one taken)
 * and decoded from them by V8, 32 KiB of text at a time (short strings are
 * young memory, reused at once) — and the rest of the message
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
import { lenientUtf8Decoder, type StrictUtf8Decode, TEXT_SLICE_BYTES } from "../util/utf8.ts";
import { messageSpare } from "../util/spare_buffer.ts";

/** Messages from this size on are looked at for a base64 string first. */
export const LARGE_MESSAGE_BYTES = 64 * 1024;

/**
 * Where base64 may be taken as bytes: for each method, the `params` member
 * whose string is base64 (`fs/writeFile` → `dataBase64`).
 */
export type Base64Members = ReadonlyMap<string, string>;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const EQUALS = 0x3d;

/** Strings looked through for their closing quote at once; a longer one may be the base64. */
const SHORT_STRING_WINDOW = 4096;

/**
 * Where the contents of the first string of `bytes` longer than the window
 * start (read as JSON text from its start: outside strings every quote
 * opens one, escaped quotes are skipped), -1 when there is none. Native
 * `indexOf` over each short string; the long one is not scanned here (its
 * decoding finds its end).
 */
export function longStringStart(bytes: Uint8Array): number {
  let open = bytes.indexOf(QUOTE);
  while (open !== -1) {
    const from = open + 1;
    const window = bytes.subarray(from, from + SHORT_STRING_WINDOW);
    let close = window.indexOf(QUOTE);
    while (close !== -1 && isEscaped(window, close)) close = window.indexOf(QUOTE, close + 1);
    if (close === -1) return window.length === SHORT_STRING_WINDOW ? from : -1;
    open = bytes.indexOf(QUOTE, from + close + 1);
  }
  return -1;
}

/** True when the quote at `at` follows an odd run of backslashes. */
function isEscaped(bytes: Uint8Array, at: number): boolean {
  let i = at - 1;
  while (i >= 0 && bytes[i] === BACKSLASH) i--;
  return (at - 1 - i) % 2 === 1;
}

/** A base64 string decoded from a message's bytes. */
export interface DecodedString {
  /** The decoded bytes (a view of a spare buffer). */
  readonly bytes: Uint8Array;
  /** Index of the string's closing quote. */
  readonly close: number;
}

/**
 * Decodes the JSON string whose contents start at `start` in `src` as
 * standard padded base64, up to its closing quote; null for anything
 * `decodeStrictBase64` (protocol/decode.ts) would not accept as it is — a
 * symbol outside the alphabet (an escape included), a length that is not a
 * multiple of four, padding other than one or two `=` at the end — so the
 * general path words the problem. Trailing bits are ignored, as there.
 * `src` is only read.
 */
export function decodeBase64String(src: Uint8Array, start: number): DecodedString | null {
  const td = lenientUtf8Decoder();
  const out = messageSpare.take(Math.floor(((src.length - start) * 3) / 4));
  let o = 0;
  // Made into text a slice at a time (TEXT_SLICE_BYTES: per MiB of text,
  // decoded bytes given back / kept as in a flood, whole strings took 0.10 /
  // 0.40–0.79 ms for 4 MiB messages and 4–5 ms from 16 MiB on; 32 KiB
  // slices 0.11–0.14 / 0.32–0.35 at every size).
  for (let at = start; at < src.length; at += TEXT_SLICE_BYTES) {
    const end = Math.min(at + TEXT_SLICE_BYTES, src.length);
    // Invalid UTF-8 becomes U+FFFD, which no base64 has: refused below (the
    // rest is decoded strictly on its own later). The string's end is its
    // first quote, in this slice or at the next one's first byte; before
    // it, a symbol that is not ASCII makes `n` a character count, not a
    // byte count: such a symbol is refused by the decoder.
    const text = td.decode(src.subarray(at, end));
    let n = text.indexOf('"');
    const last = n !== -1 || src[end] === QUOTE;
    if (n === -1) n = text.length;
    if (!last && end === src.length) break;
    if (n % 4 !== 0) break;
    const padding = !last || text.charCodeAt(n - 1) !== EQUALS
      ? 0
      : text.charCodeAt(n - 2) !== EQUALS
      ? 1
      : 2;
    const expected = (n / 4) * 3 - padding;
    try {
      // Loose: trailing bits ignored, as the strict decoder does. Whitespace
      // is skipped by V8 but not by the crate, and padding before the last
      // slice ends it early: then fewer bytes than expected.
      const { read, written } = out.subarray(o).setFromBase64(
        n === text.length ? text : text.slice(0, n),
        { lastChunkHandling: "loose" },
      );
      if (read !== n || written !== expected) break;
    } catch {
      /* a symbol outside the alphabet, or misplaced padding */
      break;
    }
    o += expected;
    if (last) return { bytes: out.subarray(0, o), close: at + n };
  }
  messageSpare.give(out);
  return null;
}

/**
 * Gives back the bytes of an upload decoded here (a `Base64Part`'s bytes
 * the handler got) once nothing reads them any more — the file or the
 * process's stdin has them: their buffer may take the next large upload.
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
 * null when the general path must decide (see the module documentation) —
 * always for a message under {@linkcode LARGE_MESSAGE_BYTES} or without
 * `members` (a transport that decodes no base64 member).
 * Nothing is kept of `bytes`: the caller may reuse them once this returns.
 */
export function decodeLargeMessage(
  bytes: Uint8Array,
  members: Base64Members | undefined,
  limits: StrictJsonLimits,
  decodeUtf8: StrictUtf8Decode,
): IncomingMessage | null {
  if (members === undefined || bytes.length < LARGE_MESSAGE_BYTES) return null;
  const start = longStringStart(bytes);
  if (start === -1) return null;
  const decoded = decodeBase64String(bytes, start);
  if (decoded === null) return null;
  const message = restWithMarker(bytes, start, decoded.close, members, limits, decodeUtf8);
  if (message === null) {
    messageSpare.give(decoded.bytes);
    return null;
  }
  message.params[message.member] = new Base64Part(decoded.bytes);
  return message.message;
}

/**
 * The message of `bytes` with the string `[start, close)` replaced by the
 * marker, parsed strictly — when the marker is exactly its method's base64
 * member; null otherwise.
 */
function restWithMarker(
  bytes: Uint8Array,
  start: number,
  close: number,
  members: Base64Members,
  limits: StrictJsonLimits,
  decodeUtf8: StrictUtf8Decode,
): { message: IncomingMessage; params: Record<string, unknown>; member: string } | null {
  const mark = markerText();
  let rest: string;
  try {
    rest = decodeUtf8(bytes.subarray(0, start)) + mark + decodeUtf8(bytes.subarray(close));
  } catch {
    return null;
  }
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
  return { message, params, member };
}
