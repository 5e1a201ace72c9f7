/**
 * Forwarding one HTTP request upstream — plain requests from the HTTP
 * listener and decrypted requests inside an intercepted tunnel — with
 * hop-by-hop headers removed both ways, the body streamed up while the
 * response is read (so `expect: 100-continue` works), informational
 * responses passed back, and the response body streamed down.
 *
 * @module
 */

import { bodyStream, ByteSource, connReader, responseFraming } from "../http1/body.ts";
import { encodeRequestHead } from "../http1/head.ts";
import { InvalidStatusLine, startExchange } from "../http1/client.ts";
import {
  dialDirect,
  dialProxy,
  dialViaProxy,
  pickUpstream,
  proxyAuthorization,
  type UpstreamProxies,
} from "./connector.ts";
import type { ExchangeControls, ExchangeRequest, ExchangeResponse } from "../http1/exchange.ts";
import type { NetworkProxyState } from "./state.ts";
import type { PooledConnection, UpstreamPool } from "./upstream_pool.ts";
import { bracketHost } from "../util/host.ts";

/** Where a request goes. */
export interface ForwardTarget {
  /** `http` or `https`. */
  readonly scheme: "http" | "https";
  /** Host (IPv6 without brackets). */
  readonly host: string;
  /** Port. */
  readonly port: number;
  /** Origin-form target (`/path?query`). */
  readonly path: string;
}

/** What forwarding needs. */
export interface ForwardContext {
  /** The live policy (resolver, local-binding rule). */
  readonly state: NetworkProxyState;
  /** Upstream proxies from the environment. */
  readonly upstreams: UpstreamProxies;
  /** Trust for https upstreams (added to the system roots). */
  readonly caCerts?: string[];
  /** Kept-alive direct upstream connections. */
  readonly pool?: UpstreamPool;
}

const HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "te",
];

/**
 * Removes hop-by-hop fields: everything named in `Connection`, then
 * Connection, Keep-Alive, Proxy-Connection, Proxy-Authorization, Trailer,
 * Transfer-Encoding, Upgrade, TE. Host and X-Forwarded-For stay.
 */
export function stripHopByHop(
  headers: ReadonlyArray<readonly [string, string]>,
): Array<[string, string]> {
  const named = new Set(HOP_BY_HOP);
  for (const [n, v] of headers) {
    if (n.toLowerCase() === "connection") {
      for (const t of v.split(",")) named.add(t.trim().toLowerCase());
    }
  }
  return headers.filter(([n]) => !named.has(n.toLowerCase())).map(([n, v]) => [n, v]);
}

/** The upstream is unreachable or broke the exchange. */
export class UpstreamError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UpstreamError";
  }
}

async function open(
  ctx: ForwardContext,
  target: ForwardTarget,
): Promise<{ conn: Deno.Conn; absolute: boolean }> {
  const config = ctx.state.config;
  const proxy = config.allow_upstream_proxy
    ? pickUpstream(ctx.upstreams, target.scheme === "https")
    : null;
  const tls = (conn: Deno.Conn) =>
    Deno.startTls(conn as Deno.TcpConn, {
      hostname: target.host,
      ...(ctx.caCerts ? { caCerts: ctx.caCerts } : {}),
    });
  if (proxy && target.scheme === "http") return { conn: await dialProxy(proxy), absolute: true };
  if (proxy) {
    const { conn, leftover } = await dialViaProxy(proxy, target.host, target.port);
    if (leftover?.length) {
      conn.close();
      throw new UpstreamError("upstream proxy sent data before the TLS handshake");
    }
    return { conn: await tls(conn), absolute: false };
  }
  const conn = await dialDirect(ctx.state, target.host, target.port);
  return { conn: target.scheme === "https" ? await tls(conn) : conn, absolute: false };
}

function authority(target: ForwardTarget): string {
  const host = bracketHost(target.host);
  const dflt = target.scheme === "https" ? 443 : 80;
  return target.port === dflt ? host : `${host}:${target.port}`;
}

/**
 * Sends `request` to `target` and returns the response to relay. Dial
 * failures throw (a `PolicyDialError` for refused local targets, else
 * {@linkcode UpstreamError}). Direct connections are reused from and
 * returned to `ctx.pool`; a reused connection the origin had closed is
 * retried once on a fresh one when the request has no body.
 */
export async function forwardHttp(
  ctx: ForwardContext,
  request: ExchangeRequest,
  target: ForwardTarget,
  controls: ExchangeControls,
  headers: ReadonlyArray<readonly [string, string]> = stripHopByHop(request.rawHeaders),
): Promise<ExchangeResponse> {
  const bodiless = request.headers.get("content-length") === null &&
    request.headers.get("transfer-encoding") === null;
  // A kept-alive connection may have been closed by the origin meanwhile;
  // only requests that can be retried (no body) take one.
  const pooled = ctx.pool && bodiless &&
      !(ctx.state.config.allow_upstream_proxy &&
        pickUpstream(ctx.upstreams, target.scheme === "https"))
    ? ctx.pool.take(poolKey(target))
    : null;
  if (pooled) {
    try {
      return await exchange(ctx, request, target, controls, headers, pooled, true);
    } catch (error) {
      if (!(error instanceof StaleConnection)) throw error;
    }
  }
  return await exchange(ctx, request, target, controls, headers, null, false);
}

