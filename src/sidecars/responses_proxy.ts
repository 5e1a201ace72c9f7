/**
 * A loopback proxy for the OpenAI Responses API that injects the API key, so
 * unprivileged agent runs can use the API without ever holding the key
 * (the reference's `codex-responses-api-proxy`).
 *
 * Only an exact `POST /v1/responses` (raw request-target, no query, no
 * trailing slash) is forwarded; anything else is an empty `403`. With
 * `httpShutdown`, `GET /shutdown` answers `200` and asks the owner to stop.
 * Request headers go upstream with lower-cased names, minus the client's
 * `authorization` and `host`, plus `authorization: Bearer <key>` and the
 * upstream `host`. The upstream status and headers (minus `content-length`,
 * `transfer-encoding`, `connection`, `trailer`, `upgrade`) come back and
 * the body streams through as it arrives (server-sent events are not
 * held back); upstream failure is an empty `500`.
 *
 * The request body is buffered (as the reference does), up to
 * {@linkcode RESPONSES_PROXY_MAX_REQUEST_BYTES}; a larger one is an empty
 * `413`.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";
import { type HeaderField, httpRequest } from "../http/client.ts";
import { type Http1Request, type Http1Response, serveHttp1 } from "../http1/server.ts";
import { ExchangeDumper, type ResponseDump } from "./exchange_dump.ts";

/** The reference's default upstream. */
export const DEFAULT_RESPONSES_UPSTREAM = "https://api.openai.com/v1/responses";

/** Largest request body forwarded. */
export const RESPONSES_PROXY_MAX_REQUEST_BYTES = 256 * 1024 * 1024;

/** Options of {@linkcode startResponsesProxy}. */
export interface ResponsesProxyOptions {
  /** `Bearer <key>` as bytes (see `readApiKeyHeader`); wiped by `close()`. */
  readonly authorization: Uint8Array;
  /** Loopback port; `0` (default) picks a free one. */
  readonly port?: number;
  /** Upstream URL (default {@linkcode DEFAULT_RESPONSES_UPSTREAM}); may carry a query. */
  readonly upstreamUrl?: string;
  /** Enables `GET /shutdown`. */
  readonly httpShutdown?: boolean;
  /** Called after `GET /shutdown` was answered. */
  readonly onShutdown?: () => void;
  /** Directory for request/response dumps. */
  readonly dumpDir?: string;
  /** Extra CA certificates (PEM) trusted for an https upstream. */
  readonly caCerts?: string[];
  /** Receives human-readable diagnostics (default: stderr). */
  readonly report?: (line: string) => void;
}

/** A running proxy. */
export interface ResponsesProxy {
  /** The bound loopback address. */
  readonly addr: Deno.NetAddr;
  /** Stops serving, cuts open exchanges and wipes the key. */
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "trailer",
  "upgrade",
]);
// Request headers that describe this hop's framing, not the forwarded request.
// The body is buffered and sent with our own Content-Length: the client's
// framing fields never go upstream.
const REQUEST_FRAMING = new Set([
  "content-length",
  "transfer-encoding",
  "expect",
  "connection",
  "keep-alive",
  "te",
]);
const VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function reportToStderr(line: string): void {
  try {
    Deno.stderr.writeSync(new TextEncoder().encode(line + "\n"));
  } catch { /* stderr gone */ }
}

/** Parses and checks an upstream URL; throws with the reference's texts. */
export function parseUpstreamUrl(text: string): { url: URL; host: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch (error) {
    throw new Error(`parsing --upstream-url: ${(error as Error).message}`, { cause: error });
  }
  if (url.hostname === "" || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new Error("upstream URL must include a host");
  }
  // `host[:port]`, the port only when the URL spells it out.
  const authority = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?([^/?#]*)/i.exec(text)?.[1] ?? url.host;
  const port = /:(\d+)$/.exec(authority)?.[1];
  return { url, host: port === undefined ? url.hostname : `${url.hostname}:${port}` };
}

async function readAll(
  body: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array | null> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) return null;
    chunks.push(chunk);
  }
  return concatBytes(chunks, size);
}

/** Starts the proxy on `127.0.0.1` (see the module documentation). */
export async function startResponsesProxy(options: ResponsesProxyOptions): Promise<ResponsesProxy> {
  const report = options.report ?? reportToStderr;
  const upstream = parseUpstreamUrl(options.upstreamUrl ?? DEFAULT_RESPONSES_UPSTREAM);
  const dumper = options.dumpDir === undefined
    ? null
    : await ExchangeDumper.create(options.dumpDir, report);
  const authorization = options.authorization;
  const inflight = new Set<AbortController>();

  const empty = (status: number): Http1Response => ({ status, body: null });

  async function forward(request: Http1Request): Promise<Http1Response> {
    const body = await readAll(request.body, RESPONSES_PROXY_MAX_REQUEST_BYTES);
    if (body === null) return empty(413);
    let dump: ResponseDump | null = null;
    if (dumper) {
      dump = await dumper.request(request.method, request.target, request.rawHeaders, body);
    }
    const headers: HeaderField[] = [];
    for (const [name, value] of request.rawHeaders) {
      const lower = name.toLowerCase();
      if (lower === "authorization" || lower === "host" || REQUEST_FRAMING.has(lower)) continue;
      if (!NAME.test(name) || !VALUE.test(value)) continue;
      headers.push([lower, value]);
    }
    headers.push(["authorization", authorization], ["host", upstream.host]);
    const abort = new AbortController();
    inflight.add(abort);
    let response;
    try {
      response = await httpRequest({
        method: "POST",
        url: upstream.url,
        headers,
        body,
        redirect: "stop",
        signal: abort.signal,
        ...(options.caCerts ? { caCerts: options.caCerts } : {}),
      });
    } catch (error) {
      inflight.delete(abort);
      report(`forwarding error: forwarding request to upstream: ${(error as Error).message}`);
      await dump?.write();
      return empty(500);
    }
    dump?.head(response.status, response.headers);
    const length = response.headers.find(([n]) => n === "content-length")?.[1];
    const contentLength = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
    return {
      status: response.status,
      headers: response.headers.filter(([n]) => !HOP_BY_HOP.has(n)),
      body: dump ? dump.tee(response.body) : response.body,
      ...(contentLength !== undefined ? { contentLength } : {}),
      onSent: () => inflight.delete(abort),
    };
  }

  const listener = Deno.listen({ hostname: "127.0.0.1", port: options.port ?? 0 });
  const server = serveHttp1(listener, async (request) => {
    if (options.httpShutdown && request.method === "GET" && request.target === "/shutdown") {
      await request.body.cancel();
      return { status: 200, body: null, onSent: () => options.onShutdown?.() };
    }
    if (request.method !== "POST" || request.target !== "/v1/responses") {
      await request.body.cancel();
      return empty(403);
    }
    return await forward(request);
  });

  let closing: Promise<void> | null = null;
  return {
    addr: server.addr,
    close() {
      closing ??= (async () => {
        for (const abort of inflight) abort.abort();
        await server.close();
        authorization.fill(0);
      })();
      return closing;
    },
  };
}
