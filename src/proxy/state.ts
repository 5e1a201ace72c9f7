/**
 * The live policy: the current compiled configuration (reloaded from its
 * source when that changes), host decisions with the decider and audit
 * events, the blocked-request ring, and live edits (mode, allow/deny
 * entries, whole-config replacement — except the keys a running proxy
 * cannot change).
 *
 * @module
 */

import type { ProxyMetrics } from "./metrics.ts";
import type { CredentialBroker } from "./credential_broker.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import {
  effectiveDomains,
  NetworkConfigError,
  type NetworkMode,
  type NetworkProxyConfig,
} from "./config.ts";
import {
  type AuditMetadata,
  type BlockedRequest,
  BlockedRequests,
  type NetworkDecider,
  type NetworkDecision,
  type NetworkPolicyRequest,
  POLICY_DECISION_EVENT,
  type PolicyDecisionEvent,
  policyDecisionEvent,
  type PolicyDecisionInput,
  violationLogLine,
} from "./decision.ts";
import { compileDomainPatterns, type DomainMatcher, normalizePattern } from "./domain_pattern.ts";
import {
  NetworkConstraintError,
  type NetworkProxyConstraints,
  validatePolicyAgainstConstraints,
} from "./constraints.ts";
import { normalizeHost } from "../util/host.ts";
import {
  buildConfigState,
  type ConfigState,
  hostBlocked,
  type HostResolver,
  systemResolver,
} from "./policy.ts";

/** Runs an edit; a constraint violation is reported as `<field> constrained by managed config: …`. */
function constrained(field: string, edit: () => void): void {
  try {
    edit();
  } catch (error) {
    if (!(error instanceof NetworkConstraintError)) throw error;
    throw new NetworkConstraintError(
      error.field,
      error.candidate,
      error.allowed,
      `${field} constrained by managed config: ${error.message}`,
    );
  }
}

/** Keys a running proxy refuses to change. */
export const FIXED_CONFIG_KEYS = [
  "enabled",
  "proxy_url",
  "socks_url",
  "enable_socks5",
  "enable_socks5_udp",
] as const;

/** Where a configuration comes from, for live reload. */
export interface ConfigSource {
  /** For logs. */
  readonly label: string;
  /** A new configuration when the source changed since the last call, else `null`. */
  maybeReload(): NetworkProxyConfig | null;
}

/** Options of {@linkcode NetworkProxyState}. */
export interface NetworkProxyStateOptions {
  /** Asked about hosts the allow list does not cover. */
  readonly decider?: NetworkDecider;
  /** Awaited with each blocked record (keep it fast). */
  readonly observer?: (record: BlockedRequest) => void | Promise<void>;
  /** Receives every audit event (default: logged at info). */
  readonly audit?: (event: PolicyDecisionEvent) => void;
  /** Where decisions, connections, interceptions and upstream failures are counted. */
  readonly metrics?: ProxyMetrics | null;
  /** Told of every policy decision as it is made (besides the audit event). */
  readonly onDecision?: (decision: PolicyDecisionInput, at: Date) => void;
  /** Identity fields for audit events. */
  readonly auditMetadata?: AuditMetadata;
  /** Name resolution for policy checks and dials. */
  readonly resolver?: HostResolver;
  /** Live reload source. */
  readonly source?: ConfigSource;
  /** Where diagnostics go. */
  readonly logger?: Logger;
  /** Environment lookup for hook secrets. */
  readonly env?: (name: string) => string | undefined;
  /** Managed limits every configuration must stay within ({@linkcode NetworkProxyConstraints}). */
  readonly constraints?: NetworkProxyConstraints;
  /** Allow-list misses are denied outright: the decider is never asked. */
  readonly managedAllowedDomainsOnly?: boolean;
  /**
   * Domain patterns the decider is asked about even when the allow list
   * covers them (never when the deny list or the local rule refuses them).
   */
  readonly reviewDomains?: readonly string[];
  /**
   * Credential masking: hosts it binds are intercepted (TLS) and their
   * requests' stand-in credentials replaced (see `credential_broker.ts`).
   */
  readonly broker?: CredentialBroker;
}

