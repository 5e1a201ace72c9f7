/**
 * Managed constraints (an administrator's "requirements"; README, "Egress
 * proxy"): limits that every configuration — the initial one, a reloaded one,
 * every live edit — must stay within. Requirements both override the
 * user's configuration ({@linkcode applyNetworkRequirements}) and become
 * {@linkcode NetworkProxyConstraints} that {@linkcode validatePolicyAgainstConstraints}
 * checks on every change.
 *
 * @module
 */

import {
  allowedDomains,
  deniedDomains,
  effectiveDomains,
  isRecord,
  NetworkConfigError,
  type NetworkMode,
  type NetworkProxyConfig,
} from "./config.ts";
import { isGlobalWildcard, normalizePattern } from "./domain_pattern.ts";

/** What the configuration may be, at most (absent keys: unconstrained). */
export interface NetworkProxyConstraints {
  /** `false`: the proxy may not be enabled. */
  readonly enabled?: boolean;
  /** `limited`: `full` is refused. */
  readonly mode?: NetworkMode;
  /** `false`: upstream proxy chaining may not be turned on. */
  readonly allow_upstream_proxy?: boolean;
  /** `false`: non-loopback listeners may not be turned on. */
  readonly dangerously_allow_non_loopback_proxy?: boolean;
  /** `true` opts in to allowing every unix socket; see the module rules. */
  readonly dangerously_allow_all_unix_sockets?: boolean;
  /** The managed allow list. */
  readonly allowed_domains?: readonly string[];
  /**
   * `true`: users may add entries (the managed ones must stay); `false`:
   * the allow list must be exactly the managed one; absent: every user
   * entry must be covered by a managed pattern.
   */
  readonly allowlist_expansion_enabled?: boolean;
  /** The managed deny list: every entry must stay. */
  readonly denied_domains?: readonly string[];
  /** `false`: the deny list must be exactly the managed one. */
  readonly denylist_expansion_enabled?: boolean;
  /** Managed unix sockets: user allow entries must be among them. */
  readonly allow_unix_sockets?: readonly string[];
  /** `false`: loopback and private targets may not be turned on. */
  readonly allow_local_binding?: boolean;
}

/** A value outside the managed constraints. */
export class NetworkConstraintError extends NetworkConfigError {
  /**
   * Creates the error; the message defaults to
   * `invalid value for <field>: <candidate> (allowed <allowed>)`.
   */
  constructor(
    readonly field: string,
    readonly candidate: string,
    readonly allowed: string,
    message = `invalid value for ${field}: ${candidate} (allowed ${allowed})`,
  ) {
    super(message);
    this.name = "NetworkConstraintError";
  }
}

const MODE_RANK: Record<NetworkMode, number> = { limited: 0, full: 1 };

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function list(values: readonly string[]): string {
  return JSON.stringify(values);
}

/** The managed allow pattern `managed` covers the user's pattern `candidate`. */
export function patternCovers(managed: string, candidate: string): boolean {
  const m = normalizePattern(managed);
  const c = normalizePattern(candidate);
  if (m === c) return true;
  // `**.d` covers `d`, `*.d`, `**.d` and anything under `d`; `*.d` covers
  // strict subdomains (including narrower wildcards below them).
  const apexOf = (p: string) =>
    p.startsWith("**.") ? p.slice(3) : p.startsWith("*.") ? p.slice(2) : p;
  const under = (host: string, domain: string) => host.endsWith("." + domain);
  if (m.startsWith("**.")) {
    const d = m.slice(3);
    const cd = apexOf(c);
    return cd === d || under(cd, d);
  }
  if (m.startsWith("*.")) {
    const d = m.slice(2);
    if (c.startsWith("**.")) return under(c.slice(3), d);
    if (c.startsWith("*.")) return under(c.slice(2), d);
    return under(c, d);
  }
  return false;
}

