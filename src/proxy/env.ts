/**
 * The environment of a child process that must use the proxy: every proxy
 * variable common tools read (curl, npm, yarn, pip, bundler, docker, git,
 * Node, Electron, Deno), `NO_PROXY`, the Codex markers, and — with TLS
 * interception — the CA bundle variables. Values are always overwritten so
 * stale ports never survive; no other key is written.
 *
 * @module
 */

/** Marker set in a child's environment when the managed proxy is active. */
export const PROXY_ACTIVE_ENV_KEY = "CODEX_NETWORK_PROXY_ACTIVE";
/** `1` when local binding is allowed, else `0`. */
export const ALLOW_LOCAL_BINDING_ENV_KEY = "CODEX_NETWORK_ALLOW_LOCAL_BINDING";

/** Keys set to the HTTP proxy URL. */
export const HTTP_PROXY_ENV_KEYS: readonly string[] = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "http_proxy",
  "https_proxy",
  "YARN_HTTP_PROXY",
  "YARN_HTTPS_PROXY",
  "npm_config_http_proxy",
  "npm_config_https_proxy",
  "npm_config_proxy",
  "NPM_CONFIG_HTTP_PROXY",
  "NPM_CONFIG_HTTPS_PROXY",
  "NPM_CONFIG_PROXY",
  "BUNDLE_HTTP_PROXY",
  "BUNDLE_HTTPS_PROXY",
  "PIP_PROXY",
  "DOCKER_HTTP_PROXY",
  "DOCKER_HTTPS_PROXY",
];
/** WebSocket proxy keys (HTTP proxy URL). */
export const WS_PROXY_ENV_KEYS: readonly string[] = [
  "WS_PROXY",
  "WSS_PROXY",
  "ws_proxy",
  "wss_proxy",
];
/** `NO_PROXY` and the aliases written (the reference's set). */
export const NO_PROXY_ENV_KEYS: readonly string[] = [
  "NO_PROXY",
  "no_proxy",
  "npm_config_noproxy",
  "NPM_CONFIG_NOPROXY",
  "BUNDLE_NO_PROXY",
];
/** Keys set to the SOCKS5 URL (or the HTTP one without SOCKS5). */
export const ALL_PROXY_ENV_KEYS: readonly string[] = [
  "ALL_PROXY",
  "all_proxy",
  "FTP_PROXY",
  "ftp_proxy",
];
/**
 * The `NO_PROXY` value with `allow_local_binding`: loopback and private
 * ranges, no names (169.254/16 stays proxied). Without it `NO_PROXY` is
 * empty, so local destinations go through the proxy, which refuses them.
 */
export const DEFAULT_NO_PROXY = "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16";

/** Every key owned by the managed proxy (for stripping and snapshot restore). */
export const PROXY_ENV_KEYS: readonly string[] = [
  PROXY_ACTIVE_ENV_KEY,
  "CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE",
  "CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS",
  ALLOW_LOCAL_BINDING_ENV_KEY,
  "CODEX_NETWORK_PROXY_ATTRIBUTION",
  "ELECTRON_GET_USE_PROXY",
  "NODE_USE_ENV_PROXY",
  ...HTTP_PROXY_ENV_KEYS,
  ...WS_PROXY_ENV_KEYS,
  ...NO_PROXY_ENV_KEYS,
  "YARN_NO_PROXY",
  ...ALL_PROXY_ENV_KEYS,
];

/** Variables naming CA bundles (`DENO_CERT` added: Deno ignores `SSL_CERT_FILE`). */
export const CUSTOM_CA_ENV_KEYS: readonly string[] = [
  "CODEX_CA_CERTIFICATE",
  "SSL_CERT_FILE",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "NODE_EXTRA_CA_CERTS",
  "GIT_SSL_CAINFO",
  "PIP_CERT",
  "BUNDLE_SSL_CA_CERT",
  "npm_config_cafile",
  "NPM_CONFIG_CAFILE",
  "DENO_CERT",
];

/** Canonical proxy URL keys (lower-case aliases are looked up too). */
export const PROXY_URL_ENV_KEYS: readonly string[] = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "WS_PROXY",
  "WSS_PROXY",
  "ALL_PROXY",
  "FTP_PROXY",
  "YARN_HTTP_PROXY",
  "YARN_HTTPS_PROXY",
  "NPM_CONFIG_HTTP_PROXY",
  "NPM_CONFIG_HTTPS_PROXY",
  "NPM_CONFIG_PROXY",
  "BUNDLE_HTTP_PROXY",
  "BUNDLE_HTTPS_PROXY",
  "PIP_PROXY",
  "DOCKER_HTTP_PROXY",
  "DOCKER_HTTPS_PROXY",
];

