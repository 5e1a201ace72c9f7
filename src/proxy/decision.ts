/**
 * Policy requests, decisions, the decider hook, blocked-request records and
 * the `codex.network_proxy.policy_decision` audit event.
 *
 * @module
 */

import type { NetworkMode } from "./config.ts";

/** The protocol a policy question is about. */
export type PolicyProtocol = "http" | "https_connect" | "socks5_tcp" | "socks5_udp";

/** Who decided. */
export type DecisionSource = "baseline_policy" | "mode_guard" | "proxy_state" | "decider";

/** Why something was blocked. */
export type BlockReason =
  | "denied"
  | "not_allowed"
  | "not_allowed_local"
  | "method_not_allowed"
  | "mitm_required"
  | "mitm_hook_denied"
  | "proxy_disabled"
  | "unix_socket_unsupported"
  | "policy_denied";

/** A question to the policy. */
export interface NetworkPolicyRequest {
  /** Protocol. */
  readonly protocol: PolicyProtocol;
  /** Normalised host. */
  readonly host: string;
  /** Port. */
  readonly port: number;
  /** The listener's environment, if tagged. */
  readonly environmentId?: string;
  /** The client's address (`ip:port`). */
  readonly clientAddr?: string;
  /** HTTP method (`CONNECT` for tunnels; absent for SOCKS5). */
  readonly method?: string;
  /** The execution the request is attributed to. */
  readonly executionId?: string;
}

/** A decision. */
export type NetworkDecision =
  | { readonly allow: true }
  | {
    readonly allow: false;
    readonly reason: string;
    readonly source: DecisionSource;
    readonly decision: "deny" | "ask";
  };

/** Asks about hosts the allow list does not cover (never `denied` or local ones). */
export type NetworkDecider = (
  request: NetworkPolicyRequest,
) => NetworkDecision | Promise<NetworkDecision>;

/** A deny decision from a decider (an empty reason becomes `policy_denied`). */
export function deny(reason: string): NetworkDecision {
  return { allow: false, reason: reason || "policy_denied", source: "decider", decision: "deny" };
}

/** An ask decision from a decider. */
export function ask(reason: string): NetworkDecision {
  return { allow: false, reason: reason || "policy_denied", source: "decider", decision: "ask" };
}

/** A blocked request, as recorded and serialised. */
export interface BlockedRequest {
  /** Host. */
  host: string;
  /** Reason. */
  reason: string;
  /** Client address. */
  client: string | null;
  /** Method. */
  method: string | null;
  /** Mode at the time. */
  mode: NetworkMode | null;
  /** `http`, `http-connect`, `socks5`, `socks5-udp`, `https` (inside MITM), or a policy name. */
  protocol: string;
  /** `deny` or `ask`. */
  decision?: "deny" | "ask";
  /** Who decided. */
  source?: DecisionSource;
  /** Port. */
  port?: number;
  /** Unix seconds. */
  timestamp: number;
}

/** Most blocked requests kept. */
export const BLOCKED_BUFFER_SIZE = 200;

/** A ring of the latest blocked requests and a total count. */
export class BlockedRequests {
  #items: BlockedRequest[] = [];
  #total = 0;

  /** Records one (dropping the oldest beyond the bound). */
  push(record: BlockedRequest): void {
    this.#items.push(record);
    if (this.#items.length > BLOCKED_BUFFER_SIZE) this.#items.shift();
    this.#total++;
  }

  /** Everything blocked since start. */
  get total(): number {
    return this.#total;
  }

  /** A copy of the buffer. */
  snapshot(): BlockedRequest[] {
    return this.#items.map((r) => ({ ...r }));
  }

  /** Empties the buffer, returning what it held. */
  drain(): BlockedRequest[] {
    const items = this.#items;
    this.#items = [];
    return items;
  }
}

/** The violation log line for a record. */
export function violationLogLine(record: BlockedRequest): string {
  return `CODEX_NETWORK_POLICY_VIOLATION ${JSON.stringify(record)}`;
}

/** Optional identity fields copied into every audit event. */
export interface AuditMetadata {
  /** `conversation.id`. */
  readonly conversationId?: string;
  /** `app.version`. */
  readonly appVersion?: string;
  /** `auth_mode`. */
  readonly authMode?: string;
  /** `originator`. */
  readonly originator?: string;
  /** `user.account_id`. */
  readonly userAccountId?: string;
  /** `user.email`. */
  readonly userEmail?: string;
  /** `terminal.type`. */
  readonly terminalType?: string;
  /** `model`. */
  readonly model?: string;
  /** `slug`. */
  readonly slug?: string;
}

/** The audit event's name. */
export const POLICY_DECISION_EVENT = "codex.network_proxy.policy_decision";

/** One audit event's fields (dotted names as emitted). */
export type PolicyDecisionEvent = Record<string, string | number | boolean>;

/** Inputs of {@linkcode policyDecisionEvent}. */
export interface PolicyDecisionInput {
  /** `domain` for host policy, `non_domain` for mode/state guards. */
  readonly scope: "domain" | "non_domain";
  /** `allow`, `deny` or `ask`. */
  readonly decision: "allow" | "deny" | "ask";
  /** Who decided. */
  readonly source: DecisionSource;
  /** Reason (`allow` for baseline allows). */
  readonly reason: string;
  /** Protocol. */
  readonly protocol: string;
  /** Host (or `unix-socket`). */
  readonly host: string;
  /** Port (0 for unix sockets). */
  readonly port: number;
  /** Method. */
  readonly method?: string | undefined;
  /** Client address. */
  readonly client?: string | undefined;
  /** Execution id. */
  readonly executionId?: string | undefined;
  /** A decider's allow overriding the allow list. */
  readonly override?: boolean;
}

/** Builds an audit event (no URLs, paths or queries, ever). */
export function policyDecisionEvent(
  input: PolicyDecisionInput,
  metadata: AuditMetadata = {},
  now: Date = new Date(),
): PolicyDecisionEvent {
  const event: PolicyDecisionEvent = {
    "event.name": POLICY_DECISION_EVENT,
    "event.timestamp": now.toISOString(),
  };
  const meta: Array<[string, string | undefined]> = [
    ["conversation.id", metadata.conversationId],
    ["app.version", metadata.appVersion],
    ["auth_mode", metadata.authMode],
    ["originator", metadata.originator],
    ["user.account_id", metadata.userAccountId],
    ["user.email", metadata.userEmail],
    ["terminal.type", metadata.terminalType],
    ["model", metadata.model],
    ["slug", metadata.slug],
  ];
  for (const [k, v] of meta) if (v !== undefined) event[k] = v;
  event["network.policy.scope"] = input.scope;
  event["network.policy.decision"] = input.decision;
  event["network.policy.source"] = input.source;
  event["network.policy.reason"] = input.reason;
  event["network.transport.protocol"] = input.protocol;
  event["server.address"] = input.host;
  event["server.port"] = input.port;
  event["http.request.method"] = input.method ?? "none";
  event["client.address"] = input.client ?? "unknown";
  if (input.executionId !== undefined) event["execution.id"] = input.executionId;
  event["network.policy.override"] = input.override ?? false;
  return event;
}
