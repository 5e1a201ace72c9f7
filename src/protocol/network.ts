/**
 * The managed network: `process/start.networkProxy` (types and decoder),
 * and what the server asks and tells the client about its policy
 * (`network/policyRequest`, `network/policyDecision`).
 *
 * @module
 */

import {
  array,
  boolean,
  buffered,
  DecodeError,
  type Decoder,
  join,
  nullable,
  optional,
  record,
  string,
  struct,
  u64,
  unitEnum,
  withDefault,
} from "./decode.ts";

/** A domain's entry in a launched proxy's policy. */
export type NetworkDomainPermission = "none" | "allow" | "deny";

/** The policy of a per-process proxy (`process/start.networkProxy.proxy`). */
export interface RemoteNetworkProxyConfig {
  /** Must be true: a launch always runs a proxy. */
  enabled: boolean;
  /** Also listen for SOCKS5 (`ALL_PROXY`). */
  enableSocks5: boolean;
  /** Allow SOCKS5 UDP ASSOCIATE. */
  enableSocks5Udp: boolean;
  /** Chain through the server's own `HTTP(S)_PROXY`. */
  allowUpstreamProxy: boolean;
  /** macOS only; refused requests here. */
  dangerouslyAllowAllUnixSockets: boolean;
  /** `full`: every method; `limited`: GET, HEAD and OPTIONS only. */
  mode: "limited" | "full";
  /** Loopback and private destinations allowed. */
  allowLocalBinding: boolean;
  /** Domain pattern → permission. */
  domains?: Record<string, NetworkDomainPermission>;
  /** Domains asked about (`network/policyRequest`) even when allowed. */
  reviewDomains?: string[];
  /** Unix socket path → permission (macOS only). */
  unixSockets?: Record<string, "allow" | "deny">;
  /**
   * Mask the GitHub and OpenAI credentials of a `bash -c` child: it sees
   * stand-ins, the proxy puts the real values back for their hosts
   * (capability `credentialMasking`). Default false.
   */
  credentialMasking?: boolean;
  /**
   * Codex 0.171: more credentials to mask, by name (capability
   * `credentialMaskingCustomProviders`). A provider that cannot be applied
   * (no URL prefix, a pattern that does not compile or matches nothing…)
   * is ignored, as the reference ignores it.
   */
  credentialProviders?: Record<string, CredentialProviderConfig>;
  /**
   * Codex 0.171: capture the sandboxed child's raw TCP connections into the
   * proxy's policy (capability `networkProxyTransparentTcp`): the sandbox is
   * routed to the proxy, and a start this server cannot capture is refused,
   * never run without it. Default false.
   */
  transparentTcp?: boolean;
}

/** How a stand-in is presented and replaced (`bearer` when none is given). */
export type CredentialAuthScheme = "bearer" | "token" | "basic" | "header";

/** A custom credential for the broker (`RemoteNetworkProxyConfig.credentialProviders`). */
export interface CredentialProviderConfig {
  /** Environment variables holding it. */
  env?: string[];
  /** Regular expressions a real value must match whole; its stand-in is generated from the one it matches. */
  patterns?: string[];
  /** `https://` URL prefixes the real value is sent to. */
  url_prefixes?: string[];
  /** A variable of the child's environment holding one more prefix. */
  url_prefix_from_env?: string;
  /** Where a stand-in is replaced (default `["bearer"]`). */
  auth?: CredentialAuthScheme[];
  /** The header of `auth: ["header"]`. */
  header?: string;
  /** What precedes the credential in that header. */
  prefix?: string;
}

/** Who a launched proxy's decisions are attributed to (audit events only). */
export interface NetworkProxyAuditMetadata {
  /** `conversation.id`. */
  conversationId?: string | null;
  /** `app.version`. */
  appVersion?: string | null;
  /** `user.account_id`. */
  userAccountId?: string | null;
  /** `auth_mode`. */
  authMode?: string | null;
  /** `originator`. */
  originator?: string | null;
  /** `user.email`. */
  userEmail?: string | null;
  /** `terminal.type`. */
  terminalType?: string | null;
  /** `model`. */
  model?: string | null;
  /** `slug`. */
  slug?: string | null;
}

/** `process/start.networkProxy`. */
export interface NetworkProxyLaunch {
  /** The proxy's policy. */
  proxy: RemoteNetworkProxyConfig;
  /**
   * When set, hosts the policy does not allow (and review domains) are put to
   * the client as `network/policyRequest`; no answer within this time denies.
   */
  policyDecisionTimeoutMs?: number;
  /** Attribution of the proxy's audit events. */
  auditMetadata?: NetworkProxyAuditMetadata;
  /** The environment the process belongs to (audit only). */
  environmentId?: string;
  /** The execution the process belongs to (audit only). */
  executionId?: string;
}

/** What a `network/policyRequest` asks about. */
export interface NetworkPolicyQuestion {
  /** `http`, `https_connect`, `socks5_tcp` or `socks5_udp`. */
  protocol: "http" | "https_connect" | "socks5_tcp" | "socks5_udp";
  /** The destination host as the child named it. */
  host: string;
  /** The destination port. */
  port: number;
}

/** Server → client request `network/policyRequest`. */
export interface NetworkPolicyRequestParams {
  /** The process whose proxy asks. */
  processId: string;
  /** The destination. */
  request: NetworkPolicyQuestion;
}

/** The client's answer to `network/policyRequest`. */
export interface NetworkPolicyRequestResult {
  /** Allow, deny (with a reason) or ask (denied now, with a reason). */
  decision: { type: "allow" } | { type: "deny"; reason: string } | { type: "ask"; reason: string };
}