/** A reused connection turned out to be closed before any response byte. */
class StaleConnection extends UpstreamError {}

function poolKey(target: ForwardTarget): string {
  return `${target.scheme}://${target.host}:${target.port}`;
}

async function exchange(
  ctx: ForwardContext,
  request: ExchangeRequest,
  target: ForwardTarget,
  controls: ExchangeControls,
  headers: ReadonlyArray<readonly [string, string]>,
  reused: PooledConnection | null,
  isReuse: boolean,
): Promise<ExchangeResponse> {
  let conn: Deno.Conn;
  let absolute = false;
  let source: ByteSource;
  if (reused) {
    conn = reused.conn;
    source = reused.source;
  } else {
    ({ conn, absolute } = await open(ctx, target));
    source = new ByteSource(connReader(conn));
  }
  const poolable = !absolute && ctx.pool !== undefined;
  const close = () => {
    try {
      conn.close();
    } catch { /* closed */ }
  };
  // The body is always framed by us, from how it was read: the client's
  // Content-Length / Transfer-Encoding never reach the upstream.
  const chunked = request.bodyFraming === "chunked";
  const proxyUrl = absolute ? pickUpstream(ctx.upstreams, false) : null;
  const requestTarget = absolute
    ? `${target.scheme}://${authority(target)}${target.path}`
    : target.path;
  const fields: Array<readonly [string, string]> = headers.filter(([n]) => {
    const lower = n.toLowerCase();
    return lower !== "content-length" && lower !== "transfer-encoding";
  });
  if (!fields.some(([n]) => n.toLowerCase() === "host")) fields.push(["host", authority(target)]);
  if (chunked) fields.push(["transfer-encoding", "chunked"]);
  else if (typeof request.bodyFraming === "number") {
    fields.push(["content-length", String(request.bodyFraming)]);
  }
  const auth = proxyUrl ? proxyAuthorization(proxyUrl) : null;
  if (auth) fields.push(["proxy-authorization", auth]);
  if (!poolable) fields.push(["connection", "close"]);
  const head = encodeRequestHead(request.method, requestTarget, fields);

  const exchange = startExchange(
    conn,
    source,
    head,
    { kind: "stream", stream: request.body, chunked },
    (interim, status) =>
      controls.informational(status, interim.startLine[2], stripHopByHop(interim.rawHeaders)),
  );
  const bodyDone = exchange.sent;
  // A reused connection the origin had closed: nothing was sent back, and
  // nothing of the body was consumed, so the request can go again.
  const stale = () => {
    const { bodyStarted, headSeen } = exchange.progress();
    return isReuse && !bodyStarted && !headSeen;
  };
  try {
    let final;
    try {
      final = await exchange.response;
    } catch (error) {
      if (error instanceof InvalidStatusLine) {
        throw new UpstreamError("invalid upstream status line");
      }
      if (stale()) throw new StaleConnection((error as Error).message);
      throw error;
    }
    if (final === null) {
      if (stale()) throw new StaleConnection("reused connection was closed");
      throw new UpstreamError("upstream closed before answering");
    }
    const parsed = final.head;
    const status = final.status;
    const responseHeaders = stripHopByHop(parsed.rawHeaders);
    const framing = responseFraming(request.method, status, parsed.rawHeaders);
    const keepAlive = poolable && parsed.startLine[0] === "HTTP/1.1" &&
      framing.kind !== "close" &&
      !/(^|,)\s*close\s*(,|$)/i.test(parsed.headers.get("connection") ?? "");
    const finish = () => {
      bodyDone.then((ok) => {
        if (ok && keepAlive && source.takePending() === null) {
          ctx.pool!.give(poolKey(target), { conn, source });
        } else close();
      });
    };
    const base = {
      status,
      reason: parsed.startLine[2],
      headers: responseHeaders,
      requestDone: bodyDone,
    };
    if (framing.kind === "none") {
      finish();
      const noBody = request.method === "HEAD" || status === 204 || status === 304;
      return noBody ? { ...base, noBody: true } : { ...base, body: new Uint8Array(0) };
    }
    // Only a body read to its very end leaves the connection reusable.
    const body = bodyStream(source, framing, (complete) => (complete ? finish() : close()));
    return {
      ...base,
      body,
      ...(framing.kind === "length" ? { contentLength: framing.remaining } : {}),
    };
  } catch (error) {
    close();
    if (error instanceof UpstreamError) throw error;
    throw new UpstreamError((error as Error).message, { cause: error });
  }
}
