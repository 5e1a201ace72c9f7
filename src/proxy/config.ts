/**
 * The proxy's runtime configuration (the reference's JSON shape, snake_case),
 * its defaults, strict parsing, the effective domain map, and listener
 * address parsing and clamping.
 *
 * @module
 */

import { isRecord, setOwn } from "../util/record.ts";
import { formatHostPort, isIPv4, isIPv6, isLoopbackHost } from "../util/host.ts";
import { normalizePattern } from "./domain_pattern.ts";

/** `full`: every method; `limited`: GET/HEAD/OPTIONS only, HTTPS intercepted. */
export type NetworkMode = "limited" | "full";

/** A header to inject into matching intercepted requests. */
export interface InjectHeaderConfig {
  /** Header name. */
  name: string;
  /** Take the secret from this environment variable… */
  secret_env_var?: string;
  /** …or from this absolute file (trimmed). */
  secret_file?: string;
  /** Put before the secret (`Bearer `). */
  prefix?: string;
}

/** A MITM hook: what to match on an intercepted host and what to do. */
export interface MitmHookConfig {
  /** Exact host. */
  host: string;
  /** Conditions (all must hold). */
  match: {
    methods?: string[];
    path_prefixes?: string[];
    query?: Record<string, string[]>;
    headers?: Record<string, string[]>;
    body?: unknown;
  };
  /** What to do with a matching request. */
  actions?: {
    strip_request_headers?: string[];
    inject_request_headers?: InjectHeaderConfig[];
  };
}

/** SOCKS5 username/password authentication (an extension). */
export interface Socks5AuthConfig {
  /** Username. */
  username: string;
  /** Password. */
  password: string;
}

/** The runtime configuration. */
export interface NetworkProxyConfig {
  /** Run at all. */
  enabled: boolean;
  /** HTTP listener address. */
  proxy_url: string;
  /** Run the SOCKS5 listener. */
  enable_socks5: boolean;
  /** SOCKS5 listener address (scheme ignored). */
  socks_url: string;
  /** Allow SOCKS5 UDP ASSOCIATE. */
  enable_socks5_udp: boolean;
  /** Chain through the proxy process's own HTTP(S)_PROXY / ALL_PROXY. */
  allow_upstream_proxy: boolean;
  /** Bind non-loopback addresses. */
  dangerously_allow_non_loopback_proxy: boolean;
  /** Allow every absolute unix socket path (macOS only). */
  dangerously_allow_all_unix_sockets: boolean;
  /** Method policy. */
  mode: NetworkMode;
  /** Pattern → allow/deny/none. */
  domains: Record<string, "allow" | "deny" | "none"> | null;
  /** Unix socket path → allow/deny (macOS only). */
  unix_sockets: Record<string, "allow" | "deny"> | null;
  /** Allow loopback and private targets. */
  allow_local_binding: boolean;
  /** Enable TLS interception state. */
  mitm: boolean;
  /** Credential broker (not supported here; must stay false). */
  credential_broker: boolean;
  /** Allow credential injection into plain HTTP (unused without the broker). */
  dangerously_allow_plaintext_credential_injection: boolean;
  /** MITM hooks. */
  mitm_hooks: MitmHookConfig[];
  /** SOCKS5 username/password (extension; `null`: no authentication). */
  socks5_auth: Socks5AuthConfig | null;
}

/** The defaults (the reference's local-use baseline). */
export function defaultNetworkProxyConfig(): NetworkProxyConfig {
  return {
    enabled: false,
    proxy_url: "http://127.0.0.1:3128",
    enable_socks5: true,
    socks_url: "http://127.0.0.1:8081",
    enable_socks5_udp: true,
    allow_upstream_proxy: true,
    dangerously_allow_non_loopback_proxy: false,
    dangerously_allow_all_unix_sockets: false,
    mode: "full",
    domains: null,
    unix_sockets: null,
    allow_local_binding: false,
    mitm: false,
    credential_broker: false,
    dangerously_allow_plaintext_credential_injection: false,
    mitm_hooks: [],
    socks5_auth: null,
  };
}

/** A configuration that cannot be used. */
export class NetworkConfigError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "NetworkConfigError";
  }
}

const BOOLEANS = [
  "enabled",
  "enable_socks5",
  "enable_socks5_udp",
  "allow_upstream_proxy",
  "dangerously_allow_non_loopback_proxy",
  "dangerously_allow_all_unix_sockets",
  "allow_local_binding",
  "mitm",
  "credential_broker",
  "dangerously_allow_plaintext_credential_injection",
] as const;

