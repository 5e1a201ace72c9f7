/**
 * The HTTP/1.1 proxy listener: absolute-form and origin-form (Host) requests
 * forwarded after the policy checks, in the reference's order, and CONNECT
 * tunnels — opaque, or intercepted when the mode or hooks require it.
 *
 * Deliberate differences from the reference: a CONNECT is answered `200`
 * only after the upstream connection is open, so an unreachable target is a
 * `502` (and a refused local address a `403`) instead of a silently closed
 * tunnel; a dial refused by the connect-time policy check is reported as a
 * `403 blocked-by-allowlist` (`not_allowed_local`) instead of a `502`.
 *
 * @module
 */

import { sniffTls } from "./tls_sniff.ts";
import type { Logger } from "../log/logger.ts";
import { ByteSource, connReader } from "../http1/body.ts";
import { reasonPhrase } from "../http1/head.ts";
import { concatBytes } from "../util/bytes.ts";
import { relay, writeAll } from "../util/conn_io.ts";
import {
  dialDirect,
  dialViaProxy,
  pickUpstream,
  PolicyDialError,
  type UpstreamProxies,
} from "./connector.ts";
import type { BlockReason, DecisionSource } from "./decision.ts";
import { addrText, normalizeHost } from "../util/host.ts";
import {
  type ExchangeControls,
  type ExchangeRequest,
  type ExchangeResponse,
  serveHttpExchanges,
  textResponse,
} from "../http1/exchange.ts";
import { forwardHttp, type ForwardTarget } from "./http_forward.ts";
import { methodAllowed } from "./policy.ts";
import { blockedJson, blockedMessage, proxyErrorHeader } from "./responses.ts";
import type { NetworkProxyState } from "./state.ts";
import type { UpstreamPool } from "./upstream_pool.ts";

/** Intercepts a tunnel (TLS termination and the inner request pipeline). */
export interface TunnelInterceptor {
  /** Takes over `client` for a tunnel to `host:port`; resolves when it is done. */
  intercept(
    client: Deno.Conn,
    leftover: Uint8Array | null,
    host: string,
    port: number,
    clientAddr: string,
  ): Promise<void>;
}

/** What the listeners share. */
export interface ListenerContext {
  /** The live policy. */
  readonly state: NetworkProxyState;
  /** Upstream proxies from the environment. */
  readonly upstreams: UpstreamProxies;
  /** TLS interception (present when `mitm` is on). */
  readonly mitm: TunnelInterceptor | null;
  /** Diagnostics. */
  readonly logger: Logger;
  /** Extra trust for https upstreams. */
  readonly caCerts?: string[];
  /** Kept-alive upstream connections. */
  readonly pool?: UpstreamPool;
}

interface Blocked {
  readonly host: string;
  readonly port?: number;
  readonly reason: BlockReason | string;
  readonly source: DecisionSource;
  readonly decision: "deny" | "ask";
}

/** Parses an authority `host:port` (IPv6 bracketed); `null` when it is not one. */
export function parseAuthority(
  text: string,
  defaultPort: number | null,
): { host: string; port: number } | null {
  const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d{1,5}))?$/.exec(text.trim());
  if (!m) return null;
  const host = m[1]!.replace(/^\[(.*)\]$/, "$1");
  const port = m[2] !== undefined ? Number(m[2]) : defaultPort;
  if (port === null || port < 1 || port > 65535) return null;
  return { host, port };
}

/**
 * Checks an absolute-form request's Host header: same host, and the same
 * port (or none, with the scheme's default port in the URI).
 */
