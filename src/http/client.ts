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

import { bodyStream, ByteSource, HttpBodyError, responseFraming } from "../http1/body.ts";
import { encodeRequestHead, type HeadField } from "../http1/head.ts";
import { InvalidStatusLine, startExchange } from "../http1/client.ts";

export { HttpBodyError };

/** A request. */
export interface HttpClientRequest {
  /** Method, sent verbatim. */
  readonly method: string;
  /** Absolute http(s) URL. */
  readonly url: URL;
  /**
   * Headers in order; repeats are sent as separate lines. A byte value is
   * written as is and never becomes a JS string (for secrets: the request
   * buffer that held it is zero-filled once written).
   */
  readonly headers: ReadonlyArray<HeaderField>;
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

/** One request header: a name and a text or byte value. */
export type HeaderField = HeadField;

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

/** RFC 9110 token characters (methods and header names). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function hasHeader(headers: ReadonlyArray<HeaderField>, name: string): boolean {
  return headers.some(([n]) => n.toLowerCase() === name);
}

/** The request head (secret byte values copied in: zero-fill it once written). */
function requestHead(request: HttpClientRequest, url: URL): Uint8Array {
  const headers = [...request.headers];
  if (!hasHeader(headers, "host")) headers.unshift(["host", url.host]);
  if (!hasHeader(headers, "accept")) headers.push(["accept", "*/*"]);
  if (
    request.body !== undefined && !hasHeader(headers, "content-length") &&
    !hasHeader(headers, "transfer-encoding")
  ) {
    headers.push(["content-length", String(request.body.length)]);
  }
  return encodeRequestHead(request.method, `${url.pathname}${url.search}`, headers);
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

async function exchange(
  request: HttpClientRequest,
  url: URL,
  method: string,
  body: Uint8Array | undefined,
  headers: ReadonlyArray<HeaderField>,
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
  const source = new ByteSource(conn.readable.getReader());
  try {
    const head = requestHead({ ...request, method, body, headers }, url);
    const exchange = startExchange(
      conn,
      source,
      head,
      body ? { kind: "bytes", bytes: body } : { kind: "none" },
    );
    if (headers.some(([, v]) => typeof v !== "string")) exchange.sent.then(() => head.fill(0));
    let final;
    try {
      final = await exchange.response;
    } catch (error) {
      if (error instanceof InvalidStatusLine) throw new HttpTransportError(error.message);
      throw error;
    }
    if (final === null) throw new HttpTransportError("connection closed before the response head");
    const responseHeaders = final.head.rawHeaders.map(([n, v]) =>
      [n.toLowerCase(), v] as [string, string]
    );
    return {
      status: final.status,
      headers: responseHeaders,
      url,
      body: bodyStream(source, responseFraming(method, final.status, responseHeaders), () => {
        source.cancel();
        close();
      }),
    };
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
  let headers: ReadonlyArray<HeaderField> = request.headers;
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