function rejectGlobal(field: string, patterns: readonly string[]): void {
  for (const p of patterns) {
    if (isGlobalWildcard(p)) {
      throw new NetworkConstraintError(
        field,
        p,
        "exact hosts or scoped wildcards like *.example.com or **.example.com",
      );
    }
  }
}

function boolMax(field: string, candidate: boolean, max: boolean | undefined): void {
  if (candidate && max === false) {
    throw new NetworkConstraintError(field, "true", "false (disabled by managed config)");
  }
}

/**
 * Throws {@linkcode NetworkConstraintError} when `config` goes beyond
 * `constraints`.
 */
export function validatePolicyAgainstConstraints(
  config: NetworkProxyConfig,
  constraints: NetworkProxyConstraints,
): void {
  boolMax("network.enabled", config.enabled, constraints.enabled);
  if (constraints.mode && MODE_RANK[config.mode] > MODE_RANK[constraints.mode]) {
    throw new NetworkConstraintError(
      "network.mode",
      config.mode,
      `${constraints.mode} or more restrictive`,
    );
  }
  boolMax(
    "network.allow_upstream_proxy",
    config.allow_upstream_proxy,
    constraints.allow_upstream_proxy,
  );
  boolMax(
    "network.dangerously_allow_non_loopback_proxy",
    config.dangerously_allow_non_loopback_proxy,
    constraints.dangerously_allow_non_loopback_proxy,
  );
  boolMax(
    "network.allow_local_binding",
    config.allow_local_binding,
    constraints.allow_local_binding,
  );
  const managedSockets = constraints.allow_unix_sockets ?? [];
  if (config.dangerously_allow_all_unix_sockets) {
    const optedIn = constraints.dangerously_allow_all_unix_sockets === true ||
      (constraints.dangerously_allow_all_unix_sockets === undefined && managedSockets.length === 0);
    if (!optedIn) {
      throw new NetworkConstraintError(
        "network.dangerously_allow_all_unix_sockets",
        "true",
        managedSockets.length > 0 && constraints.dangerously_allow_all_unix_sockets === undefined
          ? "false (unix sockets are managed)"
          : "false (disabled by managed config)",
      );
    }
  }

  // Both lists come normalised (effectiveDomains).
  const denied = deniedDomains(config) ?? [];
  const deniedSet = new Set(denied);
  const allowed = allowedDomains(config) ?? [];
  if (constraints.allowed_domains !== undefined) {
    rejectGlobal("network.allowed_domains", constraints.allowed_domains);
    const managed = [...new Set(constraints.allowed_domains.map(normalizePattern))];
    const expansion = constraints.allowlist_expansion_enabled;
    if (expansion === true) {
      const missing = managed.filter((m) => !allowed.includes(m) && !deniedSet.has(m));
      if (missing.length > 0) {
        throw new NetworkConstraintError(
          "network.allowed_domains",
          list(allowed),
          `every managed entry (missing ${list(missing)})`,
        );
      }
    } else if (expansion === false) {
      const required = managed.filter((m) => !deniedSet.has(m)).sort();
      const actual = [...allowed].sort();
      if (required.join("\n") !== actual.join("\n")) {
        throw new NetworkConstraintError(
          "network.allowed_domains",
          list(allowed),
          `exactly the managed allowed_domains ${list(required)}`,
        );
      }
    } else {
      const outside = allowed.filter((a) => !managed.some((m) => patternCovers(m, a)));
      if (outside.length > 0) {
        throw new NetworkConstraintError(
          "network.allowed_domains",
          list(outside),
          "subset of managed allowed_domains",
        );
      }
    }
  }
  if (constraints.denied_domains !== undefined) {
    const managed = [...new Set(constraints.denied_domains.map(normalizePattern))];
    const missing = managed.filter((m) => !deniedSet.has(m));
    if (missing.length > 0) {
      throw new NetworkConstraintError(
        "network.denied_domains",
        list(denied),
        `every managed entry (missing ${list(missing)})`,
      );
    }
    if (constraints.denylist_expansion_enabled === false && denied.length !== managed.length) {
      throw new NetworkConstraintError(
        "network.denied_domains",
        list(denied),
        `exactly the managed denied_domains ${list(managed)}`,
      );
    }
  }
  if (managedSockets.length > 0) {
    const allowedSockets = new Set(managedSockets.map((s) => s.toLowerCase()));
    const outside = Object.entries(config.unix_sockets ?? {})
      .filter(([path, v]) => v === "allow" && !allowedSockets.has(path.toLowerCase()))
      .map(([path]) => path);
    if (outside.length > 0) {
      throw new NetworkConstraintError(
        "network.allow_unix_sockets",
        list(outside),
        "subset of managed allow_unix_sockets",
      );
    }
  }
}

