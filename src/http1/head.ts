/**
 * HTTP/1.1 message heads: reading one (bounded in size and time), parsing
 * it, checking a status line, writing a request head or a small response,
 * and the one table of reason phrases.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";
import { sha1 } from "../util/sha1.ts";

/** A parsed request or response head. */
export interface MessageHead {
  /** Request line or status line, split on spaces (3 parts). */
  readonly startLine: [string, string, string];
  /** Header fields (case-insensitive). */
  readonly headers: Headers;
  /** Header fields as received: order, case and repeats kept. */
  readonly rawHeaders: Array<[string, string]>;
  /** Bytes read past the end of the head (start of the body or of frames). */
  readonly leftover: Uint8Array;
}

/** Raised when the head is malformed, too large, or does not arrive in time. */
export class HttpHeadError extends Error {
  /** Creates the error with the status a server should answer. */
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = "HttpHeadError";
  }
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** Index of the `\r\n\r\n` ending a head at or after `from`, or -1. */
export function findHeadEnd(data: Uint8Array, from: number): number {
  for (let i = Math.max(0, from - 3); i + 3 < data.length; i++) {
    if (data[i] === 13 && data[i + 1] === 10 && data[i + 2] === 13 && data[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

/** A head deadline's timer this late means the event loop was stalled. */
const LATE_TIMER_MS = 250;
/** Then pending reads get this long (again, while timers keep firing late). */
const LATE_GRACE_MS = 1000;

/** Where {@linkcode readHead} takes its bytes from: a stream's reader, or `connReader` (`body.ts`). */
export interface HeadReader {
  /** The next bytes, or `done` at the end. */
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
}

/**
 * Reads one message head from `reader`. Fails with 431 past `maxBytes`, with
 * 408 after `timeoutMs` (default 30 s: a client opening thousands of
 * connections at once may write some heads seconds late), and with 400 on a
 * malformed head or early EOF. Each chunk is copied at once: the head and
 * its leftover never hold the reader's buffers (`headReader` shares slabs).
 */
export async function readHead(
  reader: HeadReader,
  options: { maxBytes?: number; timeoutMs?: number } = {},
): Promise<MessageHead> {
  const maxBytes = options.maxBytes ?? 16 * 1024;
  const timeoutMs = options.timeoutMs ?? 30_000;
  let data = new Uint8Array(0);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    // A deadline for the peer, not for this process: a timer that fires
    // late found the event loop busy (thousands of connections arriving
    // with their processes spawning), and a head that arrived in time may
    // not have been read yet — give pending reads a moment, while late.
    let due = performance.now() + timeoutMs;
    const arm = (ms: number) => {
      timer = setTimeout(() => {
        const now = performance.now();
        if (now - due > LATE_TIMER_MS) {
          due = now + LATE_GRACE_MS;
          arm(LATE_GRACE_MS);
          return;
        }
        reject(new HttpHeadError(408, "timed out waiting for the request head"));
      }, ms);
    };
    arm(timeoutMs);
  });
  try {
    for (;;) {
      const end = findHeadEnd(data, 0);
      if (end !== -1) {
        return parseHead(data.subarray(0, end), data.slice(end + 4));
      }
      if (data.length > maxBytes) throw new HttpHeadError(431, "request head too large");
      const result = await Promise.race([reader.read(), timeout]);
      if (result.done) throw new HttpHeadError(400, "connection closed before the head ended");
      const joined = new Uint8Array(data.length + result.value.length);
      joined.set(data);
      joined.set(result.value, data.length);
      data = joined;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** A header field name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What a field value or start line must not contain (bare CR, LF, NUL). */
const FORBIDDEN = /[\r\n\0]/;

/**
 * Parses a head (without its final blank line); `leftover` is kept as is.
 * Strict, because a proxy and its upstream must never read one message two
 * ways (request smuggling): lines end with CRLF only (a bare LF or CR is
 * refused), folded lines (obs-fold) are refused, and a field name is a
 * token immediately followed by the colon.
 */
export function parseHead(bytes: Uint8Array, leftover: Uint8Array): MessageHead {
  const text = decoder.decode(bytes);
  const lines = text.split("\r\n");
  const first = lines[0] ?? "";
  if (FORBIDDEN.test(first)) throw new HttpHeadError(400, "malformed start line");
  const sp1 = first.indexOf(" ");
  const sp2 = first.indexOf(" ", sp1 + 1);
  if (sp1 <= 0) throw new HttpHeadError(400, "malformed start line");
  const startLine: [string, string, string] = sp2 === -1
    ? [first.slice(0, sp1), first.slice(sp1 + 1), ""]
    : [first.slice(0, sp1), first.slice(sp1 + 1, sp2), first.slice(sp2 + 1)];
  const headers = new Headers();
  const rawHeaders: Array<[string, string]> = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new HttpHeadError(400, "malformed header line");
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) {
      throw new HttpHeadError(400, "malformed header name (folded line or whitespace)");
    }
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (FORBIDDEN.test(value)) throw new HttpHeadError(400, "bare CR or LF in a header line");
    try {
      headers.append(name, value);
    } catch {
      throw new HttpHeadError(400, "invalid header");
    }
    rawHeaders.push([name, value]);
  }
  return { startLine, headers, rawHeaders, leftover };
}

/** Reason phrases (RFC 9110) of the statuses this project sends. */
const REASONS: Record<number, string> = {
  100: "Continue",
  101: "Switching Protocols",
  200: "OK",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  413: "Content Too Large",
  426: "Upgrade Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

/** The reason phrase of `status` (`Status` for one not in the table). */
export function reasonPhrase(status: number): string {
  return REASONS[status] ?? "Status";
}

/** Serialises a response head (and optional small body) to bytes. */
export function encodeResponse(
  status: number,
  headers: Record<string, string> = {},
  body = "",
): Uint8Array {
  const bodyBytes = encoder.encode(body);
  let head = `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\n`;
  const all: Record<string, string> = { ...headers };
  if (status !== 101) {
    all["content-length"] = String(bodyBytes.length);
    all["connection"] ??= "close";
  }
  for (const [name, value] of Object.entries(all)) head += `${name}: ${value}\r\n`;
  head += "\r\n";
  const headBytes = encoder.encode(head);
  const out = new Uint8Array(headBytes.length + bodyBytes.length);
  out.set(headBytes);
  out.set(bodyBytes, headBytes.length);
  return out;
}

/**
 * The `Sec-WebSocket-Accept` value for a client key (RFC 6455 §4.2.2),
 * computed synchronously (WebCrypto's digest hops to a thread pool: 38 µs of
 * a connection's setup).
 */
export function acceptKey(key: string): string {
  return sha1(encoder.encode(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")).toBase64();
}

/** A header field to write: a text value, or bytes written as they are (secrets). */
export type HeadField = readonly [string, string | Uint8Array];

/**
 * A request head: `METHOD TARGET HTTP/1.1`, then `fields` in order with
 * repeats. Byte values are copied in without ever becoming strings.
 */
export function encodeRequestHead(
  method: string,
  target: string,
  fields: Iterable<HeadField>,
): Uint8Array {
  const parts: Uint8Array[] = [];
  let text = `${method} ${target} HTTP/1.1\r\n`;
  for (const [name, value] of fields) {
    if (typeof value === "string") {
      text += `${name}: ${value}\r\n`;
      continue;
    }
    parts.push(encoder.encode(`${text}${name}: `), value);
    text = "\r\n";
  }
  parts.push(encoder.encode(text + "\r\n"));
  return concatBytes(parts);
}

/** A response's status code, or null when the status line is not `HTTP/1.x NNN`. */
export function responseStatus(head: MessageHead): number | null {
  const status = Number(head.startLine[1]);
  return /^HTTP\/1\.[01]$/.test(head.startLine[0]) && Number.isInteger(status) ? status : null;
}

/** True for a 1xx response that another one follows (every 1xx but 101). */
export function isInterim(status: number): boolean {
  return status >= 100 && status < 200 && status !== 101;
}