export { isRecord };

function stringMap<T extends string>(
  key: string,
  value: unknown,
  allowed: readonly T[],
): Record<string, T> | null {
  if (value === null || value === undefined) return null;
  if (!isRecord(value)) throw new NetworkConfigError(`network.${key} must be a table`);
  const out: Record<string, T> = {};
  for (const [k, v] of Object.entries(value)) {
    if (!allowed.includes(v as T)) {
      throw new NetworkConfigError(
        `network.${key}.${k} must be one of ${allowed.map((a) => `"${a}"`).join(", ")}`,
      );
    }
    setOwn(out, k, v as T);
  }
  return out;
}

/**
 * Parses a configuration object: missing keys take the defaults; unknown
 * keys and wrong types are errors.
 */
export function parseNetworkProxyConfig(value: unknown): NetworkProxyConfig {
  if (!isRecord(value)) throw new NetworkConfigError("network proxy config must be an object");
  const config = defaultNetworkProxyConfig();
  const known = new Set<string>(Object.keys(config));
  for (const key of Object.keys(value)) {
    if (!known.has(key)) {
      throw new NetworkConfigError(`unknown network proxy config key \`${key}\``);
    }
  }
  for (const key of BOOLEANS) {
    if (value[key] === undefined) continue;
    if (typeof value[key] !== "boolean") {
      throw new NetworkConfigError(`network.${key} must be a boolean`);
    }
    config[key] = value[key] as boolean;
  }
  for (const key of ["proxy_url", "socks_url"] as const) {
    if (value[key] === undefined) continue;
    if (typeof value[key] !== "string") {
      throw new NetworkConfigError(`network.${key} must be a string`);
    }
    config[key] = value[key] as string;
  }
  if (value.mode !== undefined) {
    if (value.mode !== "full" && value.mode !== "limited") {
      throw new NetworkConfigError(`network.mode must be "full" or "limited"`);
    }
    config.mode = value.mode;
  }
  config.domains = stringMap("domains", value.domains, ["allow", "deny", "none"] as const);
  config.unix_sockets = stringMap("unix_sockets", value.unix_sockets, ["allow", "deny"] as const);
  if (value.mitm_hooks !== undefined) {
    if (!Array.isArray(value.mitm_hooks)) {
      throw new NetworkConfigError("network.mitm_hooks must be an array");
    }
    config.mitm_hooks = value.mitm_hooks as MitmHookConfig[];
  }
  if (value.socks5_auth !== undefined && value.socks5_auth !== null) {
    const a = value.socks5_auth;
    if (!isRecord(a) || typeof a.username !== "string" || typeof a.password !== "string") {
      throw new NetworkConfigError("network.socks5_auth must be {username, password}");
    }
    if (a.username.length < 1 || a.username.length > 255 || a.password.length > 255) {
      throw new NetworkConfigError("network.socks5_auth username and password are 1–255 bytes");
    }
    config.socks5_auth = { username: a.username, password: a.password };
  }
  return config;
}

/**
 * The effective domain map: patterns normalised, duplicates collapsed with
 * deny > allow > none.
 */
export function effectiveDomains(
  domains: NetworkProxyConfig["domains"],
): Record<string, "allow" | "deny" | "none"> {
  const rank = { none: 0, allow: 1, deny: 2 } as const;
  const out = new Map<string, "allow" | "deny" | "none">();
  for (const [pattern, value] of Object.entries(domains ?? {})) {
    const key = normalizePattern(pattern);
    if (key === "") continue;
    const prev = out.get(key);
    if (prev === undefined || rank[value] > rank[prev]) out.set(key, value);
  }
  return Object.fromEntries(out);
}

/** Allowed patterns (effective), or `null` when none. */
export function allowedDomains(config: NetworkProxyConfig): string[] | null {
  const list = Object.entries(effectiveDomains(config.domains)).filter(([, v]) => v === "allow")
    .map(([k]) => k);
  return list.length ? list : null;
}

/** Denied patterns (effective), or `null` when none. */
export function deniedDomains(config: NetworkProxyConfig): string[] | null {
  const list = Object.entries(effectiveDomains(config.domains)).filter(([, v]) => v === "deny")
    .map(([k]) => k);
  return list.length ? list : null;
}