/** An administrator's requirements (the keys of a requirements file, snake_case). */
export interface NetworkRequirements {
  /** Whether the proxy may run (and does: overrides the configuration). */
  readonly enabled?: boolean;
  /** The HTTP listener's loopback port. */
  readonly http_port?: number;
  /** The SOCKS5 listener's loopback port. */
  readonly socks_port?: number;
  /** Upstream proxy chaining, at most. */
  readonly allow_upstream_proxy?: boolean;
  /** Non-loopback listeners, at most. */
  readonly dangerously_allow_non_loopback_proxy?: boolean;
  /** Allow-all unix sockets opt-in. */
  readonly dangerously_allow_all_unix_sockets?: boolean;
  /** Managed domain entries (merged into the configuration). */
  readonly domains?: Readonly<Record<string, "allow" | "deny">>;
  /** Only managed allow entries count; misses are denied without asking the decider. */
  readonly managed_allowed_domains_only?: boolean;
  /** Managed unix sockets (path → allow/deny). */
  readonly unix_sockets?: Readonly<Record<string, "allow" | "deny">>;
  /** Loopback and private targets, at most. */
  readonly allow_local_binding?: boolean;
  /** The mode, at most (`limited` forbids `full`). */
  readonly mode?: NetworkMode;
}

/** The configuration under the requirements, and what every later change is held to. */
export interface ManagedNetworkConfig {
  /** The configuration with the requirements applied. */
  readonly config: NetworkProxyConfig;
  /** The constraints. */
  readonly constraints: NetworkProxyConstraints;
  /** Allow-list misses are denied outright (no decider). */
  readonly managedAllowedDomainsOnly: boolean;
}

/** Requirement switches: each overrides the configuration and is its maximum. */
const MANAGED_SWITCHES = [
  "enabled",
  "allow_upstream_proxy",
  "dangerously_allow_non_loopback_proxy",
  "dangerously_allow_all_unix_sockets",
  "allow_local_binding",
] as const;

const REQUIREMENT_KEYS = new Set([
  "enabled",
  "http_port",
  "socks_port",
  "allow_upstream_proxy",
  "dangerously_allow_non_loopback_proxy",
  "dangerously_allow_all_unix_sockets",
  "domains",
  "managed_allowed_domains_only",
  "unix_sockets",
  "allow_local_binding",
  "mode",
]);

