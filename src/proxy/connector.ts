/**
 * Dialling targets: directly (after resolution, refusing non-public
 * addresses unless local binding is allowed — the connect-time defence
 * against DNS rebinding) or through an upstream HTTP proxy taken from the
 * proxy process's own `HTTP(S)_PROXY` / `ALL_PROXY`.
 *
 * Deliberate difference from the reference: a local literal that the allow
 * list names exactly (`localhost`, `10.0.0.5`) is also dialable without
 * `allow_local_binding`; the reference lets it through the host policy and
 * then refuses the dial.
 *
 * @module
 */

import { ByteSource, connReader } from "../http1/body.ts";
import { writeAll } from "../util/conn_io.ts";
import {
  formatHostPort,
  isIpLiteral,
  isNonPublicIp,
  normalizeHost,
  unscoped,
} from "../util/host.ts";
import { exactlyAllowed } from "./policy.ts";
import type { NetworkProxyState } from "./state.ts";

/** The resolved target is not public and local binding is off. */
export class PolicyDialError extends Error {
  /** Creates the error. */
  constructor() {
    super("network target rejected by policy");
    this.name = "PolicyDialError";
  }
}

/** Upstream proxies from the environment. */
export interface UpstreamProxies {
  /** For plain targets. */
  readonly http: URL | null;
  /** For secure targets and tunnels. */
  readonly https: URL | null;
  /** Fallback for both. */
  readonly all: URL | null;
  /**
   * Mandatory for every SOCKS5 TCP connection (the server's
   * `--tcp-upstream-proxy`): used when the policy allows upstream proxies,
   * refused otherwise — never dialled around.
   */
  readonly tcp?: URL | null;
}

/** Timeout of one dial. */
export const DIAL_TIMEOUT_MS = 30_000;

/**
 * Reads `HTTP_PROXY`/`http_proxy`, `HTTPS_PROXY`/`https_proxy`,
 * `ALL_PROXY`/`all_proxy` (first non-empty of each pair); only http(s)
 * proxy URLs count (others are reported through `warn`).
 */
export function upstreamProxiesFromEnv(
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
  warn: (message: string) => void = () => {},
): UpstreamProxies {
  const pick = (upper: string): URL | null => {
    const value = [env(upper), env(upper.toLowerCase())].find((v) =>
      v !== undefined && v.trim() !== ""
    );
    if (value === undefined) return null;
    try {
      const url = new URL(value.includes("://") ? value : `http://${value}`);
      if (url.protocol === "http:" || url.protocol === "https:") return url;
      warn(`ignoring ${upper}=${url.protocol}//…: only http(s) upstream proxies are supported`);
    } catch {
      warn(`ignoring unparsable ${upper}`);
    }
    return null;
  };
  return { http: pick("HTTP_PROXY"), https: pick("HTTPS_PROXY"), all: pick("ALL_PROXY") };
}

/** The upstream for a target: secure → HTTPS, HTTP, ALL; plain → HTTP, ALL. */
export function pickUpstream(proxies: UpstreamProxies, secure: boolean): URL | null {
  return secure ? proxies.https ?? proxies.http ?? proxies.all : proxies.http ?? proxies.all;
}

function timeoutSignal(ms: number): AbortSignal {
  return AbortSignal.timeout(ms);
}

/**
 * Resolves `host` and connects to the first address that policy allows and
 * that answers; throws {@linkcode PolicyDialError} when policy refused every
 * address.
 */
export async function dialDirect(
  state: NetworkProxyState,
  host: string,
  port: number,
): Promise<Deno.TcpConn> {
  const h = normalizeHost(host);
  const config = state.current;
  const addresses = isIpLiteral(h) ? [unscoped(h)] : await state.resolver(h);
  const localOk = config.config.allow_local_binding ||
    ((h === "localhost" || isIpLiteral(h)) && exactlyAllowed(config, h));
  let refused = 0;
  let lastError: unknown = new Error(`no addresses for ${h}`);
  for (const address of addresses) {
    if (!localOk && isNonPublicIp(address)) {
      refused++;
      continue;
    }
    try {
      const conn = await Deno.connect(
        { hostname: address, port, signal: timeoutSignal(DIAL_TIMEOUT_MS) } as Deno.ConnectOptions,
      );
      conn.setNoDelay(true);
      return conn;
    } catch (error) {
      lastError = error;
    }
  }
  if (refused > 0 && refused === addresses.length) throw new PolicyDialError();
  throw lastError;
}

/** Connects to an upstream proxy. */
export async function dialProxy(proxy: URL): Promise<Deno.Conn> {
  const hostname = proxy.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(proxy.port || (proxy.protocol === "https:" ? 443 : 80));
  const tcp = await Deno.connect(
    { hostname, port, signal: timeoutSignal(DIAL_TIMEOUT_MS) } as Deno.ConnectOptions,
  );
  tcp.setNoDelay(true);
  return proxy.protocol === "https:" ? await Deno.startTls(tcp, { hostname }) : tcp;
}

/** `Proxy-Authorization` for a proxy URL with userinfo. */
export function proxyAuthorization(proxy: URL): string | null {
  if (proxy.username === "" && proxy.password === "") return null;
  const raw = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return `Basic ${new TextEncoder().encode(raw).toBase64()}`;
}

/**
 * Opens a tunnel to `host:port` through an upstream proxy with CONNECT;
 * returns the connection and any bytes the proxy sent past its answer.
 */
export async function dialViaProxy(
  proxy: URL,
  host: string,
  port: number,
): Promise<{ conn: Deno.Conn; leftover: Uint8Array | null }> {
  const conn = await dialProxy(proxy);
  try {
    const authority = formatHostPort(host, port);
    const auth = proxyAuthorization(proxy);
    const head = `CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n` +
      (auth ? `proxy-authorization: ${auth}\r\n` : "") + "\r\n";
    await writeAll(conn, new TextEncoder().encode(head));
    const source = new ByteSource(connReader(conn, 16 * 1024));
    const response = await source.head();
    const status = Number(response?.startLine[1]);
    if (status !== 200) {
      throw new Error(`upstream proxy answered CONNECT with ${response ? status : "EOF"}`);
    }
    return { conn, leftover: source.takePending() };
  } catch (error) {
    try {
      conn.close();
    } catch { /* closed */ }
    throw error;
  }
}
