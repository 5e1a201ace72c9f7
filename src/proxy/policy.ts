/**
 * Host policy (README, "Egress proxy"): deny wins; without
 * `allow_local_binding`, local literals need an exact allow entry and names
 * that resolve to any non-public address (or fail to resolve within 2 s)
 * are refused; then the allow list decides.
 *
 * @module
 */

import { lookup } from "node:dns/promises";
import {
  allowedDomains,
  deniedDomains,
  NetworkConfigError,
  type NetworkMode,
  type NetworkProxyConfig,
} from "./config.ts";
import {
  compileDomainPatterns,
  type DomainMatcher,
  hasGlob,
  normalizePattern,
} from "./domain_pattern.ts";
import { isIpLiteral, isNonPublicIp, normalizeHost, unscoped } from "../util/host.ts";
import { compileMitmHooks, type MitmHooks } from "./mitm_hooks.ts";

/** Why a host was refused by the host policy. */
export type HostBlockReason = "denied" | "not_allowed" | "not_allowed_local";

/** The host policy's verdict. */
export type HostVerdict = { readonly allowed: true } | {
  readonly allowed: false;
  readonly reason: HostBlockReason;
};

/** Resolves a host name to IP addresses. */
export type HostResolver = (host: string) => Promise<string[]>;

/** How long a policy DNS check may take. */
export const DNS_CHECK_TIMEOUT_MS = 2000;

/** The system resolver (`getaddrinfo`, so `/etc/hosts` counts). */
export const systemResolver: HostResolver = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** An immutable, compiled configuration. */
export interface ConfigState {
  /** The configuration. */
  readonly config: NetworkProxyConfig;
  /** Allow patterns. */
  readonly allow: DomainMatcher;
  /** Deny patterns. */
  readonly deny: DomainMatcher;
  /** MITM hooks by host. */
  readonly hooks: MitmHooks;
}

/** Validates and compiles a configuration. */
export function buildConfigState(
  config: NetworkProxyConfig,
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
): ConfigState {
  if (config.credential_broker) {
    throw new NetworkConfigError("network.credential_broker is not supported by this proxy");
  }
  Object.keys(config.unix_sockets ?? {}).forEach((path, i) => {
    if (!path.startsWith("/")) {
      throw new NetworkConfigError(
        `invalid network.allow_unix_sockets[${i}]: ${path} is not absolute`,
      );
    }
  });
  return {
    config,
    allow: compileDomainPatterns(allowedDomains(config) ?? [], { allowGlobal: true }),
    deny: compileDomainPatterns(deniedDomains(config) ?? [], { allowGlobal: false }),
    hooks: compileMitmHooks(config.mitm_hooks, config.mitm, env),
  };
}

/** `full` allows every method; `limited` only GET, HEAD and OPTIONS (exact case). */
export function methodAllowed(mode: NetworkMode, method: string): boolean {
  return mode === "full" || method === "GET" || method === "HEAD" || method === "OPTIONS";
}

/** True when an allow entry names exactly this local literal. */
export function exactlyAllowed(state: ConfigState, host: string): boolean {
  const h = normalizeHost(host);
  for (const pattern of state.allow.exact) {
    if (hasGlob(pattern)) continue;
    const p = normalizePattern(pattern);
    if (p === h || p === unscoped(h)) return true;
  }
  return false;
}

async function resolvesNonPublic(host: string, resolver: HostResolver): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const addresses = await Promise.race([
      resolver(host),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("DNS lookup timed out")), DNS_CHECK_TIMEOUT_MS);
      }),
    ]);
    return addresses.length === 0 || addresses.some(isNonPublicIp);
  } catch {
    return true; // fail closed
  } finally {
    clearTimeout(timer);
  }
}

/** The host decision (the port is informational). */
export async function hostBlocked(
  state: ConfigState,
  host: string,
  resolver: HostResolver = systemResolver,
): Promise<HostVerdict> {
  const h = normalizeHost(host);
  if (h === "") return { allowed: false, reason: "not_allowed" };
  if (state.deny.matches(h)) return { allowed: false, reason: "denied" };
  if (!state.config.allow_local_binding) {
    const localLiteral = h === "localhost" || (isIpLiteral(h) && isNonPublicIp(h));
    if (localLiteral) {
      return exactlyAllowed(state, h)
        ? { allowed: true }
        : { allowed: false, reason: "not_allowed_local" };
    }
    if (!isIpLiteral(h) && await resolvesNonPublic(h, resolver)) {
      return { allowed: false, reason: "not_allowed_local" };
    }
  }
  return state.allow.matches(h) ? { allowed: true } : { allowed: false, reason: "not_allowed" };
}
