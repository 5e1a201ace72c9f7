/**
 * A small HTTP/1.1 client for `http/request`, on `Deno.connect` and
 * `Deno.connectTls`.
 *
 * `fetch` cannot do what the protocol promises: it normalises method names,
 * adds `user-agent` and `accept-encoding`, and merges and sorts response
 * headers. Here the method goes out exactly as given, request headers go out
 * in order with repeats, response headers come back in order with repeats,
 * and the body is a pull-based stream read from the socket only as fast as
 * the consumer asks (so a slow client slows the upstream).
 *
 * Bodies are framed by `content-length`, `transfer-encoding: chunked`, or the
 * end of the connection. One connection per request (no pooling).
 *
 * @module
 */

import { findHeadEnd, type MessageHead, parseHead } from "../util/http1.ts";

const MAX_HEAD_BYTES = 64 * 1024;

/** A request. */
export interface HttpClientRequest {
  /** Method, sent verbatim. */
  readonly method: string;
  /** Absolute http(s) URL. */
  readonly url: URL;
  /** Headers in order; repeats are sent as separate lines. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** Request body. */
  readonly body?: Uint8Array;
  /** `follow` redirects (up to `maxRedirects`) or `stop` and return them. */
  readonly redirect: "follow" | "stop";
  /** Default 10. */
  readonly maxRedirects?: number;
  /** Aborts the exchange (connect, head and body). */
  readonly signal?: AbortSignal;
  /** Extra trusted CA certificates (PEM) for https. */
  readonly caCerts?: string[];
}

/** A response whose body is still on the wire. */
export interface HttpClientResponse {
  /** Status code. */
  readonly status: number;
  /** Headers as received (lower-cased names), order and repeats kept. */
  readonly headers: Array<[string, string]>;
  /** The URL that answered (after redirects). */
  readonly url: URL;
  /** The body; errors with {@linkcode HttpBodyError} when truncated. */
  readonly body: ReadableStream<Uint8Array>;
}

/** The request could not be sent or no valid response head arrived. */
export class HttpTransportError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HttpTransportError";
  }
}

/** The response body could not be read to its end. */
export class HttpBodyError extends Error {
  /** Creates the error. */
  constructor(message = "error decoding response body", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HttpBodyError";
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** RFC 9110 token characters (methods and header names). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function hasHeader(headers: ReadonlyArray<readonly [string, string]>, name: string): boolean {
  return headers.some(([n]) => n.toLowerCase() === name);
}

function serialiseRequest(request: HttpClientRequest, url: URL): Uint8Array {
  const headers = [...request.headers];
  if (!hasHeader(headers, "host")) headers.unshift(["host", url.host]);
  if (!hasHeader(headers, "accept")) headers.push(["accept", "*/*"]);
  if (
    request.body !== undefined && !hasHeader(headers, "content-length") &&
    !hasHeader(headers, "transfer-encoding")
  ) {
    headers.push(["content-length", String(request.body.length)]);
  }
  let head = `${request.method} ${url.pathname}${url.search} HTTP/1.1\r\n`;
  for (const [name, value] of headers) head += `${name}: ${value}\r\n`;
  head += "\r\n";
  const headBytes = encoder.encode(head);
  if (!request.body || request.body.length === 0) return headBytes;
  const out = new Uint8Array(headBytes.length + request.body.length);
  out.set(headBytes);
  out.set(request.body, headBytes.length);
  return out;
}

async function connect(url: URL, request: HttpClientRequest): Promise<Deno.Conn> {
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const conn = url.protocol === "https:"
    ? await Deno.connectTls({
      hostname,
      port,
      alpnProtocols: ["http/1.1"],
      ...(request.caCerts ? { caCerts: request.caCerts } : {}),
      signal: request.signal,
    } as Deno.ConnectTlsOptions)
    : await Deno.connect({ hostname, port, signal: request.signal } as Deno.ConnectOptions);
  if (url.protocol !== "https:") (conn as Deno.TcpConn).setNoDelay?.(true);
  return conn;
}

/** Reads bytes from a socket with a one-chunk push-back buffer. */
class ByteSource {
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #pending: Uint8Array | null;

  constructor(reader: ReadableStreamDefaultReader<Uint8Array>, leftover: Uint8Array) {
    this.#reader = reader;
    this.#pending = leftover.length > 0 ? leftover : null;
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

  unshift(bytes: Uint8Array): void {
    if (bytes.length > 0) this.#pending = bytes;
  }

  /** Reads one CRLF-terminated line (bounded). */
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
        this.unshift(joined.subarray(nl + 1));
        return decoder.decode(joined.subarray(0, nl)).replace(/\r$/, "");
      }
      if (joined.length > max) throw new HttpBodyError();
      acc = joined;
    }
  }

