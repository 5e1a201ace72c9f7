/**
 * The HTTP/1.1 server loop, over any byte stream (a client connection, or
 * the decrypted inside of an intercepted TLS tunnel): requests one after
 * another on a kept-alive connection, the request exactly as sent (raw
 * target, header names in their case and order, repeats kept), streamed
 * bodies both ways, informational responses passed through, ambiguous
 * framing refused with 400, and responses framed for the client (length,
 * chunked, or close-delimited for HTTP/1.0). The egress proxy serves
 * through it directly; `server.ts` puts it on a listener.
 *
 * @module
 */

import { HttpHeadError, reasonPhrase } from "./head.ts";
import { bodyStream, type ByteSource, encodeChunk, LAST_CHUNK, requestFraming } from "./body.ts";
import { type ByteWriter, writeAll } from "../util/conn_io.ts";

/** A request as received. */
export interface ExchangeRequest {
  /** Method. */
  readonly method: string;
  /** Request-target, raw. */
  readonly target: string;
  /** `HTTP/1.1` or `HTTP/1.0`. */
  readonly version: string;
  /** Header fields in order with repeats. */
  readonly rawHeaders: Array<[string, string]>;
  /** The same, case-insensitive. */
  readonly headers: Headers;
  /** The body (empty stream when none). */
  readonly body: ReadableStream<Uint8Array>;
  /**
   * How the body was framed by the client, for re-framing it upstream:
   * none, chunked, or its exact length. The client's own framing fields are
   * never forwarded.
   */
  readonly bodyFraming: "none" | "chunked" | number;
}

/** A response to write. */
export interface ExchangeResponse {
  /** Status. */
  readonly status: number;
  /** Reason phrase (default: a standard one). */
  readonly reason?: string;
  /** Header fields (framing fields are set by the loop). */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** Bytes, a stream, or nothing. */
  readonly body?: Uint8Array | ReadableStream<Uint8Array> | null;
  /** Length of a streamed body, when known. */
  readonly contentLength?: number;
  /** No body by definition (HEAD, 204, 304): headers are sent as they are. */
  readonly noBody?: boolean;
  /** Close the connection after this response. */
  readonly close?: boolean;
  /** Resolves true once the request body was read to its end (keep-alive needs it). */
  readonly requestDone?: Promise<boolean>;
  /** Runs once the response was written (true) or could not be (false). */
  readonly onSent?: (completed: boolean) => void;
}

/** What the handler may do besides answering. */
export interface ExchangeControls {
  /** Sends a 1xx response before the final one. */
  informational(
    status: number,
    reason: string,
    headers: ReadonlyArray<readonly [string, string]>,
  ): Promise<void>;
}

/** Handles one request: a response, or `takeover` when it owns the connection now (CONNECT). */
export type ExchangeHandler = (
  request: ExchangeRequest,
  controls: ExchangeControls,
) => Promise<ExchangeResponse | "takeover">;

const encoder = new TextEncoder();
const FRAMING = new Set(["content-length", "transfer-encoding", "connection", "keep-alive"]);

/** A small text response. */
export function textResponse(
  status: number,
  body: string,
  headers: ReadonlyArray<readonly [string, string]> = [],
  contentType = "text/plain",
): ExchangeResponse {
  return {
    status,
    headers: [["content-type", contentType], ...headers],
    body: encoder.encode(body),
  };
}

function wantsClose(request: { version: string; headers: Headers }): boolean {
  const tokens = (request.headers.get("connection") ?? "").toLowerCase().split(",").map((t) =>
    t.trim()
  );
  if (tokens.includes("close")) return true;
  return request.version === "HTTP/1.0" && !tokens.includes("keep-alive");
}

function head(
  status: number,
  reason: string | undefined,
  headers: ReadonlyArray<readonly [string, string]>,
  extra: string[],
): Uint8Array {
  let text = `HTTP/1.1 ${status} ${reason ?? reasonPhrase(status)}\r\n`;
  for (const [n, v] of headers) text += `${n}: ${v}\r\n`;
  for (const line of extra) text += `${line}\r\n`;
  return encoder.encode(text + "\r\n");
}