/** See the module documentation. */
export class NetworkProxyState {
  #state: ConfigState;
  readonly #blocked = new BlockedRequests();
  readonly #options: NetworkProxyStateOptions;
  readonly #logger: Logger;
  readonly #review: DomainMatcher | null;
  /** Name resolution used for policy checks and dials. */
  readonly resolver: HostResolver;
  /** The proxy's metrics, when it is measured. */
  readonly metrics: ProxyMetrics | null;

  /** Compiles `config` (throws {@linkcode NetworkConfigError} when invalid). */
  constructor(config: NetworkProxyConfig, options: NetworkProxyStateOptions = {}) {
    this.#options = options;
    this.#logger = options.logger ?? nullLogger;
    this.resolver = options.resolver ?? systemResolver;
    this.metrics = options.metrics ?? null;
    if (options.constraints) validatePolicyAgainstConstraints(config, options.constraints);
    this.#state = buildConfigState(config, options.env);
    this.#review = options.reviewDomains?.length
      ? compileDomainPatterns(options.reviewDomains, { allowGlobal: true })
      : null;
  }

  /** The credential broker of a masked process, if any. */
  get broker(): CredentialBroker | null {
    return this.#options.broker ?? null;
  }

  /** The managed constraints (empty when unmanaged). */
  get constraints(): NetworkProxyConstraints {
    return this.#options.constraints ?? {};
  }

