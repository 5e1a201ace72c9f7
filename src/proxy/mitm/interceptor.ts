/**
 * TLS interception: terminates TLS inside a CONNECT or SOCKS5 tunnel with a
 * certificate minted for the tunnel's target (chosen by target, not SNI, so
 * IP targets work), then runs every inner request through the policy again
 * — host must match the tunnel, the local-address re-check, MITM hooks, the
 * limited-mode method clamp — and forwards it over TLS verified against the
 * system roots plus the startup CAs.
 *
 * Why `node:tls`: `Deno.startTls` is client-only and `Deno.listenTls` picks
 * one certificate per listener (its per-SNI resolver is a hidden, unstable
 * symbol that caches failures and cannot tell IP targets apart), so the
 * Deno-native route needs a loopback hop per host. `new tls.TLSSocket(duplex,
 * { isServer: true })` over a `Duplex` wrapping the accepted `Deno.Conn`
 * works on Deno 2.9 (fixed upstream in denoland/deno#33303; an end-to-end
 * test guards it), adds no extra socket, and was the fastest option
 * measured. ALPN offers only `http/1.1`, matching the inner HTTP/1.1 parser.
 *
 * @module
 */

import tls from "node:tls";
import { join } from "node:path";
import { ByteSource } from "../../http1/body.ts";
import type { UpstreamProxies } from "../connector.ts";
import type { UpstreamPool } from "../upstream_pool.ts";
import { PolicyDialError } from "../connector.ts";
import { bracketHost, formatHostPort, normalizeHost } from "../../util/host.ts";
import {
  type ExchangeControls,
  type ExchangeRequest,
  type ExchangeResponse,
  serveHttpExchanges,
  textResponse,
} from "../../http1/exchange.ts";
import { forwardHttp, stripHopByHop } from "../http_forward.ts";
import type { TunnelInterceptor } from "../http_proxy.ts";
import { applyHookActions } from "../mitm_hooks.ts";
import { hostBlocked, methodAllowed } from "../policy.ts";
import { blockedMessage, proxyErrorHeader } from "../responses.ts";
import type { NetworkProxyState } from "../state.ts";
import type { Logger } from "../../log/logger.ts";
import { lockFile } from "../../util/file_lock.ts";
import {
  isManagedTrustBundlePath,
  pruneArtifacts,
  sha256Hex,
  writeAtomicCreateNewOrReuse,
} from "./files.ts";
import { connDuplex, nodeReader, nodeWriter } from "./node_streams.ts";
import { startupCertificates, systemCertificates, uniqueCertificates } from "./trust.ts";
import { generateMitmCa, type MitmCa } from "./x509.ts";

/** Options of {@linkcode createMitm}. */
export interface MitmOptions {
  /** Directory holding `proxy/` (Codex: `$CODEX_HOME`, default `~/.codex`). */
  readonly home: string;
  /** Startup environment (CA variables). */
  readonly env?: (name: string) => string | undefined;
  /** Leaf certificates kept (default 1024). */
  readonly leafCacheSize?: number;
  /** TLS handshake deadline (default 10 s). */
  readonly handshakeTimeoutMs?: number;
}

/** A running interceptor. */
export interface Mitm extends TunnelInterceptor {
  /** The CA certificate file. */
  readonly caCertPath: string;
  /** The CA certificate (PEM). */
  readonly caCertPem: string;
  /** The trust bundle for children. */
  readonly trustBundlePath: string;
  /** Releases the CA lease. */
  close(): Promise<void>;
}

/** The default home: `$CODEX_HOME`, else `~/.codex`. */
export function defaultMitmHome(
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
): string {
  return env("CODEX_HOME") ?? join(env("HOME") ?? "/tmp", ".codex");
}

