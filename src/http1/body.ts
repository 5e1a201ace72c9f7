/**
 * HTTP/1.1 message bodies over a byte stream, for both sides: framing by
 * `content-length`, `transfer-encoding: chunked` or end of connection, read
 * as a pull stream (nothing is read before the consumer asks), and chunked
 * encoding for bodies we send.
 *
 * @module
 */

import { findHeadEnd, type HeadReader, type MessageHead, parseHead } from "./head.ts";
import type { ByteReader } from "../util/conn_io.ts";

/** A request whose body framing could be read two ways; answered with 400. */
export class AmbiguousFramingError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "AmbiguousFramingError";
  }
}

/** A body could not be read to its end (truncated or malformed framing). */
export class HttpBodyError extends Error {
  /** Creates the error. */
  constructor(message = "error decoding response body", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HttpBodyError";
  }
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** What {@linkcode ByteSource} reads from: a stream reader or anything shaped like one. */
export interface ChunkReader extends HeadReader {
  /** Stops reading. */
  cancel(reason?: unknown): Promise<void>;
}

/**
 * A {@linkcode ChunkReader} over `conn.read()` (not `conn.readable`, whose end
 * closes the whole connection — a half-closed peer could no longer be
 * written to — and which sets up two streams, their queues, controllers and
 * promises per connection: what a listener with thousands of connections
 * pays for each). Each chunk is a fresh buffer of `chunkBytes` (for request
 * heads, see {@linkcode headReader}).
 */
export function connReader(conn: ByteReader, chunkBytes = 64 * 1024): ChunkReader {
  return readerInto(conn, () => new Uint8Array(chunkBytes));
}

/** What one read of a request head takes: a page (heads are a few hundred bytes). */
const HEAD_READ_BYTES = 4 * 1024;
/** Head reads are regions of slabs this large, one slab for 64 reads. */
const HEAD_SLAB_BYTES = 64 * HEAD_READ_BYTES;
let headSlab: Uint8Array | null = null;
let headSlabUsed = 0;

function headRegion(): Uint8Array {
  if (headSlab === null || headSlabUsed === HEAD_SLAB_BYTES) {
    headSlab = new Uint8Array(HEAD_SLAB_BYTES);
    headSlabUsed = 0;
  }
  return headSlab.subarray(headSlabUsed, headSlabUsed += HEAD_READ_BYTES);
}

/**
 * A {@linkcode ChunkReader} for a request head that {@linkcode readHead}
 * copies out of each chunk at once. Each read fills a fresh 4 KiB region of
 * a 256 KiB slab shared by every connection (a slab is freed once its 64
 * regions are garbage). A fresh 64 KiB buffer per connection cost 16 page
 * faults while the head touches one (31% of a burst of connections'
 * set-up CPU), and left 64 KiB per connection in glibc's heap once freed;
 * a 4 KiB buffer of its own per connection fragmented that heap among the
 * sessions' long-lived allocations (stop 39: 120 against 66 KiB per idle
 * session once trimmed). A slab is one allocation, whole pages either way.
 */
export function headReader(conn: ByteReader): ChunkReader {
  return readerInto(conn, headRegion);
}

/** Reads into what `buffer` gives for each read. */
function readerInto(conn: ByteReader, buffer: () => Uint8Array): ChunkReader {
  return {
    async read() {
      const into = buffer();
      const n = await conn.read(into);
      return n === null
        ? { done: true, value: undefined }
        : { done: false, value: into.subarray(0, n) };
    },
    cancel() {
      return Promise.resolve();
    },
  };
}

/** Reads bytes from a stream with a one-chunk push-back buffer. */
export class ByteSource {
  #reader: ChunkReader;
  #pending: Uint8Array | null = null;

  /** Reads from `reader`. */
  constructor(reader: ChunkReader) {
    this.#reader = reader;
  }

  /** Takes the pushed-back bytes (read past a head), if any. */
  takePending(): Uint8Array | null {
    const p = this.#pending;
    this.#pending = null;
    return p;
  }

  /** The next bytes (null at EOF). */
  async next(): Promise<Uint8Array | null> {
    if (this.#pending) {
      const p = this.#pending;
      this.#pending = null;
      return p;
    }
    const { value, done } = await this.#reader.read();
    return done ? null : value;
  }

