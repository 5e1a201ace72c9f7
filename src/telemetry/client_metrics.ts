/**
 * The harness side's metric, as Codex's client names it: every RPC a
 * client attempts, by method, failures before the request left included
 * (`exec_server_client_requests_total{method}`, scope `codex`). Methods
 * outside the protocol are `unknown`. Read through
 * {@linkcode ExecClientMetrics.set} like any of this package's metrics.
 *
 * @module
 */

import { MetricSet, type Series } from "./aggregate.ts";
import { methodLabel } from "./method_label.ts";

/**
 * A client's requests (`connect({ metrics })`).
 *
 * @example
 * ```ts
 * import { ExecClientMetrics } from "./client_metrics.ts";
 * const m = new ExecClientMetrics();
 * m.request("process/start");
 * console.log(m.requests.total({ method: "process/start" })); // 1
 * ```
 */
export class ExecClientMetrics {
  /** The metrics, in the reference's `codex` scope. */
  readonly set: MetricSet = new MetricSet("codex");
  /** Attempts by `method`. */
  readonly requests: Series = this.set.counter(
    "exec_server_client_requests_total",
    "Total number of client-side exec-server RPC attempts, including local failures.",
  );

  /** A request is attempted. */
  request(method: string): void {
    const label = methodLabel(method);
    this.requests.cell(label, () => ({ method: label })).value++;
  }
}