  /** The current compiled configuration (after a reload check). */
  get current(): ConfigState {
    const source = this.#options.source;
    if (source) {
      try {
        const next = source.maybeReload();
        if (next) this.replaceConfig(next);
        else return this.#state;
        this.#logger.info("proxy.config_reloaded", { source: source.label });
      } catch (error) {
        this.#logger.error("proxy.config_reload_failed", {
          source: source.label,
          error: (error as Error).message,
        });
      }
    }
    return this.#state;
  }

  /** The current configuration. */
  get config(): NetworkProxyConfig {
    return this.current.config;
  }

  /**
   * Replaces the configuration; the fixed keys must not change and the
   * managed constraints must hold (throws {@linkcode NetworkConstraintError}).
   */
  replaceConfig(config: NetworkProxyConfig): void {
    for (const key of FIXED_CONFIG_KEYS) {
      if (config[key] !== this.#state.config[key]) {
        throw new NetworkConfigError(`cannot update network.${key} on a running proxy`);
      }
    }
    if (this.#options.constraints) {
      validatePolicyAgainstConstraints(config, this.#options.constraints);
    }
    const next = buildConfigState(config, this.#options.env);
    this.#logDiff(this.#state.config, config);
    this.#state = next;
  }

  #logDiff(before: NetworkProxyConfig, after: NetworkProxyConfig): void {
    const a = effectiveDomains(before.domains);
    const b = effectiveDomains(after.domains);
    for (const list of ["allow", "deny"] as const) {
      const name = list === "allow" ? "allowlist" : "denylist";
      for (const k of Object.keys(b)) {
        if (b[k] === list && a[k] !== list) {
          this.#logger.info("proxy.config_entry_added", {
            list: name,
            entry: k,
            message: `config entry added to ${name}: ${k}`,
          });
        }
      }
      for (const k of Object.keys(a)) {
        if (a[k] === list && b[k] !== list) {
          this.#logger.info("proxy.config_entry_removed", {
            list: name,
            entry: k,
            message: `config entry removed from ${name}: ${k}`,
          });
        }
      }
    }
  }

  /** Switches the mode (within the managed constraints). */
  setMode(mode: NetworkMode): void {
    constrained("network.mode", () => this.replaceConfig({ ...this.#state.config, mode }));
  }

  /** Allows a host (removing it from the deny list); no-op if present. */
  addAllowedDomain(host: string): void {
    this.#setDomain(host, "allow");
  }

  /** Denies a host (removing it from the allow list); no-op if present. */
  addDeniedDomain(host: string): void {
    this.#setDomain(host, "deny");
  }

  #setDomain(host: string, value: "allow" | "deny"): void {
    const key = normalizePattern(host);
    if (key === "") throw new NetworkConfigError("empty domain");
    const domains = { ...effectiveDomains(this.#state.config.domains) };
    if (domains[key] === value) return;
    domains[key] = value;
    constrained(
      value === "allow" ? "network.allowed_domains" : "network.denied_domains",
      () => this.replaceConfig({ ...this.#state.config, domains }),
    );
  }

  /** Emits an audit event. */
  audit(input: PolicyDecisionInput): void {
    const now = new Date();
    const event = policyDecisionEvent(input, this.#options.auditMetadata, now);
    this.metrics?.decision(input);
    try {
      this.#options.onDecision?.(input, now);
    } catch (error) {
      this.#logger.warn("proxy.decision_observer_failed", { error: (error as Error).message });
    }
    if (this.#options.audit) this.#options.audit(event);
    else this.#logger.info(POLICY_DECISION_EVENT, event);
  }

  /**
   * The host policy with the decider: allowed → allow; `not_allowed` with a
   * decider → its answer (source `decider`); otherwise deny. Audited.
   */
  async evaluateHostPolicy(request: NetworkPolicyRequest): Promise<NetworkDecision> {
    const state = this.current;
    const verdict = await hostBlocked(state, request.host, this.resolver);
    const base = {
      scope: "domain" as const,
      protocol: request.protocol,
      host: request.host,
      port: request.port,
      method: request.method,
      client: request.clientAddr,
      executionId: request.executionId,
    };
    const decider = this.#options.managedAllowedDomainsOnly ? undefined : this.#options.decider;
    const reviewed = verdict.allowed && decider !== undefined &&
      (this.#review?.matches(normalizeHost(request.host)) ?? false);
    if (verdict.allowed && !reviewed) {
      this.audit({ ...base, decision: "allow", source: "baseline_policy", reason: "allow" });
      return { allow: true };
    }
    if (decider && (reviewed || (!verdict.allowed && verdict.reason === "not_allowed"))) {
      let answer: NetworkDecision;
      try {
        answer = await decider(request);
      } catch (error) {
        this.#logger.warn("proxy.decider_failed", { error: (error as Error).message });
        answer = { allow: false, reason: "not_allowed", source: "decider", decision: "deny" };
      }
      if (answer.allow) {
        this.audit({
          ...base,
          decision: "allow",
          source: "decider",
          reason: "not_allowed",
          override: true,
        });
        return answer;
      }
      const decided = { ...answer, source: "decider" as const };
      this.audit({
        ...base,
        decision: decided.decision,
        source: "decider",
        reason: decided.reason,
      });
      return decided;
    }
    const reason = verdict.allowed ? "not_allowed" : verdict.reason;
    this.audit({ ...base, decision: "deny", source: "baseline_policy", reason });
    return { allow: false, reason, source: "baseline_policy", decision: "deny" };
  }

  /** Records a blocked request (ring, total, violation log line, observer). */
  async recordBlocked(
    record: Omit<BlockedRequest, "timestamp" | "mode"> & { mode?: NetworkMode | null },
  ): Promise<void> {
    const full: BlockedRequest = {
      ...record,
      host: normalizeHost(record.host) || record.host,
      mode: record.mode === undefined ? this.#state.config.mode : record.mode,
      timestamp: Math.floor(Date.now() / 1000),
    };
    this.#blocked.push(full);
    this.#logger.debug("proxy.request_blocked", {
      host: full.host,
      reason: full.reason,
      message: violationLogLine(full),
    });
    try {
      await this.#options.observer?.(full);
    } catch (error) {
      this.#logger.warn("proxy.observer_failed", { error: (error as Error).message });
    }
  }

  /** A copy of the blocked ring. */
  blockedSnapshot(): BlockedRequest[] {
    return this.#blocked.snapshot();
  }

  /** Empties the blocked ring. */
  drainBlocked(): BlockedRequest[] {
    return this.#blocked.drain();
  }

  /** Blocked requests since start. */
  get blockedTotal(): number {
    return this.#blocked.total;
  }
}