  /** Pushes bytes back to be returned by the next {@linkcode next}. */
  unshift(bytes: Uint8Array): void {
    if (bytes.length > 0) this.#pending = bytes;
  }

  /** Reads one CRLF-terminated line of at most `max` bytes (a bare LF is an error). */
  async line(max = 8192): Promise<string> {
    let acc = new Uint8Array(0);
    for (;;) {
      const chunk = await this.next();
      if (chunk === null) throw new HttpBodyError();
      const joined = new Uint8Array(acc.length + chunk.length);
      joined.set(acc);
      joined.set(chunk, acc.length);
      const nl = joined.indexOf(10);
      if (nl !== -1) {
        if (nl === 0 || joined[nl - 1] !== 13) throw new HttpBodyError("bare LF in chunked body");
        this.unshift(joined.subarray(nl + 1));
        const text = decoder.decode(joined.subarray(0, nl - 1));
        if (text.includes("\r")) throw new HttpBodyError("bare CR in chunked body");
        return text;
      }
      if (joined.length > max) throw new HttpBodyError();
      acc = joined;
    }
  }

  /**
   * Reads one message head (request or response) of at most `maxBytes`.
   * Returns null at a clean EOF before any byte.
   */
  async head(maxBytes = 64 * 1024): Promise<MessageHead | null> {
    let data = new Uint8Array(0);
    for (;;) {
      const end = findHeadEnd(data, 0);
      if (end !== -1) {
        this.unshift(data.subarray(end + 4));
        return parseHead(data.subarray(0, end), new Uint8Array(0));
      }
      if (data.length > maxBytes) throw new HttpBodyError("message head too large");
      const chunk = await this.next();
      if (chunk === null) {
        if (data.length === 0) return null;
        throw new HttpBodyError("connection closed inside a message head");
      }
      const joined = new Uint8Array(data.length + chunk.length);
      joined.set(data);
      joined.set(chunk, data.length);
      data = joined;
    }
  }

  /** Stops reading (cancels the underlying stream). */
  cancel(): void {
    this.#reader.cancel().catch(() => {});
  }
}

/** How a body is delimited. */
export type BodyFraming =
  | { kind: "none" }
  | { kind: "length"; remaining: number }
  | { kind: "chunked" }
  | { kind: "close" };

function lengthOrChunked(headers: ReadonlyArray<readonly [string, string]>): BodyFraming | null {
  const te = headers.filter(([n]) => n.toLowerCase() === "transfer-encoding").map(([, v]) =>
    v.toLowerCase()
  )
    .join(",");
  if (te.split(",").map((t) => t.trim()).includes("chunked")) return { kind: "chunked" };
  const cl = headers.find(([n]) => n.toLowerCase() === "content-length");
  if (cl) {
    const n = Number(cl[1]);
    if (!/^\d+$/.test(cl[1].trim()) || !Number.isSafeInteger(n)) {
      throw new HttpBodyError("invalid content-length");
    }
    return n === 0 ? { kind: "none" } : { kind: "length", remaining: n };
  }
  return null;
}

/** Framing of a response body (RFC 9112 §6.3). */
export function responseFraming(
  method: string,
  status: number,
  headers: ReadonlyArray<readonly [string, string]>,
): BodyFraming {
  if (
    method.toUpperCase() === "HEAD" || status === 204 || status === 304 ||
    (status >= 100 && status < 200)
  ) {
    return { kind: "none" };
  }
  return lengthOrChunked(headers) ?? { kind: "close" };
}

/**
 * Framing of a request body: without length or chunking there is none.
 * Throws {@linkcode AmbiguousFramingError} for anything a second parser
 * could read differently (RFC 9112 §6.1, §6.3): both `Transfer-Encoding`
 * and `Content-Length`; a transfer coding other than exactly `chunked`;
 * `Content-Length` values that are not all the same digits; `Connection`
 * naming a framing field (a hop-by-hop stripper would drop it and leave the
 * body unframed).
 */
export function requestFraming(headers: ReadonlyArray<readonly [string, string]>): BodyFraming {
  const lengths: string[] = [];
  const codings: string[] = [];
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (lower === "content-length") lengths.push(...value.split(",").map((v) => v.trim()));
    else if (lower === "transfer-encoding") {
      codings.push(...value.split(",").map((v) => v.trim().toLowerCase()));
    } else if (lower === "connection") {
      for (const token of value.split(",").map((t) => t.trim().toLowerCase())) {
        if (token === "content-length" || token === "transfer-encoding") {
          throw new AmbiguousFramingError(`Connection names the framing field ${token}`);
        }
      }
    }
  }
  if (codings.length > 0) {
    if (lengths.length > 0) {
      throw new AmbiguousFramingError("both Transfer-Encoding and Content-Length");
    }
    if (codings.length !== 1 || codings[0] !== "chunked") {
      throw new AmbiguousFramingError(`unsupported Transfer-Encoding ${codings.join(", ")}`);
    }
    return { kind: "chunked" };
  }
  if (lengths.length === 0) return { kind: "none" };
  if (!lengths.every((v) => /^\d{1,15}$/.test(v)) || new Set(lengths).size !== 1) {
    throw new AmbiguousFramingError(`invalid Content-Length ${lengths.join(", ")}`);
  }
  const n = Number(lengths[0]);
  return n === 0 ? { kind: "none" } : { kind: "length", remaining: n };
}

