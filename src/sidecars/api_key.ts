/**
 * Reads an API key from stdin into an `authorization` header value without
 * ever turning it into a JS string (strings cannot be wiped).
 *
 * The key goes into a fixed 1024-byte buffer pre-filled with `Bearer `;
 * reading stops at the first newline or at end of input; trailing CR/LF are
 * trimmed; only `[A-Za-z0-9_-]` is allowed. The result is an exact-size copy
 * and the scratch buffer is zero-filled on every path. Error texts match the
 * reference `codex-responses-api-proxy`.
 *
 * @module
 */

/** Size of the header buffer, `Bearer ` included. */
export const API_KEY_BUFFER_BYTES = 1024;

const PREFIX = new TextEncoder().encode("Bearer ");

/** Why the key was refused. */
export class ApiKeyError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ApiKeyError";
  }
}

/** The texts of {@linkcode ApiKeyError}. */
export const API_KEY_ERRORS = {
  missing:
    "API key must be provided via stdin (e.g. printenv OPENAI_API_KEY | env -u OPENAI_API_KEY exec-server responses-proxy)",
  tooLarge: `API key is too large to fit in the ${API_KEY_BUFFER_BYTES}-byte buffer`,
  invalid: "API key may only contain ASCII letters, numbers, '-' or '_'",
} as const;

/** Something with `read` like `Deno.stdin`. */
export interface KeySource {
  /** Reads into `buffer`; `null` at end of input. */
  read(buffer: Uint8Array): Promise<number | null>;
}

function allowed(byte: number): boolean {
  return (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) ||
    (byte >= 0x61 && byte <= 0x7a) || byte === 0x2d || byte === 0x5f;
}

/**
 * Reads `Bearer <key>` from `source` (see the module documentation) and
 * returns it as bytes; throws {@linkcode ApiKeyError}.
 */
export async function readApiKeyHeader(source: KeySource): Promise<Uint8Array> {
  const buffer = new Uint8Array(API_KEY_BUFFER_BYTES);
  buffer.set(PREFIX);
  let end = PREFIX.length;
  try {
    let newline = false;
    while (!newline) {
      if (end === buffer.length) throw new ApiKeyError(API_KEY_ERRORS.tooLarge);
      let n: number | null;
      try {
        n = await source.read(buffer.subarray(end));
      } catch (error) {
        throw new ApiKeyError(`reading API key from stdin: ${(error as Error).message}`, {
          cause: error,
        });
      }
      if (n === null || n === 0) break;
      const at = buffer.subarray(end, end + n).indexOf(0x0a);
      if (at >= 0) {
        buffer.fill(0, end + at, end + n);
        end += at;
        newline = true;
      } else {
        end += n;
      }
    }
    while (end > PREFIX.length && (buffer[end - 1] === 0x0d || buffer[end - 1] === 0x0a)) end--;
    if (end === PREFIX.length) throw new ApiKeyError(API_KEY_ERRORS.missing);
    for (let i = PREFIX.length; i < end; i++) {
      if (!allowed(buffer[i]!)) throw new ApiKeyError(API_KEY_ERRORS.invalid);
    }
    return buffer.slice(0, end);
  } finally {
    buffer.fill(0);
  }
}