/** Server notification `network/policyDecision`: one per policy decision of a launched proxy. */
export interface NetworkPolicyDecisionNotification {
  /** The process whose proxy decided. */
  processId: string;
  /** RFC 3339 with milliseconds. */
  timestamp: string;
  /** `domain` for host policy, `non_domain` for mode and state guards. */
  scope: "domain" | "non_domain";
  /** `allow`, `deny` or `ask`. */
  decision: "allow" | "deny" | "ask";
  /** `baseline_policy`, `mode_guard`, `proxy_state` or `decider`. */
  source: string;
  /** Why (`allow` for baseline allows). */
  reason: string;
  /** The protocol. */
  protocol: string;
  /** The destination host. */
  host: string;
  /** The destination port. */
  port: number;
  /** The HTTP method (`CONNECT` for tunnels); absent for SOCKS5. */
  method?: string;
  /** The child's address as the proxy saw it. */
  client: string;
  /** A client's allow overriding the policy. */
  policyOverride: boolean;
}

/** Prefix of every semantic error in a launch config (the reference's wording). */
const PROXY_CONFIG_ERROR = "invalid network proxy config";

/** Patterns a launch config may name: host names, IP literals and globs. */
const DOMAIN_PATTERN_SYNTAX = /^[A-Za-z0-9._*?:\[\]{},-]+$/;

function checkDomainPattern(pattern: string, path: string): void {
  if (pattern.trim() === "") {
    throw new DecodeError(`${PROXY_CONFIG_ERROR}: domain pattern is empty`, path);
  }
  if (!DOMAIN_PATTERN_SYNTAX.test(pattern)) {
    throw new DecodeError(
      `${PROXY_CONFIG_ERROR}: unsupported domain pattern syntax: ${pattern}`,
      path,
    );
  }
}

const credentialProvider = struct<CredentialProviderConfig>("CredentialProviderConfig", {
  env: optional(array(string)),
  patterns: optional(array(string)),
  url_prefixes: optional(array(string)),
  url_prefix_from_env: optional(string),
  auth: optional(array(unitEnum(["bearer", "token", "basic", "header"]))),
  header: optional(string),
  prefix: optional(string),
}, { denyUnknownFields: true });

const remoteProxyConfig = struct<RemoteNetworkProxyConfig>("RemoteNetworkProxyConfig", {
  enabled: boolean,
  enableSocks5: boolean,
  enableSocks5Udp: boolean,
  allowUpstreamProxy: boolean,
  dangerouslyAllowAllUnixSockets: boolean,
  mode: unitEnum(["limited", "full"]),
  allowLocalBinding: boolean,
  domains: optional(record(unitEnum(["none", "allow", "deny"]))),
  reviewDomains: optional(array(string)),
  // Read through a buffer by the reference: errors name a number's value.
  unixSockets: optional(buffered(record(unitEnum(["allow", "deny"])))),
  credentialMasking: withDefault(boolean, false),
  credentialProviders: optional(buffered(record(credentialProvider))),
  transparentTcp: withDefault(boolean, false),
});

const auditMetadata = struct<NetworkProxyAuditMetadata>("NetworkProxyAuditMetadata", {
  conversationId: nullable(string),
  appVersion: nullable(string),
  userAccountId: nullable(string),
  authMode: nullable(string),
  originator: nullable(string),
  userEmail: nullable(string),
  terminalType: nullable(string),
  model: nullable(string),
  slug: nullable(string),
});

/** `process/start.networkProxy`, with the reference's semantic checks. */
export const networkProxyLaunch: Decoder<NetworkProxyLaunch> = (v, path) => {
  const launch = struct<NetworkProxyLaunch>("RemoteNetworkProxyLaunchConfig", {
    proxy: remoteProxyConfig,
    auditMetadata: optional(auditMetadata),
    policyDecisionTimeoutMs: optional(u64),
    environmentId: optional(string),
    executionId: optional(string),
  })(v, path);
  if (launch.policyDecisionTimeoutMs === 0) {
    throw new DecodeError(
      "network policy decision callback timeout must be nonzero",
      join(path, "policyDecisionTimeoutMs"),
    );
  }
  const proxyPath = join(path, "proxy");
  if (!launch.proxy.enabled) {
    throw new DecodeError(
      `${PROXY_CONFIG_ERROR}: executor-local network proxy launch requires an enabled proxy`,
      join(proxyPath, "enabled"),
    );
  }
  if (launch.proxy.transparentTcp && !launch.proxy.enableSocks5) {
    throw new DecodeError(
      `${PROXY_CONFIG_ERROR}: transparent_tcp requires an enabled managed SOCKS5 proxy`,
      join(proxyPath, "transparentTcp"),
    );
  }
  for (const pattern of Object.keys(launch.proxy.domains ?? {})) {
    checkDomainPattern(pattern, join(proxyPath, "domains"));
  }
  for (const pattern of launch.proxy.reviewDomains ?? []) {
    checkDomainPattern(pattern, join(proxyPath, "reviewDomains"));
  }
  return launch;
};

/** What the server tells the client about a launched proxy's policy. */
export const NetworkNotification = {
  NetworkPolicyDecision: "network/policyDecision",
} as const;

/** Requests the server sends the client (a client must answer them). */
export const ServerRequest = {
  NetworkPolicyRequest: "network/policyRequest",
} as const;

/** The family's notification payloads. */
export interface NetworkNotifications {
  /** `network/policyDecision`. */
  [NetworkNotification.NetworkPolicyDecision]: NetworkPolicyDecisionNotification;
}
