/**
 * Strict UTF-8 decoding that is fast on valid input.
 *
 * Deno's `TextDecoder` with `fatal: true` is several times slower than
 * without (measured on an 87 KB JSON-RPC output notification: 110 µs vs
 * 19 µs, more than `JSON.parse` and the base64 decode of it together). The
 * lenient decoder replaces every invalid sequence with U+FFFD, so output
 * without U+FFFD proves the input valid; only text containing it (invalid
 * input, or a real U+FFFD) is decoded again strictly, which throws a
 * `TypeError` exactly when the fatal decoder would.
 *
 * @module
 */

/** Decodes complete UTF-8 texts; throws `TypeError` on invalid input. */
export type StrictUtf8Decode = (bytes: Uint8Array) => string;

let shared: StrictUtf8Decode | undefined;
let lenient: TextDecoder | undefined;

/**
 * The lenient decoder (one for the process): invalid sequences become
 * U+FFFD, a leading byte-order mark is kept.
 */
export function lenientUtf8Decoder(): TextDecoder {
  return lenient ??= new TextDecoder("utf-8", { ignoreBOM: true });
}

/**
 * Bytes made into one string at a time where text is made only to be
 * searched or decoded (a long line's newline, an upload's base64): a string
 * this short is young memory, reused at once; a 64 KiB one no longer is
 * (measured on base64: 0.11–0.14 against 0.25 ms per MiB).
 */
export const TEXT_SLICE_BYTES = 32 * 1024;

/**
 * The strict decoder (one for the process: decoding whole texts keeps no
 * state between calls, so every connection shares it). A leading byte-order
 * mark is kept as U+FEFF, never dropped: a JSON text that starts with one is
 * not JSON, on every transport (as for the reference, whose JSON parser sees
 * the bytes as they came).
 */
export function strictUtf8Decoder(): StrictUtf8Decode {
  if (shared) return shared;
  const lenient = lenientUtf8Decoder();
  const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  return shared = (bytes) => {
    const text = lenient.decode(bytes);
    return text.includes("\uFFFD") ? strict.decode(bytes) : text;
  };
}
