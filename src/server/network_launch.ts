/**
 * `process/start.networkProxy` (capabilities `networkProxyLaunch` and
 * `networkProxyReviewDomains`): an egress proxy of the process's own, on
 * fresh loopback ports, with the policy the client sent. With a
 * `policyDecisionTimeoutMs`, hosts the policy does not allow (and review
 * domains it does) are put to the client as `network/policyRequest`; no
 * answer in time, an error answer, a malformed one or a lost connection all
 * deny. Every decision is reported as a `network/policyDecision`
 * notification. The proxy stops when the process closes.
 *
 * @module
 */

import type { NotificationName, NotificationParams } from "../protocol/spec.ts";
import type { Logger } from "../log/logger.ts";
import { defaultNetworkProxyConfig, type NetworkProxyConfig } from "../proxy/config.ts";
import {
  ask,
  type AuditMetadata,
  deny,
  type NetworkDecider,
  type NetworkDecision,
  type PolicyDecisionInput,
} from "../proxy/decision.ts";
import { NetworkProxy } from "../proxy/network_proxy.ts";
import type { CredentialBroker } from "../proxy/credential_broker.ts";
import { defaultMitmHome } from "../proxy/mitm/interceptor.ts";
import { ServerNotification, ServerRequest } from "../protocol/methods.ts";
import type {
  NetworkPolicyDecisionNotification,
  NetworkPolicyRequestParams,
  NetworkProxyLaunch,
  RemoteNetworkProxyConfig,
} from "../protocol/types.ts";
import { isRecord } from "../util/record.ts";

/** Questions one proxy may have open at once; more are denied at once. */
export const MAX_OPEN_QUESTIONS = 64;

/** Where a launched proxy asks and reports: the process's session. */
export interface PolicyChannel {
  /** A server → client request. */
  request(method: string, params: unknown, timeoutMs: number): Promise<unknown>;
  /** A best-effort notification. */
  notify<N extends NotificationName>(method: N, params: NotificationParams<N>): void;
}

/** The proxy configuration a launch describes (ephemeral loopback listeners). */
export function launchedProxyConfig(remote: RemoteNetworkProxyConfig): NetworkProxyConfig {
  return {
    ...defaultNetworkProxyConfig(),
    enabled: true,
    enable_socks5: remote.enableSocks5,
    enable_socks5_udp: remote.enableSocks5Udp,
    allow_upstream_proxy: remote.allowUpstreamProxy,
    dangerously_allow_all_unix_sockets: remote.dangerouslyAllowAllUnixSockets,
    mode: remote.mode,
    allow_local_binding: remote.allowLocalBinding,
    domains: remote.domains ?? null,
    unix_sockets: remote.unixSockets ?? null,
    // Credential masking replaces stand-ins inside intercepted TLS.
    mitm: remote.credentialMasking === true,
  };
}

/**
 * Reads a client's answer: `{decision:{type:"allow"}}`,
 * `{decision:{type:"deny"|"ask", reason}}`. Anything else throws (and so
 * denies).
 */
export function decisionFromAnswer(answer: unknown): NetworkDecision {
  const decision = isRecord(answer) ? answer.decision : undefined;
  if (!isRecord(decision)) throw new Error("network/policyRequest answer has no decision");
  if (decision.type === "allow") return { allow: true };
  if (
    (decision.type === "deny" || decision.type === "ask") && typeof decision.reason === "string"
  ) {
    return decision.type === "deny" ? deny(decision.reason) : ask(decision.reason);
  }
  throw new Error(`network/policyRequest answer has an invalid decision`);
}

/** The notification for one decision of the proxy of `processId`. */
export function decisionNotification(
  processId: string,
  d: PolicyDecisionInput,
  at: Date,
): NetworkPolicyDecisionNotification {
  return {
    processId,
    timestamp: at.toISOString(),
    scope: d.scope,
    decision: d.decision,
    source: d.source,
    reason: d.reason,
    protocol: d.protocol,
    host: d.host,
    port: d.port,
    ...(d.method !== undefined ? { method: d.method } : {}),
    client: d.client ?? "unknown",
    policyOverride: d.override ?? false,
  };
}

/** What the server adds to a launched proxy. */
export interface LaunchExtras {
  /** The process's masked credentials (see `credential_broker.ts`). */
  readonly broker?: CredentialBroker;
  /** The server's mandatory TCP upstream (`--tcp-upstream-proxy`). */
  readonly tcpUpstream?: URL;
}

/** Starts the proxy a `process/start` asked for. */
export function launchProcessProxy(
  launch: NetworkProxyLaunch,
  processId: string,
  channel: PolicyChannel,
  logger: Logger,
  { broker, tcpUpstream }: LaunchExtras = {},
): Promise<NetworkProxy> {
  const timeoutMs = launch.policyDecisionTimeoutMs;
  let asking = 0;
  const decider: NetworkDecider | undefined = timeoutMs === undefined
    ? undefined
    : async (request) => {
      // A child opening connections faster than the client answers gets
      // denials, not an ever-growing list of open questions.
      if (asking >= MAX_OPEN_QUESTIONS) {
        throw new Error(`${MAX_OPEN_QUESTIONS} policy questions already open`);
      }
      const params: NetworkPolicyRequestParams = {
        processId,
        request: { protocol: request.protocol, host: request.host, port: request.port },
      };
      asking++;
      try {
        const answer = await channel.request(
          ServerRequest.NetworkPolicyRequest,
          params,
          timeoutMs,
        );
        return decisionFromAnswer(answer);
      } finally {
        asking--;
      }
    };
  const meta = launch.auditMetadata ?? {};
  const auditMetadata: AuditMetadata = Object.fromEntries(
    Object.entries(meta).filter(([, v]) => typeof v === "string"),
  );
  return NetworkProxy.start(launchedProxyConfig(launch.proxy), {
    managed: true,
    logger,
    auditMetadata,
    ...(broker ? { broker } : {}),
    ...(tcpUpstream ? { tcpUpstream } : {}),
    // The CA (and the trust bundle children get) lives in the server's
    // Codex home, as the reference keeps it.
    mitm: { home: defaultMitmHome() },
    ...(decider ? { decider } : {}),
    ...(launch.proxy.reviewDomains ? { reviewDomains: launch.proxy.reviewDomains } : {}),
    // Decisions go to the client; the server's own log keeps them at debug.
    audit: (event) => logger.debug("proxy.policy_decision", event),
    onDecision: (decision, at) =>
      channel.notify(
        ServerNotification.NetworkPolicyDecision,
        decisionNotification(processId, decision, at),
      ),
  });
}
