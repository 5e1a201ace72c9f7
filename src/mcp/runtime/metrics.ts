/**
 * The MCP runtime's metrics (`McpConnectionManager.start({ metrics })`):
 * per server its state, each start's outcome and duration, the duration of
 * its first `tools/list`, tool calls by outcome and duration, and how often
 * a ready server was lost. The `server` label is a configured server's name
 * (bounded by the configuration); no tool arguments, URLs or commands are
 * ever labels. Read through {@linkcode McpRuntimeMetrics.set} like any of
 * this package's metrics.
 *
 * @module
 */

import { MetricSet, type Series } from "../../telemetry/aggregate.ts";

/** How a tool call ended: a result, a result flagged `isError`, or a failed request. */
export type ToolCallResult = "success" | "tool_error" | "error";

/** How a start ended. */
export type StartupResult = "ready" | "failed" | "cancelled";

/**
 * An MCP runtime's measurements.
 *
 * @example
 * ```ts
 * import { McpRuntimeMetrics } from "./metrics.ts";
 * const m = new McpRuntimeMetrics();
 * m.toolCall("docs", "success", 0.02);
 * console.log(m.toolCalls.total({ server: "docs" })); // 1
 * ```
 */
export class McpRuntimeMetrics {
  /** The metrics, in scope `exec-server.mcp`. */
  readonly set: MetricSet = new MetricSet("exec-server.mcp");
  /** Starts by `server` and `result`. */
  readonly startups: Series = this.set.counter(
    "mcp_server_startups_total",
    "Total number of MCP server starts, by server and outcome.",
  );
  /** Start durations by `server` and `result`. */
  readonly startupDuration: Series = this.set.histogram(
    "mcp_server_startup_duration_seconds",
    "Duration of MCP server starts in seconds (spawn or connect, initialize and the first tools/list).",
  );
  /** First `tools/list` durations by `server`. */
  readonly firstToolList: Series = this.set.histogram(
    "mcp_server_first_tool_list_duration_seconds",
    "Duration of an MCP server's first tools/list in seconds.",
  );
  /** Tool calls by `server` and `result`. */
  readonly toolCalls: Series = this.set.counter(
    "mcp_tool_calls_total",
    "Total number of MCP tool calls, by server and outcome.",
  );
  /** Tool call durations by `server` and `result`. */
  readonly toolCallDuration: Series = this.set.histogram(
    "mcp_tool_call_duration_seconds",
    "Duration of MCP tool calls in seconds.",
  );
  /** Ready servers lost, by `server` and `reason`. */
  readonly losses: Series = this.set.counter(
    "mcp_server_lost_total",
    "Total number of ready MCP servers that stopped serving (closed, or their login expired).",
  );
  #states: () => Iterable<readonly [string, string]> = () => [];

  /** Starts measuring. */
  constructor() {
    this.set.gauge(
      "mcp_server_state",
      "1 for each MCP server's current state (starting, ready, failed, cancelled, disabled).",
      () => [...this.#states()].map(([server, state]) => [{ server, state }, 1] as const),
    );
  }

  /** Reads each server's state from `states` at each collection (the runtime, once started). */
  track(states: () => Iterable<readonly [server: string, state: string]>): void {
    this.#states = states;
  }

  /** A start ended. */
  startup(server: string, result: StartupResult, seconds: number, firstListSeconds?: number): void {
    this.startups.add({ server, result });
    this.startupDuration.record({ server, result }, seconds);
    if (firstListSeconds !== undefined) this.firstToolList.record({ server }, firstListSeconds);
  }

  /** A tool call ended. */
  toolCall(server: string, result: ToolCallResult, seconds: number): void {
    this.toolCalls.add({ server, result });
    this.toolCallDuration.record({ server, result }, seconds);
  }

  /** A ready server stopped serving. */
  lost(server: string, reason: "closed" | "login_required"): void {
    this.losses.add({ server, reason });
  }
}