/** Creates the CA, its files and the interceptor. */
export async function createMitm(
  state: NetworkProxyState,
  ctx: { upstreams: UpstreamProxies; logger: Logger; caCerts?: string[]; pool?: UpstreamPool },
  options: MitmOptions,
): Promise<Mitm> {
  const trust = await prepareTrust(ctx.logger, options);
  const inside: InsideContext = {
    state,
    logger: ctx.logger,
    forward: {
      state,
      upstreams: ctx.upstreams,
      ...(ctx.pool ? { pool: ctx.pool } : {}),
      caCerts: uniqueCertificates([...(ctx.caCerts ?? []), ...trust.startup], [trust.ca.certPem]),
    },
  };
  const leaves = new LeafCache(trust.ca, options.leafCacheSize ?? 1024);
  return {
    caCertPath: trust.caCertPath,
    caCertPem: trust.ca.certPem,
    trustBundlePath: trust.trustBundlePath,
    async intercept(conn, leftover, host, port, client) {
      const duplex = connDuplex(conn, leftover);
      let socket: tls.TLSSocket | null = null;
      let intercepted = false;
      try {
        socket = new tls.TLSSocket(duplex, {
          isServer: true,
          secureContext: await leaves.get(host),
          ALPNProtocols: ["http/1.1"],
        });
        await handshake(socket, options.handshakeTimeoutMs ?? 10_000);
        intercepted = true;
        state.metrics?.intercept("success");
        const s = socket;
        await serveHttpExchanges(
          new ByteSource(nodeReader(s)),
          nodeWriter(s),
          (request, controls) => serveInside(inside, request, host, port, client, controls),
        );
      } catch (error) {
        if (!intercepted) state.metrics?.intercept("error");
        ctx.logger.debug("proxy.mitm_failed", { host, client, error: (error as Error).message });
      } finally {
        if (socket) await closeTls(socket);
        duplex.destroy();
      }
    },
    close() {
      trust.lease?.release();
      return Promise.resolve();
    },
  };
}

/** The CA, its files under `home/proxy`, and the trust bundle children get. */
async function prepareTrust(logger: Logger, options: MitmOptions) {
  const env = options.env ?? ((n: string) => Deno.env.get(n));
  const dir = join(options.home, "proxy");
  await Deno.mkdir(dir, { recursive: true });
  const ca: MitmCa = await generateMitmCa();
  const hash = await sha256Hex(ca.certPem);
  const caCertPath = join(dir, `ca-${hash}.pem`);
  const lease = await lockFile(join(dir, `.ca-${hash}.pem.lock`), false, true);
  await writeAtomicCreateNewOrReuse(caCertPath, new TextEncoder().encode(ca.certPem));
  await pruneArtifacts(dir).catch((error) =>
    logger.warn("proxy.prune_failed", { error: (error as Error).message })
  );
  const startup = await startupCertificates(env, (p) => isManagedTrustBundlePath(p, options.home));
  const bundle = [
    ...uniqueCertificates([...(await systemCertificates()), ...startup], [ca.certPem]),
    ca.certPem,
  ].join("");
  const bundleBytes = new TextEncoder().encode(bundle);
  const trustBundlePath = join(dir, `ca-bundle-${await sha256Hex(bundleBytes)}.pem`);
  await writeAtomicCreateNewOrReuse(trustBundlePath, bundleBytes);
  return { ca, caCertPath, trustBundlePath, lease, startup };
}

/** Leaf certificates by host, minted on first use, least recently used dropped beyond `size`. */
class LeafCache {
  readonly #leaves = new Map<string, Promise<tls.SecureContext>>();
  constructor(readonly ca: MitmCa, readonly size: number) {}

  get(host: string): Promise<tls.SecureContext> {
    let leaf = this.#leaves.get(host);
    if (leaf) {
      this.#leaves.delete(host);
      this.#leaves.set(host, leaf);
      return leaf;
    }
    leaf = this.ca.mintLeaf(host).then(({ certPem, keyPem }) =>
      tls.createSecureContext({ cert: certPem, key: keyPem })
    );
    leaf.catch(() => this.#leaves.delete(host));
    this.#leaves.set(host, leaf);
    if (this.#leaves.size > this.size) this.#leaves.delete(this.#leaves.keys().next().value!);
    return leaf;
  }
}

/** Waits for the client's TLS handshake (or its failure, its close, the timeout). */
async function handshake(socket: tls.TLSSocket, timeoutMs: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("TLS handshake timed out")), timeoutMs);
    socket.once("secure", () => {
      clearTimeout(timer);
      resolve();
    });
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.once("close", () => {
      clearTimeout(timer);
      reject(new Error("client closed during the TLS handshake"));
    });
  });
  socket.on("error", () => {});
}