/** The configuration as JSON, with the effective domain map. */
export function serializeNetworkProxyConfig(config: NetworkProxyConfig): Record<string, unknown> {
  const domains = effectiveDomains(config.domains);
  return { ...config, domains: Object.keys(domains).length ? domains : null };
}

/** Host and port of a listener address. */
export interface HostPort {
  /** Host (IPv6 without brackets). */
  host: string;
  /** Port. */
  port: number;
}

/**
 * Parses `proxy_url`/`socks_url`: empty is an error; an unbracketed IPv6
 * literal keeps the default port; otherwise a URL (scheme optional) whose
 * userinfo and path are ignored, with an invalid port falling back to the
 * default.
 */
export function parseHostPort(address: string, defaultPort: number): HostPort {
  const text = address.trim();
  if (text === "") throw new NetworkConfigError("missing host in network proxy address");
  if (isIPv6(text)) return { host: text, port: defaultPort };
  const withScheme = text.includes("://") ? text : `http://${text}`;
  const authority = withScheme.slice(withScheme.indexOf("://") + 3).split(/[/?#]/)[0]!;
  const hostPort = authority.slice(authority.lastIndexOf("@") + 1);
  let host: string;
  let portText = "";
  if (hostPort.startsWith("[")) {
    const end = hostPort.indexOf("]");
    host = hostPort.slice(1, end === -1 ? undefined : end);
    if (end !== -1 && hostPort[end + 1] === ":") portText = hostPort.slice(end + 2);
  } else {
    const colon = hostPort.lastIndexOf(":");
    host = colon === -1 ? hostPort : hostPort.slice(0, colon);
    if (colon !== -1) portText = hostPort.slice(colon + 1);
  }
  if (host === "") throw new NetworkConfigError("missing host in network proxy address");
  const port = /^\d{1,5}$/.test(portText) && Number(portText) <= 65535
    ? Number(portText)
    : defaultPort;
  return { host, port };
}

/** `host:port` for an address (IPv6 bracketed), or `<missing>`. */
export function hostAndPortFromNetworkAddr(address: string, defaultPort: number): string {
  try {
    const { host, port } = parseHostPort(address, defaultPort);
    return formatHostPort(host, port);
  } catch {
    return "<missing>";
  }
}

/** A bind address: `localhost` and other names become 127.0.0.1. */
export function resolveBindAddr(address: string, defaultPort: number): HostPort {
  const { host, port } = parseHostPort(address, defaultPort);
  if (isIPv4(host) || isIPv6(host)) return { host, port };
  return { host: "127.0.0.1", port };
}

/** Listener addresses after clamping, with warnings to log. */
export interface RuntimeAddresses {
  /** HTTP listener. */
  http: HostPort;
  /** SOCKS5 listener. */
  socks: HostPort;
  /** What was changed and why. */
  warnings: string[];
}

/**
 * Resolves and clamps the listener addresses: non-loopback binds become
 * 127.0.0.1 unless `dangerously_allow_non_loopback_proxy`; any unix-socket
 * permission forces loopback regardless. Relative unix-socket entries are
 * errors.
 */
export function resolveRuntimeAddresses(config: NetworkProxyConfig): RuntimeAddresses {
  Object.keys(config.unix_sockets ?? {}).forEach((path, i) => {
    if (!path.startsWith("/")) {
      throw new NetworkConfigError(
        `invalid network.allow_unix_sockets[${i}]: ${path} is not absolute`,
      );
    }
  });
  const warnings: string[] = [];
  const forceLoopback = config.dangerously_allow_all_unix_sockets ||
    Object.values(config.unix_sockets ?? {}).includes("allow");
  const clamp = (addr: HostPort, what: string): HostPort => {
    if (isLoopbackHost(addr.host)) return addr;
    if (config.dangerously_allow_non_loopback_proxy && !forceLoopback) {
      warnings.push(`DANGEROUS: ${what} listener binds non-loopback address ${addr.host}`);
      return addr;
    }
    warnings.push(`${what} listener address ${addr.host} clamped to 127.0.0.1`);
    return { host: "127.0.0.1", port: addr.port };
  };
  return {
    http: clamp(resolveBindAddr(config.proxy_url, 3128), "HTTP"),
    socks: clamp(resolveBindAddr(config.socks_url, 8081), "SOCKS5"),
    warnings,
  };
}