/** Writes `response`; returns false when the connection must close after it. */
async function writeResponse(
  writer: ByteWriter,
  response: ExchangeResponse,
  keepAlive: boolean,
  http11: boolean,
): Promise<boolean> {
  const close = !keepAlive || response.close === true;
  const connection = close ? ["connection: close"] : [];
  if (response.noBody) {
    const headers = response.headers.filter(([n]) =>
      !["connection", "keep-alive", "transfer-encoding"].includes(n.toLowerCase())
    );
    await writeAll(writer, head(response.status, response.reason, headers, connection));
    return !close;
  }
  const headers = response.headers.filter(([n]) => !FRAMING.has(n.toLowerCase()));
  const body = response.body ?? null;
  if (body === null || body instanceof Uint8Array) {
    const bytes = body ?? new Uint8Array(0);
    const h = head(response.status, response.reason, headers, [
      `content-length: ${bytes.length}`,
      ...connection,
    ]);
    if (bytes.length > 0 && bytes.length < 16 * 1024) {
      const both = new Uint8Array(h.length + bytes.length);
      both.set(h);
      both.set(bytes, h.length);
      await writeAll(writer, both);
    } else {
      await writeAll(writer, h);
      if (bytes.length) await writeAll(writer, bytes);
    }
    return !close;
  }
  let mode: "length" | "chunked" | "close";
  if (response.contentLength !== undefined) mode = "length";
  else if (http11) mode = "chunked";
  else mode = "close";
  const framing = mode === "length"
    ? [`content-length: ${response.contentLength}`]
    : mode === "chunked"
    ? ["transfer-encoding: chunked"]
    : [];
  const closing = close || mode === "close";
  await writeAll(
    writer,
    head(response.status, response.reason, headers, [
      ...framing,
      ...(closing ? ["connection: close"] : []),
    ]),
  );
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value.length === 0) continue;
      await writeAll(writer, mode === "chunked" ? encodeChunk(value) : value);
    }
    if (mode === "chunked") await writeAll(writer, LAST_CHUNK);
  } catch (error) {
    await reader.cancel(error).catch(() => {});
    return false; // the client saw a truncated body: the connection cannot continue
  } finally {
    reader.releaseLock();
  }
  return !closing;
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

/** Reads what is left of a body, up to `limit` bytes; false if there was more or it failed. */
async function drain(body: ReadableStream<Uint8Array>, limit: number): Promise<boolean> {
  if (body.locked) return false;
  let total = 0;
  try {
    for await (const chunk of body) {
      total += chunk.length;
      if (total > limit) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** Options of {@linkcode serveHttpExchanges}. */
export interface ExchangeOptions {
  /** Wait for the next request this long (default 60 s). */
  readonly idleTimeoutMs?: number;
  /** Largest request head (default 64 KiB). */
  readonly maxHeadBytes?: number;
  /** Called when a request head could not be parsed. */
  readonly onBadRequest?: (error: unknown) => void;
  /**
   * Answer `expect: 100-continue` with `100 Continue` when the handler
   * first reads the body (default: the handler deals with it).
   */
  readonly continueOnRead?: boolean;
}

/**
 * Serves requests from `source`, answering on `writer`, until the client
 * closes, a response requires closing, or the handler takes over.
 * Returns `takeover` in that last case.
 */
export async function serveHttpExchanges(
  source: ByteSource,
  writer: ByteWriter,
  handler: ExchangeHandler,
  options: ExchangeOptions = {},
): Promise<"closed" | "takeover"> {
  const idleMs = options.idleTimeoutMs ?? 60_000;
  const controls: ExchangeControls = {
    informational: (status, reason, headers) => writeAll(writer, head(status, reason, headers, [])),
  };
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let parsed;
    try {
      parsed = await Promise.race([
        source.head(options.maxHeadBytes ?? 64 * 1024),
        new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), idleMs))),
      ]);
    } catch (error) {
      options.onBadRequest?.(error);
      const status = error instanceof HttpHeadError ? error.status : 400;
      await writeAll(
        writer,
        head(status, undefined, [["content-type", "text/plain"]], [
          "content-length: 0",
          "connection: close",
        ]),
      ).catch(() => {});
      return "closed";
    } finally {
      clearTimeout(timer);
    }
    if (parsed === null) return "closed";
    const [method, target, version] = parsed.startLine;
    if (!/^HTTP\/1\.[01]$/.test(version)) {
      await writeAll(writer, head(400, undefined, [], ["content-length: 0", "connection: close"]))
        .catch(() => {});
      return "closed";
    }
    let framing;
    try {
      framing = requestFraming(parsed.rawHeaders);
    } catch {
      await writeAll(writer, head(400, undefined, [], ["content-length: 0", "connection: close"]))
        .catch(() => {});
      return "closed";
    }
    let body = bodyStream(source, framing, () => {});
    if (options.continueOnRead && parsed.headers.get("expect")?.toLowerCase() === "100-continue") {
      body = continueFirst(body, () => writeAll(writer, CONTINUE));
    }
    const request: ExchangeRequest = {
      method,
      target,
      version,
      rawHeaders: parsed.rawHeaders,
      headers: parsed.headers,
      bodyFraming: framing.kind === "length"
        ? framing.remaining
        : framing.kind === "chunked"
        ? "chunked"
        : "none",
      body,
    };
    const keepAlive = !wantsClose(request);
    const response = await handler(request, controls);
    if (response === "takeover") return "takeover";
    let written = false;
    const again = await writeResponse(writer, response, keepAlive, version === "HTTP/1.1")
      .then((again) => (written = true, again), () => false);
    response.onSent?.(written);
    if (!again) return "closed";
    const bodyDone = response.requestDone
      ? await response.requestDone
      : await drain(request.body, 1024 * 1024);
    if (!bodyDone) return "closed";
  }
}
