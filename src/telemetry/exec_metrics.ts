/**
 * The exec-server's metrics, named, described, typed and bucketed as the
 * reference's (Codex 0.171.0, probed with an OTLP receiver): connections
 * by transport, requests by method and result with their queue, run and
 * total durations, processes active, finished and their duration.
 *
 * Built on any `@opentelemetry/api` `Meter` (the SDK's, Deno's built-in
 * one, or a test's); {@linkcode ExecServerMetrics} is what the server
 * calls, and costs nothing when the server has none. Label values are
 * bounded: methods outside the protocol become `unknown`; no ids, commands,
 * paths or hosts are ever labels.
 *
 * @module
 */

import type { Attributes, Meter, ObservableResult } from "@opentelemetry/api";
import { REQUESTS } from "../protocol/spec.ts";

/** How a connection reached the server. */
export type MetricsTransport = "relay" | "stdio" | "websocket";

/** How a request ended: answered with a result, with an error, or its connection went first. */
export type RequestResult = "success" | "error" | "disconnected";

/** The reference's histogram bounds, in seconds. */
export const DURATION_BOUNDS_SECONDS: readonly number[] = [
  0,
  0.005,
  0.01,
  0.025,
  0.05,
  0.075,
  0.1,
  0.25,
  0.5,
  0.75,
  1,
  2.5,
  5,
  7.5,
  10,
  12,
  15,
  20,
  30,
  60,
  120,
];

const TRANSPORTS: readonly MetricsTransport[] = ["websocket", "relay", "stdio"];
const KNOWN_METHODS: ReadonlySet<string> = new Set(Object.keys(REQUESTS));

/** A method name as a label: the protocol's own, anything else `unknown`. */
export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : "unknown";
}

/** Timings of one request, in seconds (see {@linkcode ExecServerMetrics.request}). */
export interface RequestTimings {
  /** From receipt until its handler started (waiting for its lane or its turn). */
  readonly queuedSeconds: number;
  /** From its handler's start until its answer was enqueued. */
  readonly runSeconds: number;
}

/**
 * The exec-server's instruments on a `Meter`.
 *
 * @example
 * ```ts
 * import { metrics } from "@opentelemetry/api";
 * import { ExecServerMetrics } from "./exec_metrics.ts";
 * const m = new ExecServerMetrics(metrics.getMeter("codex"));
 * m.connectionOpened("stdio");
 * m.request("initialize", "success", { queuedSeconds: 0, runSeconds: 0.001 });
 * m.connectionClosed("stdio");
 * ```
 */
export class ExecServerMetrics {
  #active = new Map<MetricsTransport, number>(TRANSPORTS.map((t) => [t, 0]));
  #processes = 0;
  #connections;
  #requests;
  #requestDuration;
  #queueDuration;
  #totalDuration;
  #processesFinished;
  #processDuration;

  /** Creates the instruments on `meter` (the reference's scope is named `codex`). */
  constructor(meter: Meter) {
    const histogram = (name: string, description: string) =>
      meter.createHistogram(name, {
        description,
        unit: "s",
        advice: { explicitBucketBoundaries: [...DURATION_BOUNDS_SECONDS] },
      });
    meter.createObservableGauge("exec_server_connections_active", {
      description: "Number of active exec-server connections.",
    }).addCallback((result: ObservableResult<Attributes>) => {
      for (const [transport, n] of this.#active) result.observe(n, { transport });
    });
    meter.createObservableGauge("exec_server_processes_active", {
      description: "Number of active exec-server processes.",
    }).addCallback((result: ObservableResult<Attributes>) => result.observe(this.#processes));
    this.#connections = meter.createCounter("exec_server_connections_total", {
      description: "Total number of accepted exec-server connections.",
    });
    this.#requests = meter.createCounter("exec_server_requests_total", {
      description: "Total number of exec-server requests.",
    });
    this.#requestDuration = histogram(
      "exec_server_request_duration_seconds",
      "Duration of exec-server requests in seconds.",
    );
    this.#queueDuration = histogram(
      "exec_server_request_queue_duration_seconds",
      "Time exec-server requests spend queued before execution in seconds.",
    );
    this.#totalDuration = histogram(
      "exec_server_request_total_duration_seconds",
      "Total exec-server request duration in seconds, including queueing, from decoded receipt until response enqueue or disconnection.",
    );
    this.#processesFinished = meter.createCounter("exec_server_processes_finished_total", {
      description: "Total number of finished exec-server processes.",
    });
    this.#processDuration = histogram(
      "exec_server_process_duration_seconds",
      "Duration of exec-server processes in seconds.",
    );
    // Codex's own start counter: once per program run, not per child (the
    // reference counts 1 for a server that ran three processes).
    meter.createCounter("codex.process.start").add(1, { originator: "other" });
  }

  /** A connection was accepted. */
  connectionOpened(transport: MetricsTransport): void {
    this.#active.set(transport, this.#active.get(transport)! + 1);
    this.#connections.add(1, { transport });
  }

  /** A connection ended. */
  connectionClosed(transport: MetricsTransport): void {
    this.#active.set(transport, Math.max(0, this.#active.get(transport)! - 1));
  }

  /** A request was answered (or its connection went first). */
  request(method: string, result: RequestResult, timings: RequestTimings): void {
    const label = methodLabel(method);
    const attributes = { method: label, result };
    this.#requests.add(1, attributes);
    this.#queueDuration.record(timings.queuedSeconds, { method: label });
    this.#requestDuration.record(timings.runSeconds, attributes);
    this.#totalDuration.record(timings.queuedSeconds + timings.runSeconds, attributes);
  }

  /** A process started. */
  processStarted(): void {
    this.#processes++;
  }

  /** A process finished: `success` when it exited with 0, else `error`. */
  processFinished(exitCode: number | null, seconds: number): void {
    this.#processes = Math.max(0, this.#processes - 1);
    const result = exitCode === 0 ? "success" : "error";
    this.#processesFinished.add(1, { result });
    this.#processDuration.record(seconds, { result });
  }
}
