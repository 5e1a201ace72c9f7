/**
 * The egress proxy's metrics: connections by listener, policy decisions by
 * protocol, decision, source and reason, TLS interceptions by outcome, and
 * upstream failures by protocol. Every label value is from a fixed set
 * (anything else is `other`); no host, port, client or URL is ever one.
 * Read through the proxy's {@linkcode ProxyMetrics.set} like any of this
 * package's metrics (Prometheus, OTLP).
 *
 * @module
 */

import { MetricSet, type Series } from "../telemetry/aggregate.ts";
import type { PolicyDecisionInput } from "./decision.ts";

/** A proxy listener. */
export type ProxyListener = "http" | "socks5";

/** Where an upstream failed: a forwarded request, a tunnel, SOCKS5 TCP, or inside an intercepted tunnel. */
export type UpstreamProtocol = "http" | "https_connect" | "socks5_tcp" | "mitm";

const PROTOCOLS = new Set(["http", "https_connect", "socks5_tcp", "socks5_udp"]);
const SOURCES = new Set(["baseline_policy", "mode_guard", "proxy_state", "decider"]);
const REASONS = new Set([
  "allow",
  "denied",
  "not_allowed",
  "not_allowed_local",
  "method_not_allowed",
  "mitm_required",
  "mitm_hook_denied",
  "proxy_disabled",
  "unix_socket_unsupported",
  "policy_denied",
]);
const bounded = (set: ReadonlySet<string>, value: string) => set.has(value) ? value : "other";

/**
 * A proxy's measurements (`NetworkProxy.start({ metrics })`).
 *
 * @example
 * ```ts
 * import { ProxyMetrics } from "./metrics.ts";
 * const m = new ProxyMetrics();
 * m.connectionOpened("http");
 * console.log(m.connections.total({ listener: "http" })); // 1
 * ```
 */
export class ProxyMetrics {
  /** The metrics, in scope `exec-server.proxy`. */
  readonly set: MetricSet = new MetricSet("exec-server.proxy");
  #active = new Map<ProxyListener, number>([["http", 0], ["socks5", 0]]);
  /** Accepted connections by `listener`. */
  readonly connections: Series = this.set.counter(
    "network_proxy_connections_total",
    "Total number of connections accepted by the egress proxy's listeners.",
  );
  /** Policy decisions by `protocol`, `decision`, `source`, `reason`. */
  readonly decisions: Series = this.set.counter(
    "network_proxy_decisions_total",
    "Total number of egress policy decisions.",
  );
  /** TLS interceptions by `result`. */
  readonly intercepts: Series = this.set.counter(
    "network_proxy_mitm_intercepts_total",
    "Total number of intercepted TLS tunnels, by whether the client's handshake succeeded.",
  );
  /** Upstream failures by `protocol`. */
  readonly upstreamErrors: Series = this.set.counter(
    "network_proxy_upstream_errors_total",
    "Total number of allowed requests whose upstream could not be reached or failed.",
  );

  /** Starts measuring. */
  constructor() {
    this.set.gauge(
      "network_proxy_connections_active",
      "Number of open connections on the egress proxy's listeners.",
      () => [...this.#active].map(([listener, n]) => [{ listener }, n] as const),
    );
  }

  /** A listener accepted a connection. */
  connectionOpened(listener: ProxyListener): void {
    this.#active.set(listener, this.#active.get(listener)! + 1);
    this.connections.add({ listener });
  }

  /** A connection ended. */
  connectionClosed(listener: ProxyListener): void {
    this.#active.set(listener, Math.max(0, this.#active.get(listener)! - 1));
  }

  /** The policy decided. */
  decision(input: PolicyDecisionInput): void {
    this.decisions.add({
      protocol: bounded(PROTOCOLS, input.protocol),
      decision: input.decision,
      source: bounded(SOURCES, input.source),
      reason: bounded(REASONS, input.reason),
    });
  }

  /** A TLS tunnel was intercepted (`error`: the client's handshake failed). */
  intercept(result: "success" | "error"): void {
    this.intercepts.add({ result });
  }

  /** An allowed request's upstream failed. */
  upstreamError(protocol: UpstreamProtocol): void {
    this.upstreamErrors.add({ protocol });
  }
}