  cancel(): void {
    this.#reader.cancel().catch(() => {});
  }
}

type Framing = { kind: "none" } | { kind: "length"; remaining: number } | { kind: "chunked" } | {
  kind: "close";
};

function bodyFraming(method: string, status: number, headers: Array<[string, string]>): Framing {
  if (
    method.toUpperCase() === "HEAD" || status === 204 || status === 304 ||
    (status >= 100 && status < 200)
  ) {
    return { kind: "none" };
  }
  const te = headers.filter(([n]) => n === "transfer-encoding").map(([, v]) => v.toLowerCase())
    .join(",");
  if (te.split(",").map((t) => t.trim()).includes("chunked")) return { kind: "chunked" };
  const cl = headers.find(([n]) => n === "content-length");
  if (cl) {
    const n = Number(cl[1]);
    if (!Number.isSafeInteger(n) || n < 0) throw new HttpTransportError("invalid content-length");
    return n === 0 ? { kind: "none" } : { kind: "length", remaining: n };
  }
  return { kind: "close" };
}

/** The body as a pull stream over the socket; closes the socket at its end. */
function bodyStream(
  source: ByteSource,
  framing: Framing,
  close: () => void,
): ReadableStream<Uint8Array> {
  let chunkRemaining = 0;
  let finished = false;
  const finish = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    finished = true;
    close();
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
          controller.enqueue(chunk.subarray(0, take));
          framing.remaining -= take;
          if (framing.remaining === 0) finish(controller);
          return;
        }
        // chunked
        if (chunkRemaining === 0) {
          const sizeLine = await source.line();
          const size = parseInt(sizeLine.split(";")[0]!.trim(), 16);
          if (!Number.isFinite(size) || size < 0) throw new HttpBodyError();
          if (size === 0) {
            // trailers until an empty line
            while ((await source.line()) !== "") { /* ignore trailers */ }
            return finish(controller);
          }
          chunkRemaining = size;
        }
        const chunk = await source.next();
        if (chunk === null) throw new HttpBodyError();
        const take = Math.min(chunk.length, chunkRemaining);
        source.unshift(chunk.subarray(take));
        chunkRemaining -= take;
        if (chunkRemaining === 0) {
          const crlf = await source.line(2);
          if (crlf !== "") throw new HttpBodyError();
        }
        controller.enqueue(chunk.subarray(0, take));
      } catch (error) {
        finished = true;
        close();
        controller.error(
          error instanceof HttpBodyError ? error : new HttpBodyError(undefined, { cause: error }),
        );
      }
    },
    cancel() {
      finished = true;
      close();
    },
  }, { highWaterMark: 0 });
}

/** Reads one response head (bounded) from `source`. */
async function readResponseHead(source: ByteSource): Promise<MessageHead> {
  let data = new Uint8Array(0);
  for (;;) {
    const end = findHeadEnd(data, 0);
    if (end !== -1) {
      source.unshift(data.subarray(end + 4));
      return parseHead(data.subarray(0, end), new Uint8Array(0));
    }
    if (data.length > MAX_HEAD_BYTES) throw new HttpTransportError("response head too large");
    const chunk = await source.next();
    if (chunk === null) throw new HttpTransportError("connection closed before the response head");
    const joined = new Uint8Array(data.length + chunk.length);
    joined.set(data);
    joined.set(chunk, data.length);
    data = joined;
  }
}