const GIT_SSH_MARKER = "CODEX_PROXY_GIT_SSH_COMMAND=1 ";
const GIT_SSH_PREFIX = `${GIT_SSH_MARKER}ssh -o ProxyCommand='nc -X 5 -x `;

/** Sandbox context: the proxy's loopback ports and the local-binding flag. */
export interface ManagedNetworkContext {
  /** Sorted, distinct listener ports. */
  loopbackPorts: number[];
  /** The SOCKS5 listener's port (one of them), or null when SOCKS5 is off. */
  socksPort: number | null;
  /** Local targets allowed. */
  allowLocalBinding: boolean;
}

/** What {@linkcode applyProxyEnv} needs. */
export interface ProxyEnvTarget {
  /** HTTP listener. */
  readonly http: Deno.NetAddr;
  /** SOCKS5 listener, if enabled. */
  readonly socks: Deno.NetAddr | null;
  /** `allow_local_binding`. */
  readonly allowLocalBinding: boolean;
  /** Managed CA bundle (interception on), else `null`. */
  readonly trustBundlePath: string | null;
  /** CA variables as the proxy saw them at startup (default: this process's). */
  readonly startupEnv?: (name: string) => string | undefined;
  /** Operating system (default: this one); `GIT_SSH_COMMAND` is written on macOS only. */
  readonly os?: string;
}

function hostPort(addr: Deno.NetAddr): string {
  return addr.hostname.includes(":")
    ? `[${addr.hostname}]:${addr.port}`
    : `${addr.hostname}:${addr.port}`;
}

/** Returns `env` with the proxy variables written (see the module documentation). */
export function applyProxyEnv(
  env: Readonly<Record<string, string>>,
  target: ProxyEnvTarget,
): Record<string, string> {
  const out: Record<string, string> = { ...env };
  const http = `http://${hostPort(target.http)}`;
  const socks = target.socks ? `socks5h://${hostPort(target.socks)}` : null;
  out[PROXY_ACTIVE_ENV_KEY] = "1";
  out[ALLOW_LOCAL_BINDING_ENV_KEY] = target.allowLocalBinding ? "1" : "0";
  for (const k of HTTP_PROXY_ENV_KEYS) out[k] = http;
  for (const k of WS_PROXY_ENV_KEYS) out[k] = http;
  const noProxy = target.allowLocalBinding ? DEFAULT_NO_PROXY : "";
  for (const k of NO_PROXY_ENV_KEYS) out[k] = noProxy;
  out.ELECTRON_GET_USE_PROXY = "true";
  out.NODE_USE_ENV_PROXY = "1";
  for (const k of ALL_PROXY_ENV_KEYS) out[k] = socks ?? http;
  if ((target.os ?? Deno.build.os) === "darwin" && target.socks) {
    const existing = out.GIT_SSH_COMMAND;
    if (
      existing === undefined ||
      (existing.startsWith(GIT_SSH_PREFIX) && existing.endsWith(" %h %p'"))
    ) {
      out.GIT_SSH_COMMAND = `${GIT_SSH_PREFIX}${hostPort(target.socks)} %h %p'`;
    }
  }
  if (target.trustBundlePath) {
    const startup = target.startupEnv ?? ((n: string) => Deno.env.get(n));
    for (const k of CUSTOM_CA_ENV_KEYS) {
      const current = out[k];
      const scoped = current !== undefined && current !== "" &&
        current !== target.trustBundlePath &&
        current !== startup(k);
      if (!scoped) out[k] = target.trustBundlePath;
    }
  }
  return out;
}

/** `env[KEY]`, else `env[lowercase KEY]`. */
export function proxyUrlEnvValue(
  env: Readonly<Record<string, string>>,
  key: string,
): string | undefined {
  return env[key] ?? env[key.toLowerCase()];
}

/** True when any proxy URL key (or its lower-case alias) is set and non-blank. */
export function hasProxyUrlEnvVars(env: Readonly<Record<string, string>>): boolean {
  return PROXY_URL_ENV_KEYS.some((k) => (proxyUrlEnvValue(env, k) ?? "").trim() !== "");
}

/**
 * Removes the managed proxy's variables (for a command leaving the
 * sandbox): every proxy key, CA keys pointing at `isManagedBundle` paths,
 * and a marked `GIT_SSH_COMMAND`.
 */
export function stripManagedProxyEnv(
  env: Readonly<Record<string, string>>,
  isManagedBundle: (path: string) => boolean = () => false,
): Record<string, string> {
  const out: Record<string, string> = { ...env };
  for (const k of PROXY_ENV_KEYS) delete out[k];
  for (const k of CUSTOM_CA_ENV_KEYS) {
    if (out[k] !== undefined && isManagedBundle(out[k]!)) delete out[k];
  }
  if (out.GIT_SSH_COMMAND?.startsWith(GIT_SSH_MARKER)) delete out.GIT_SSH_COMMAND;
  return out;
}