export function validateAbsoluteHost(
  url: URL,
  hostHeader: string | null,
): "ok" | "mismatch" | "invalid" {
  if (hostHeader === null) return "ok";
  const m = /^(\[[^\]]*\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(hostHeader.trim());
  if (!m) return "invalid";
  const host = m[1]!.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  const urlHost = url.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (host !== urlHost) return "mismatch";
  const dflt = url.protocol === "https:" ? "443" : "80";
  const urlPort = url.port || dflt;
  if (m[2] !== undefined) return m[2] === urlPort ? "ok" : "mismatch";
  return urlPort === dflt ? "ok" : "mismatch";
}

/** One client connection of the HTTP listener. */
interface ClientConn {
  readonly ctx: ListenerContext;
  readonly conn: Deno.Conn;
  readonly source: ByteSource;
  /** The client's address (`ip:port`), as decisions and logs name it. */
  readonly client: string;
}

/** Serves one client connection of the HTTP listener. */
export async function handleHttpProxyConnection(
  ctx: ListenerContext,
  conn: Deno.Conn,
): Promise<void> {
  const peer: ClientConn = {
    ctx,
    conn,
    source: new ByteSource(connReader(conn)),
    client: addrText(conn.remoteAddr),
  };
  try {
    await serveHttpExchanges(peer.source, conn, async (request, controls) => {
      if (request.method === "CONNECT") {
        await serveConnect(peer, request);
        return "takeover";
      }
      return await serveForward(peer, request, controls);
    }, {
      onBadRequest: (error) =>
        ctx.logger.debug("proxy.bad_request", {
          client: peer.client,
          error: (error as Error).message,
        }),
    });
  } catch (error) {
    ctx.logger.debug("proxy.connection_failed", {
      client: peer.client,
      error: (error as Error).message,
    });
  } finally {
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

/** Records a blocked request and builds its 403 (JSON for plain requests, text for CONNECT). */
async function blockedResponse(
  peer: ClientConn,
  b: Blocked,
  method: string,
  protocol: string,
  policyProtocol: string,
  json: boolean,
): Promise<ExchangeResponse> {
  await peer.ctx.state.recordBlocked({
    host: b.host,
    reason: b.reason,
    client: peer.client,
    method,
    protocol,
    decision: b.decision,
    source: b.source,
    ...(b.port !== undefined ? { port: b.port } : {}),
  });
  const headers: Array<[string, string]> = [["x-proxy-error", proxyErrorHeader(b.reason)]];
  if (!json) return textResponse(403, blockedMessage(b.reason), headers);
  return textResponse(
    403,
    blockedJson({
      host: normalizeHost(b.host),
      reason: b.reason,
      decision: b.decision,
      source: b.source,
      protocol: policyProtocol,
      port: b.port,
    }),
    headers,
    "application/json",
  );
}

/** Audits a refusal by the mode or the proxy's state (not the host policy). */
function auditGuard(
  peer: ClientConn,
  host: string,
  port: number,
  method: string,
  protocol: string,
  reason: BlockReason,
): void {
  peer.ctx.state.audit({
    scope: "non_domain",
    decision: "deny",
    source: reason === "proxy_disabled" ? "proxy_state" : "mode_guard",
    reason,
    protocol,
    host,
    port,
    method,
    client: peer.client,
  });
}

/** The 503 of a disabled proxy, audited and recorded. */
async function disabledResponse(
  peer: ClientConn,
  host: string,
  port: number,
  method: string,
  protocol: string,
): Promise<ExchangeResponse> {
  auditGuard(peer, host, port, method, protocol, "proxy_disabled");
  await peer.ctx.state.recordBlocked({
    host,
    reason: "proxy_disabled",
    client: peer.client,
    method,
    protocol,
    port,
  });
  return textResponse(503, "network proxy is disabled");
}

/** Where an absolute-form or origin-form request goes, or the 400 it gets. */
function forwardTarget(request: ExchangeRequest): ForwardTarget | ExchangeResponse {
  if (/^https?:\/\//i.test(request.target)) {
    let url: URL;
    try {
      url = new URL(request.target);
    } catch {
      return textResponse(400, "missing host");
    }
    const check = validateAbsoluteHost(url, request.headers.get("host"));
    if (check === "invalid") return textResponse(400, "invalid Host header");
    if (check === "mismatch") return textResponse(400, "Host header does not match request target");
    const scheme = url.protocol === "https:" ? "https" : "http";
    return {
      scheme,
      host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: Number(url.port || (scheme === "https" ? 443 : 80)),
      path: `${url.pathname}${url.search}`,
    };
  }
  const hostHeader = request.headers.get("host");
  const parsed = hostHeader ? parseAuthority(hostHeader, 80) : null;
  if (!parsed || parsed.host === "" || !request.target.startsWith("/")) {
    return textResponse(400, "missing host");
  }
  return { scheme: "http", host: parsed.host, port: parsed.port, path: request.target };
}

/** A request for `x-unix-socket` (macOS only): refused by method or as unsupported. */
function unixSocketResponse(peer: ClientConn, method: string, allowedMethod: boolean) {
  if (!peer.ctx.state.config.enabled) return textResponse(503, "network proxy is disabled");
  if (!allowedMethod) {
    auditGuard(peer, "unix-socket", 0, method, "http", "method_not_allowed");
    return textResponse(
      403,
      JSON.stringify({ status: "blocked", host: "unix-socket", reason: "method_not_allowed" }),
      [["x-proxy-error", "blocked-by-method-policy"]],
      "application/json",
    );
  }
  auditGuard(peer, "unix-socket", 0, method, "http", "unix_socket_unsupported");
  return textResponse(501, "unix sockets unsupported");
}

/** A plain (non-CONNECT) request: checks in the reference's order, then forwarded. */
async function serveForward(
  peer: ClientConn,
  request: ExchangeRequest,
  controls: ExchangeControls,
): Promise<ExchangeResponse> {
  const { ctx } = peer;
  const config = ctx.state.config;
  const method = request.method;
  const allowedMethod = methodAllowed(config.mode, method);
  if (request.headers.has("x-unix-socket")) return unixSocketResponse(peer, method, allowedMethod);
  const target = forwardTarget(request);
  if (!("scheme" in target)) return target;
  if (!config.enabled) {
    return await disabledResponse(peer, target.host, target.port, method, "http");
  }
  const host = normalizeHost(target.host);
  const port = target.port;
  const refuse = (reason: string, source: DecisionSource, decision: "deny" | "ask") =>
    blockedResponse(peer, { host, port, reason, source, decision }, method, "http", "http", true);
  const decision = await ctx.state.evaluateHostPolicy({
    protocol: "http",
    host,
    port,
    method,
    clientAddr: peer.client,
  });
  if (!decision.allow) return await refuse(decision.reason, decision.source, decision.decision);
  if (!allowedMethod) {
    auditGuard(peer, host, port, method, "http", "method_not_allowed");
    return await refuse("method_not_allowed", "mode_guard", "deny");
  }
  try {
    return await forwardHttp(ctx, request, target, controls);
  } catch (error) {
    if (error instanceof PolicyDialError) {
      return await refuse("not_allowed_local", "baseline_policy", "deny");
    }
    ctx.state.metrics?.upstreamError("http");
    ctx.logger.debug("proxy.upstream_failed", { host, error: (error as Error).message });
    return { ...textResponse(502, "upstream failure"), close: true };
  }
}

/** Writes the answer to a CONNECT (only small, complete bodies occur). */
async function answerConnect(conn: Deno.Conn, response: ExchangeResponse): Promise<void> {
  const body = response.body instanceof Uint8Array ? response.body : new Uint8Array(0);
  const headers: Array<readonly [string, string]> = [
    ...response.headers,
    ["content-length", String(body.length)],
  ];
  if (response.status !== 200) headers.push(["connection", "close"]);
  let text = `HTTP/1.1 ${response.status} ${reasonPhrase(response.status)}\r\n`;
  for (const [n, v] of headers) text += `${n}: ${v}\r\n`;
  await writeAll(conn, concatBytes([new TextEncoder().encode(text + "\r\n"), body]));
}

/** A CONNECT: checked, then intercepted (limited mode, hooks) or tunnelled opaquely. */
async function serveConnect(peer: ClientConn, request: ExchangeRequest): Promise<void> {
  const { ctx, conn, source } = peer;
  const respond = (response: ExchangeResponse) => answerConnect(conn, response);
  const authority = parseAuthority(request.target, null);
  if (!authority) return await respond(textResponse(400, "missing authority"));
  const host = normalizeHost(authority.host);
  if (host === "") return await respond(textResponse(400, "invalid host"));
  const port = authority.port;
  const config = ctx.state.config;
  if (!config.enabled) {
    return await respond(await disabledResponse(peer, host, port, "CONNECT", "https_connect"));
  }
  const refuse = async (reason: string, source: DecisionSource, decision: "deny" | "ask") =>
    await respond(
      await blockedResponse(
        peer,
        { host, port, reason, source, decision },
        "CONNECT",
        "http-connect",
        "https_connect",
        false,
      ),
    );
  const decision = await ctx.state.evaluateHostPolicy({
    protocol: "https_connect",
    host,
    port,
    method: "CONNECT",
    clientAddr: peer.client,
  });
  if (!decision.allow) return await refuse(decision.reason, decision.source, decision.decision);
  const intercept = config.mode === "limited" || ctx.state.current.hooks.has(host);
  if (intercept && (!config.mitm || !ctx.mitm)) {
    auditGuard(peer, host, port, "CONNECT", "https_connect", "mitm_required");
    return await refuse("mitm_required", "mode_guard", "deny");
  }
  const leftover = source.takePending();
  if (intercept) {
    await respond({ status: 200, headers: [] });
    return await ctx.mitm!.intercept(conn, leftover, host, port, peer.client);
  }
  const dial = async (): Promise<{ upstream: Deno.Conn; leftover: Uint8Array | null }> => {
    const proxy = config.allow_upstream_proxy ? pickUpstream(ctx.upstreams, true) : null;
    if (!proxy) {
      return { upstream: await dialDirect(ctx.state, authority.host, port), leftover: null };
    }
    const via = await dialViaProxy(proxy, authority.host, port);
    return { upstream: via.conn, leftover: via.leftover };
  };
  if (ctx.state.broker?.binds(host) && ctx.mitm) {
    // A masked credential's host: TLS is intercepted (its stand-ins are
    // replaced there), anything else passes as is.
    await respond({ status: 200, headers: [] });
    const sniffed = await sniffTls(conn, leftover);
    if (sniffed.tls) {
      return await ctx.mitm.intercept(conn, sniffed.first as Uint8Array, host, port, peer.client);
    }
    let dialed;
    try {
      dialed = await dial();
    } catch (error) {
      ctx.state.metrics?.upstreamError("https_connect");
      ctx.logger.debug("proxy.connect_failed", { host, port, error: (error as Error).message });
      conn.close();
      return;
    }
    if (dialed.leftover?.length) await writeAll(conn, dialed.leftover);
    await relay(conn, dialed.upstream, { toUpstream: sniffed.first });
    return;
  }
  let dialed;
  try {
    dialed = await dial();
  } catch (error) {
    if (error instanceof PolicyDialError) {
      return await refuse("not_allowed_local", "baseline_policy", "deny");
    }
    ctx.state.metrics?.upstreamError("https_connect");
    ctx.logger.debug("proxy.connect_failed", { host, port, error: (error as Error).message });
    return await respond(textResponse(502, "upstream failure"));
  }
  await respond({ status: 200, headers: [] });
  if (dialed.leftover?.length) await writeAll(conn, dialed.leftover);
  await relay(conn, dialed.upstream, { toUpstream: leftover });
}