async function exchange(
  request: HttpClientRequest,
  url: URL,
  method: string,
  body: Uint8Array | undefined,
  headers: ReadonlyArray<readonly [string, string]>,
): Promise<HttpClientResponse> {
  let conn: Deno.Conn;
  try {
    conn = await connect(url, request);
  } catch (error) {
    throw new HttpTransportError(`cannot connect: ${(error as Error).message}`, { cause: error });
  }
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    request.signal?.removeEventListener("abort", close);
    try {
      conn.close();
    } catch { /* closed */ }
  };
  request.signal?.addEventListener("abort", close, { once: true });
  const source = new ByteSource(conn.readable.getReader(), new Uint8Array(0));
  try {
    const writer = conn.writable.getWriter();
    await writer.write(serialiseRequest({ ...request, method, body, headers }, url));
    writer.releaseLock();
    for (;;) {
      const head = await readResponseHead(source);
      const status = Number(head.startLine[1]);
      if (!/^HTTP\/1\.[01]$/.test(head.startLine[0]) || !Number.isInteger(status)) {
        throw new HttpTransportError("invalid response status line");
      }
      // Informational responses precede the real one.
      if (status >= 100 && status < 200 && status !== 101) continue;
      const responseHeaders = head.rawHeaders.map(([n, v]) =>
        [n.toLowerCase(), v] as [string, string]
      );
      return {
        status,
        headers: responseHeaders,
        url,
        body: bodyStream(source, bodyFraming(method, status, responseHeaders), () => {
          source.cancel();
          close();
        }),
      };
    }
  } catch (error) {
    source.cancel();
    close();
    if (error instanceof HttpTransportError) throw error;
    const why = request.signal?.aborted ? "operation timed out" : (error as Error).message;
    throw new HttpTransportError(why, { cause: error });
  }
}

const SENSITIVE = new Set(["authorization", "cookie", "proxy-authorization", "www-authenticate"]);

/**
 * Sends `request`, following redirects when asked (303, and 301/302 for
 * methods other than GET/HEAD, become GET without a body; a `referer` is
 * added; credentials are dropped when the origin changes).
 */
export async function httpRequest(request: HttpClientRequest): Promise<HttpClientResponse> {
  let url = request.url;
  let method = request.method;
  let body = request.body;
  let headers: ReadonlyArray<readonly [string, string]> = request.headers;
  const max = request.maxRedirects ?? 10;
  for (let hop = 0;; hop++) {
    const response = await exchange(request, url, method, body, headers);
    const location = response.headers.find(([n]) => n === "location")?.[1];
    if (
      request.redirect === "stop" || location === undefined ||
      ![301, 302, 303, 307, 308].includes(response.status)
    ) {
      return response;
    }
    await response.body.cancel();
    if (hop >= max) throw new HttpTransportError("too many redirects");
    let next: URL;
    try {
      next = new URL(location, url);
    } catch {
      throw new HttpTransportError(`invalid redirect location ${location}`);
    }
    if (next.protocol !== "http:" && next.protocol !== "https:") {
      throw new HttpTransportError(`redirect to unsupported scheme ${next.protocol}`);
    }
    const upper = method.toUpperCase();
    if (
      response.status === 303 ||
      ((response.status === 301 || response.status === 302) && upper !== "GET" && upper !== "HEAD")
    ) {
      method = upper === "HEAD" ? "HEAD" : "GET";
      body = undefined;
      headers = headers.filter(([n]) =>
        !["content-length", "content-type", "transfer-encoding"].includes(n.toLowerCase())
      );
    }
    if (next.origin !== url.origin) {
      headers = headers.filter(([n]) => !SENSITIVE.has(n.toLowerCase()));
    }
    headers = headers.filter(([n]) => n.toLowerCase() !== "host" && n.toLowerCase() !== "referer");
    if (!(url.protocol === "https:" && next.protocol === "http:")) {
      const referer = new URL(url);
      referer.hash = "";
      referer.username = "";
      referer.password = "";
      headers = [...headers, ["referer", referer.href]];
    }
    url = next;
  }
}
