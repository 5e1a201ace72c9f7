/**
 * The metrics of an MCP Streamable HTTP endpoint (`mcp-bridge --http`,
 * `serveMcpHttp({ metrics })`): sessions open now, sessions opened,
 * refused at the cap or failed to start, and sessions closed by why. Read
 * through {@linkcode McpSessionMetrics.set} like any of this package's
 * metrics.
 *
 * @module
 */

import { MetricSet, type Series } from "../telemetry/aggregate.ts";

/** Why a session ended: DELETE, idleness, its backing server ending, or the endpoint closing. */
export type SessionCloseReason = "deleted" | "idle" | "backend_ended" | "server_closing";

/**
 * An endpoint's session measurements.
 *
 * @example
 * ```ts
 * import { McpSessionMetrics } from "./session_metrics.ts";
 * const m = new McpSessionMetrics();
 * m.opened("refused");
 * console.log(m.sessions.total({ result: "refused" })); // 1
 * ```
 */
export class McpSessionMetrics {
  /** The metrics, in scope `exec-server.mcp-bridge`. */
  readonly set: MetricSet = new MetricSet("exec-server.mcp-bridge");
  /** New sessions asked for, by `result`: `opened`, `refused` (at the cap) or `failed`. */
  readonly sessions: Series = this.set.counter(
    "mcp_bridge_sessions_total",
    "Total number of MCP sessions asked for, by result (opened, refused at the cap, failed to start).",
  );
  /** Sessions closed by `reason`. */
  readonly closed: Series = this.set.counter(
    "mcp_bridge_sessions_closed_total",
    "Total number of MCP sessions closed, by reason.",
  );
  #open: () => number = () => 0;

  /** Starts measuring. */
  constructor() {
    this.set.gauge(
      "mcp_bridge_sessions_open",
      "Number of MCP sessions open (each its own server process for a bridge).",
      () => [[{}, this.#open()]],
    );
  }

  /** Reads the open sessions from `open` at each collection (the endpoint, once started). */
  track(open: () => number): void {
    this.#open = open;
  }

  /** A new session was opened, refused at the cap, or failed to start. */
  opened(result: "opened" | "refused" | "failed"): void {
    this.sessions.add({ result });
  }

  /** A session ended. */
  sessionClosed(reason: SessionCloseReason): void {
    this.closed.add({ reason });
  }
}
