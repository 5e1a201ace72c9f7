/**
 * A small HTTP/1.1 server on `Deno.listen` for sidecars that must see the
 * request exactly as sent (raw request-target, header names in their
 * original case and order, repeats kept) and stream bodies both ways.
 * `Deno.serve` normalises all of that away. One request per connection
 * (`connection: close`); bodies are pull streams, so a slow side slows the
 * other.
 *
 * @module
 */

import { type Logger, nullLogger } from "../log/logger.ts";
import { bodyStream, ByteSource, encodeChunk, LAST_CHUNK, requestFraming } from "./http1_body.ts";
import { encodeResponse, reasonPhrase } from "./http1.ts";
import { acceptConnections } from "./accept_loop.ts";

/** A request as received. */
export interface Http1Request {
  /** Method, as sent. */
  readonly method: string;
  /** Raw request-target, undecoded (`/v1/responses?x=1`). */
  readonly target: string;
  /** `HTTP/1.1` or `HTTP/1.0`. */
  readonly version: string;
  /** Header fields in original case and order, repeats kept. */
  readonly rawHeaders: Array<[string, string]>;
  /** The same, case-insensitive. */
  readonly headers: Headers;
  /** The body (empty when the request has none). */
  readonly body: ReadableStream<Uint8Array>;
  /** The client's address. */
  readonly remoteAddr: Deno.NetAddr;
}

/** A response to send. */
export interface Http1Response {
  /** Status code. */
  readonly status: number;
  /** Headers to send (framing headers are set here). */
  readonly headers?: ReadonlyArray<readonly [string, string]>;
  /** A body: bytes (sent with content-length) or a stream (chunked unless `contentLength`). */
  readonly body?: Uint8Array | ReadableStream<Uint8Array> | null;
  /** Length of a streamed body, when known. */
  readonly contentLength?: number;
  /** Runs after the response was written (or the client went away). */
  readonly onSent?: (completed: boolean) => void;
}

/** Handles one request. */
export type Http1Handler = (request: Http1Request) => Promise<Http1Response> | Http1Response;

/** A running server. */
export interface Http1Server {
  /** Bound address. */
  readonly addr: Deno.NetAddr;
  /** Stops accepting and closes open connections. */
  close(): Promise<void>;
  /** Resolves after {@linkcode close}. */
  readonly finished: Promise<void>;
}

const encoder = new TextEncoder();

function head(
  status: number,
  headers: ReadonlyArray<readonly [string, string]>,
  extra: string[],
): Uint8Array {
  let text = `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\n`;
  for (const [n, v] of headers) text += `${n}: ${v}\r\n`;
  for (const line of extra) text += `${line}\r\n`;
  return encoder.encode(text + "connection: close\r\n\r\n");
}

async function writeResponse(
  writer: WritableStreamDefaultWriter<Uint8Array>,
  response: Http1Response,
): Promise<void> {
  const headers = (response.headers ?? []).filter(([n]) =>
    !["content-length", "transfer-encoding", "connection"].includes(n.toLowerCase())
  );
  const body = response.body ?? null;
  if (body === null || body instanceof Uint8Array) {
    const bytes = body ?? new Uint8Array(0);
    await writer.write(head(response.status, headers, [`content-length: ${bytes.length}`]));
    if (bytes.length > 0) await writer.write(bytes);
    return;
  }
  const chunked = response.contentLength === undefined;
  await writer.write(
    head(response.status, headers, [
      chunked ? "transfer-encoding: chunked" : `content-length: ${response.contentLength}`,
    ]),
  );
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value.length === 0) continue;
      await writer.write(chunked ? encodeChunk(value) : value);
    }
    if (chunked) await writer.write(LAST_CHUNK);
  } catch (error) {
    await reader.cancel(error).catch(() => {});
    throw error;
  } finally {
    reader.releaseLock();
  }
}

const CONTINUE = encoder.encode("HTTP/1.1 100 Continue\r\n\r\n");

/** Answers `expect: 100-continue` when (and only when) the body is read. */
function continueFirst(
  body: ReadableStream<Uint8Array>,
  sendContinue: () => Promise<void>,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let sent = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!sent) {
        sent = true;
        await sendContinue();
      }
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}

/** Serves `handler` on `listener` (see the module documentation). */
export function serveHttp1(
  listener: Deno.Listener,
  handler: Http1Handler,
  options: { logger?: Logger; headTimeoutMs?: number } = {},
): Http1Server {
  const logger = options.logger ?? nullLogger;

  async function handle(conn: Deno.Conn): Promise<void> {
    const source = new ByteSource(conn.readable.getReader());
    const writer = conn.writable.getWriter();
    let completed = false;
    let response: Http1Response | null = null;
    try {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const parsed = await Promise.race([
        source.head(),
        new Promise<null>((
          resolve,
        ) => (timer = setTimeout(() => resolve(null), options.headTimeoutMs ?? 30_000))),
      ]).finally(() => clearTimeout(timer));
      if (parsed === null) return;
      const [method, target, version] = parsed.startLine;
      const rawHeaders = parsed.rawHeaders;
      let body = bodyStream(source, requestFraming(rawHeaders), () => {});
      if (parsed.headers.get("expect")?.toLowerCase() === "100-continue") {
        body = continueFirst(body, () => writer.write(CONTINUE));
      }
      response = await handler({
        method,
        target,
        version,
        rawHeaders,
        headers: parsed.headers,
        body,
        remoteAddr: conn.remoteAddr as Deno.NetAddr,
      });
      await writeResponse(writer, response);
      completed = true;
    } catch (error) {
      if (response === null) {
        await writer.write(encodeResponse(400, {}, "")).catch(() => {});
      }
      logger.debug("http1.request_failed", { error: (error as Error).message });
    } finally {
      response?.onSent?.(completed);
      await writer.close().catch(() => {});
      source.cancel();
      try {
        conn.close();
      } catch { /* closed */ }
    }
  }

  const loop = acceptConnections(listener, (conn) => handle(conn));
  return {
    addr: listener.addr as Deno.NetAddr,
    close: () => loop.close(),
    finished: loop.accepting,
  };
}