/**
 * The body as a pull stream over `source`; `done` runs once: with `true` at
 * its complete end, with `false` on error or cancel. Errors are
 * {@linkcode HttpBodyError}.
 */
export function bodyStream(
  source: ByteSource,
  framing: BodyFraming,
  done: (complete: boolean) => void,
): ReadableStream<Uint8Array> {
  let chunkRemaining = 0;
  let finished = false;
  const finish = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    finished = true;
    done(true);
    controller.close();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (finished) return;
      try {
        if (framing.kind === "none") return finish(controller);
        if (framing.kind === "close") {
          const chunk = await source.next();
          if (chunk === null) return finish(controller);
          controller.enqueue(chunk);
          return;
        }
        if (framing.kind === "length") {
          const chunk = await source.next();
          if (chunk === null) throw new HttpBodyError();
          const take = Math.min(chunk.length, framing.remaining);
          source.unshift(chunk.subarray(take));
          controller.enqueue(chunk.subarray(0, take));
          framing.remaining -= take;
          if (framing.remaining === 0) finish(controller);
          return;
        }
        if (chunkRemaining === 0) {
          const sizeLine = await source.line();
          const digits = sizeLine.split(";")[0]!.replace(/[ \t]+$/, "");
          if (!/^[0-9a-fA-F]{1,12}$/.test(digits)) throw new HttpBodyError("invalid chunk size");
          const size = parseInt(digits, 16);
          if (size === 0) {
            while ((await source.line()) !== "") { /* trailers are ignored */ }
            return finish(controller);
          }
          chunkRemaining = size;
        }
        const chunk = await source.next();
        if (chunk === null) throw new HttpBodyError();
        const take = Math.min(chunk.length, chunkRemaining);
        source.unshift(chunk.subarray(take));
        chunkRemaining -= take;
        if (chunkRemaining === 0 && (await source.line(2)) !== "") throw new HttpBodyError();
        controller.enqueue(chunk.subarray(0, take));
      } catch (error) {
        finished = true;
        done(false);
        controller.error(
          error instanceof HttpBodyError ? error : new HttpBodyError(undefined, { cause: error }),
        );
      }
    },
    cancel() {
      if (finished) return;
      finished = true;
      done(false);
    },
  }, { highWaterMark: 0 });
}

/** Frames one chunk of a chunked body. */
export function encodeChunk(data: Uint8Array): Uint8Array {
  const head = encoder.encode(`${data.length.toString(16)}\r\n`);
  const out = new Uint8Array(head.length + data.length + 2);
  out.set(head);
  out.set(data, head.length);
  out[out.length - 2] = 13;
  out[out.length - 1] = 10;
  return out;
}

/** The last chunk of a chunked body. */
export const LAST_CHUNK: Uint8Array = encoder.encode("0\r\n\r\n");