/** Parses requirements (JSON-shaped); unknown keys and wrong types are errors. */
export function parseNetworkRequirements(value: unknown): NetworkRequirements {
  if (!isRecord(value)) throw new NetworkConfigError("network requirements must be an object");
  const v = value;
  for (const key of Object.keys(v)) {
    if (!REQUIREMENT_KEYS.has(key)) {
      throw new NetworkConfigError(`unknown network requirements key: ${key}`);
    }
  }
  for (const k of [...MANAGED_SWITCHES, "managed_allowed_domains_only"]) {
    if (v[k] !== undefined && typeof v[k] !== "boolean") {
      throw new NetworkConfigError(`network requirements: ${k} must be a boolean`);
    }
  }
  for (const k of ["http_port", "socks_port"]) {
    const p = v[k];
    if (p !== undefined && (!Number.isInteger(p) || (p as number) < 1 || (p as number) > 65535)) {
      throw new NetworkConfigError(`network requirements: ${k} must be a port number`);
    }
  }
  if (v.mode !== undefined && v.mode !== "limited" && v.mode !== "full") {
    throw new NetworkConfigError(`network requirements: mode must be "limited" or "full"`);
  }
  for (const k of ["domains", "unix_sockets"]) {
    const map = v[k];
    if (map === undefined) continue;
    if (!isRecord(map)) throw new NetworkConfigError(`network requirements: ${k} must be a table`);
    for (const [entry, permission] of Object.entries(map)) {
      if (permission !== "allow" && permission !== "deny") {
        throw new NetworkConfigError(
          `network requirements: ${k}.${entry} must be "allow" or "deny"`,
        );
      }
    }
  }
  return v as NetworkRequirements;
}

/**
 * Applies `requirements` to `config`: the managed values override the
 * user's (ports become `http://127.0.0.1:<port>`; managed allow entries are
 * added unless the user denies the same pattern; managed deny entries are
 * added), then the result is validated against the constraints they imply.
 * `allowlistExpansion` (for managed permission profiles) lets users add
 * allow entries beyond the managed ones; it never applies with
 * `managed_allowed_domains_only`, where the allow list is exactly the
 * managed one.
 */
export function applyNetworkRequirements(
  config: NetworkProxyConfig,
  requirements: NetworkRequirements,
  options: { allowlistExpansion?: boolean } = {},
): ManagedNetworkConfig {
  const r = requirements;
  const next: NetworkProxyConfig = { ...config };
  const constraints: Mutable<NetworkProxyConstraints> = {};
  for (const key of MANAGED_SWITCHES) {
    const value = r[key];
    if (value === undefined) continue;
    next[key] = value;
    constraints[key] = value;
  }
  if (r.http_port !== undefined) next.proxy_url = `http://127.0.0.1:${r.http_port}`;
  if (r.socks_port !== undefined) next.socks_url = `http://127.0.0.1:${r.socks_port}`;
  if (r.mode !== undefined) constraints.mode = r.mode;
  if (r.mode === "limited") next.mode = "limited";

  const managedAllowed: string[] = [];
  const managedDenied: string[] = [];
  for (const [pattern, permission] of Object.entries(r.domains ?? {})) {
    (permission === "allow" ? managedAllowed : managedDenied).push(normalizePattern(pattern));
  }
  const onlyManaged = r.managed_allowed_domains_only === true;
  if (r.domains !== undefined || onlyManaged) {
    const domains = { ...effectiveDomains(config.domains) };
    if (onlyManaged) {
      for (const [k, val] of Object.entries(domains)) if (val === "allow") delete domains[k];
    }
    for (const p of managedAllowed) if (domains[p] !== "deny") domains[p] = "allow";
    for (const p of managedDenied) domains[p] = "deny";
    next.domains = domains;
  }
  const managedSockets = Object.entries(r.unix_sockets ?? {}).filter(([, v]) => v === "allow")
    .map(([path]) => path);
  if (r.unix_sockets !== undefined) {
    next.unix_sockets = { ...(config.unix_sockets ?? {}), ...r.unix_sockets };
  }

  if (managedAllowed.length > 0 || onlyManaged) {
    constraints.allowed_domains = managedAllowed;
    if (onlyManaged) constraints.allowlist_expansion_enabled = false;
    else if (options.allowlistExpansion) constraints.allowlist_expansion_enabled = true;
  }
  if (managedDenied.length > 0) constraints.denied_domains = managedDenied;
  if (managedSockets.length > 0) constraints.allow_unix_sockets = managedSockets;
  validatePolicyAgainstConstraints(next, constraints);
  return { config: next, constraints, managedAllowedDomainsOnly: onlyManaged };
}