/** Sends close_notify and gives it a moment to leave before tearing down. */
async function closeTls(socket: tls.TLSSocket): Promise<void> {
  socket.on("error", () => {});
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 1000);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
    socket.end();
  });
  socket.destroy();
}

/** What requests inside intercepted tunnels need. */
interface InsideContext {
  readonly state: NetworkProxyState;
  readonly logger: Logger;
  readonly forward: Parameters<typeof forwardHttp>[0];
}

/** One request inside a tunnel to `host:port`: host, local, hook and method checks, then forwarded. */
async function serveInside(
  inside: InsideContext,
  request: ExchangeRequest,
  host: string,
  port: number,
  client: string,
  controls: ExchangeControls,
): Promise<ExchangeResponse> {
  const { state } = inside;
  const block = async (reason: string, source: "baseline_policy" | "mode_guard") => {
    state.audit({
      scope: reason === "not_allowed_local" ? "domain" : "non_domain",
      decision: "deny",
      source,
      reason,
      protocol: "https",
      host,
      port,
      method: request.method,
      client,
    });
    await state.recordBlocked({
      host,
      reason,
      client,
      method: request.method,
      protocol: "https",
      decision: "deny",
      source,
      port,
    });
    return textResponse(403, blockedMessage(reason), [[
      "x-proxy-error",
      proxyErrorHeader(reason),
    ]]);
  };
  if (request.method === "CONNECT") return textResponse(405, "CONNECT not supported inside MITM");
  let path = request.target;
  let requestHost = request.headers.get("host");
  if (/^https?:\/\//i.test(request.target)) {
    try {
      const url = new URL(request.target);
      requestHost ??= url.host;
      path = `${url.pathname}${url.search}`;
    } catch {
      return textResponse(400, "host mismatch");
    }
  }
  if (requestHost === null || normalizeHost(requestHost) !== host) {
    return textResponse(400, "host mismatch");
  }
  const current = state.current;
  const verdict = await hostBlocked(current, host, state.resolver);
  if (!verdict.allowed && verdict.reason === "not_allowed_local") {
    return await block("not_allowed_local", "baseline_policy");
  }
  const q = path.indexOf("?");
  const outcome = current.hooks.evaluate(host, {
    method: request.method,
    path: q === -1 ? path : path.slice(0, q),
    query: q === -1 ? "" : path.slice(q + 1),
    headers: request.rawHeaders,
  });
  if (outcome.kind === "no_match") return await block("mitm_hook_denied", "mode_guard");
  if (!methodAllowed(current.config.mode, request.method)) {
    return await block("method_not_allowed", "mode_guard");
  }
  let headers = stripHopByHop(request.rawHeaders);
  if (outcome.kind === "matched") headers = applyHookActions(headers, outcome.actions);
  // Credential masking: stand-ins bound to this host become the real values.
  if (state.broker) headers = state.broker.rewrite({ host, port, path }, headers);
  const authority = port === 443 ? (bracketHost(host)) : formatHostPort(host, port);
  headers = headers.filter(([n]) => n.toLowerCase() !== "host");
  headers.unshift(["host", authority]);
  try {
    return await forwardHttp(
      inside.forward,
      request,
      { scheme: "https", host, port, path: path.startsWith("/") ? path : `/${path}` },
      controls,
      headers,
    );
  } catch (error) {
    if (error instanceof PolicyDialError) {
      return await block("not_allowed_local", "baseline_policy");
    }
    inside.state.metrics?.upstreamError("mitm");
    inside.logger.debug("proxy.mitm_upstream_failed", { host, error: (error as Error).message });
    return { ...textResponse(502, "mitm upstream error"), close: true };
  }
}
