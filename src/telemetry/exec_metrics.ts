/**
 * The exec-server's metrics, named, described, typed and bucketed as the
 * reference's (Codex 0.171.0, probed with an OTLP receiver): connections
 * by transport, requests by method and result with their queue, run and
 * total durations, processes active, finished and their duration.
 *
 * Measured without the OpenTelemetry SDK on the request path: a request
 * costs a few array increments here (the SDK's own instruments cost
 * ~1.6 µs a request — a tenth of a pipelined request's whole CPU), and the
 * SDK reads the totals at collection through a `MetricProducer`
 * ({@linkcode ExecServerMetrics.producer}) given to its readers — one per
 * reader, cumulative for Prometheus, delta for an OTLP push. Label values
 * are bounded: methods outside the protocol become `unknown`; no ids,
 * commands, paths or hosts are ever labels.
 *
 * @module
 */

import type { Attributes } from "@opentelemetry/api";
import type { MetricData, ScopeMetrics } from "@opentelemetry/sdk-metrics";
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
 * What a reader collects: an OpenTelemetry SDK `CollectionResult` (its
 * `resourceMetrics.scopeMetrics` are the SDK's `ScopeMetrics`).
 */
export interface MetricsCollection {
  /** The metrics, in one `codex` scope (the resource is the reader's provider's). */
  readonly resourceMetrics: { readonly scopeMetrics: readonly unknown[] };
  /** Always empty: nothing here can fail. */
  readonly errors: readonly unknown[];
}

/**
 * An OpenTelemetry SDK `MetricProducer`, structurally: pass it to a
 * reader's `metricProducers` (as `MetricProducer`; this package does not
 * re-export the SDK's types).
 */
export interface MetricsProducer {
  /** The measurements now. */
  collect(): Promise<MetricsCollection>;
}

/** The SDK's enums, as their values (this module loads no SDK code). */
const SUM = 3 as MetricData["dataPointType"];
const GAUGE = 2 as MetricData["dataPointType"];
const HISTOGRAM = 0 as MetricData["dataPointType"];
const DELTA = 0 as MetricData["aggregationTemporality"];
const CUMULATIVE = 1 as MetricData["aggregationTemporality"];
const INT = 0;
const DOUBLE = 1;

/** One label set's running totals: a sum's value, or a histogram's buckets. */
interface Cell {
  readonly attributes: Attributes;
  value: number;
  readonly counts: number[] | null;
}

interface Series {
  readonly name: string;
  readonly description: string;
  readonly unit: string;
  readonly kind: "sum" | "histogram";
  readonly cells: Map<string, Cell>;
}

function series(name: string, description: string, kind: "sum" | "histogram"): Series {
  return { name, description, unit: kind === "histogram" ? "s" : "", kind, cells: new Map() };
}

function cell(s: Series, key: string, attributes: () => Attributes): Cell {
  let c = s.cells.get(key);
  if (c === undefined) {
    c = {
      attributes: attributes(),
      value: 0,
      counts: s.kind === "histogram" ? new Array(DURATION_BOUNDS_SECONDS.length + 1).fill(0) : null,
    };
    s.cells.set(key, c);
  }
  return c;
}

/** Adds `seconds` to a histogram cell (`value` is its sum; the last count is `+Inf`). */
function observe(c: Cell, seconds: number): void {
  let i = 0;
  while (i < DURATION_BOUNDS_SECONDS.length && seconds > DURATION_BOUNDS_SECONDS[i]!) i++;
  c.counts![i]!++;
  c.value += seconds;
}

type HrTime = [number, number];
const hrTime = (ms: number): HrTime => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];

/**
 * The exec-server's measurements, read by OpenTelemetry readers through
 * {@linkcode ExecServerMetrics.producer}.
 *
 * @example
 * ```ts
 * import { ExecServerMetrics } from "./exec_metrics.ts";
 * const m = new ExecServerMetrics();
 * m.connectionOpened("stdio");
 * m.request("initialize", "success", { queuedSeconds: 0, runSeconds: 0.001 });
 * const { resourceMetrics } = await m.producer("cumulative").collect();
 * const [scope] = resourceMetrics.scopeMetrics as Array<{ metrics: Array<{ descriptor: { name: string } }> }>;
 * console.log(scope!.metrics.map((x) => x.descriptor.name));
 * ```
 */
export class ExecServerMetrics {
  #active = new Map<MetricsTransport, number>(TRANSPORTS.map((t) => [t, 0]));
  #processes = 0;
  readonly #start = Date.now();
  readonly #connections = series(
    "exec_server_connections_total",
    "Total number of accepted exec-server connections.",
    "sum",
  );
  readonly #requests = series(
    "exec_server_requests_total",
    "Total number of exec-server requests.",
    "sum",
  );
  readonly #requestDuration = series(
    "exec_server_request_duration_seconds",
    "Duration of exec-server requests in seconds.",
    "histogram",
  );
  readonly #queueDuration = series(
    "exec_server_request_queue_duration_seconds",
    "Time exec-server requests spend queued before execution in seconds.",
    "histogram",
  );
  readonly #totalDuration = series(
    "exec_server_request_total_duration_seconds",
    "Total exec-server request duration in seconds, including queueing, from decoded receipt until response enqueue or disconnection.",
    "histogram",
  );
  readonly #processesFinished = series(
    "exec_server_processes_finished_total",
    "Total number of finished exec-server processes.",
    "sum",
  );
  readonly #processDuration = series(
    "exec_server_process_duration_seconds",
    "Duration of exec-server processes in seconds.",
    "histogram",
  );
  // Codex's own start counter: once per program run, not per child (the
  // reference counts 1 for a server that ran three processes).
  readonly #started = series("codex.process.start", "", "sum");

  /** Starts measuring (this server run counts once in `codex.process.start`). */
  constructor() {
    cell(this.#started, "other", () => ({ originator: "other" })).value = 1;
  }

  /** A connection was accepted. */
  connectionOpened(transport: MetricsTransport): void {
    this.#active.set(transport, this.#active.get(transport)! + 1);
    cell(this.#connections, transport, () => ({ transport })).value++;
  }

  /** A connection ended. */
  connectionClosed(transport: MetricsTransport): void {
    this.#active.set(transport, Math.max(0, this.#active.get(transport)! - 1));
  }

  /** A request was answered (or its connection went first). */
  request(method: string, result: RequestResult, timings: RequestTimings): void {
    const label = methodLabel(method);
    const key = `${label} ${result}`;
    const attributes = () => ({ method: label, result });
    cell(this.#requests, key, attributes).value++;
    observe(cell(this.#queueDuration, label, () => ({ method: label })), timings.queuedSeconds);
    observe(cell(this.#requestDuration, key, attributes), timings.runSeconds);
    observe(cell(this.#totalDuration, key, attributes), timings.queuedSeconds + timings.runSeconds);
  }

  /** A process started. */
  processStarted(): void {
    this.#processes++;
  }

  /** A process finished: `success` when it exited with 0, else `error`. */
  processFinished(exitCode: number | null, seconds: number): void {
    this.#processes = Math.max(0, this.#processes - 1);
    const result = exitCode === 0 ? "success" : "error";
    cell(this.#processesFinished, result, () => ({ result })).value++;
    observe(cell(this.#processDuration, result, () => ({ result })), seconds);
  }

  /**
   * A `MetricProducer` for one reader (`metricProducers: [m.producer(…)]`):
   * `cumulative` totals since the start (Prometheus), or `delta` — what
   * changed since this producer's previous collection (the reference's
   * OTLP push; label sets without a change are left out, as the SDK does).
   */
  producer(temporality: "cumulative" | "delta"): MetricsProducer {
    const previous = new Map<Cell, { value: number; counts: number[] | null }>();
    let last = this.#start;
    return {
      collect: () => {
        const now = Date.now();
        const metrics: MetricData[] = [];
        const gauge = (name: string, description: string, points: Array<[Attributes, number]>) =>
          metrics.push({
            descriptor: { name, description, unit: "", valueType: INT },
            aggregationTemporality: CUMULATIVE,
            dataPointType: GAUGE,
            dataPoints: points.map(([attributes, value]) => ({
              startTime: hrTime(now),
              endTime: hrTime(now),
              attributes,
              value,
            })),
          } as MetricData);
        gauge(
          "exec_server_connections_active",
          "Number of active exec-server connections.",
          [...this.#active].map(([transport, n]) => [{ transport }, n]),
        );
        gauge("exec_server_processes_active", "Number of active exec-server processes.", [[
          {},
          this.#processes,
        ]]);
        const all = [
          this.#started,
          this.#connections,
          this.#queueDuration,
          this.#requests,
          this.#requestDuration,
          this.#totalDuration,
          this.#processesFinished,
          this.#processDuration,
        ];
        for (const s of all) {
          const points = [];
          for (const c of s.cells.values()) {
            let value = c.value;
            let counts = c.counts;
            if (temporality === "delta") {
              const before = previous.get(c);
              if (before) {
                value -= before.value;
                counts = counts && counts.map((n, i) => n - before.counts![i]!);
              }
              previous.set(c, { value: c.value, counts: c.counts && [...c.counts] });
              const changed = counts ? counts.some((n) => n > 0) : value !== 0;
              if (!changed) continue;
            }
            const startTime = hrTime(temporality === "delta" ? last : this.#start);
            points.push({
              startTime,
              endTime: hrTime(now),
              attributes: c.attributes,
              value: counts
                ? {
                  buckets: { boundaries: [...DURATION_BOUNDS_SECONDS], counts: [...counts] },
                  sum: value,
                  count: counts.reduce((a, b) => a + b, 0),
                }
                : value,
            });
          }
          if (points.length === 0) continue;
          metrics.push({
            descriptor: {
              name: s.name,
              description: s.description,
              unit: s.unit,
              valueType: s.kind === "histogram" ? DOUBLE : INT,
            },
            aggregationTemporality: temporality === "delta" ? DELTA : CUMULATIVE,
            dataPointType: s.kind === "histogram" ? HISTOGRAM : SUM,
            ...(s.kind === "sum" ? { isMonotonic: true } : {}),
            dataPoints: points,
          } as MetricData);
        }
        last = now;
        const scope: ScopeMetrics = { scope: { name: "codex" }, metrics };
        return Promise.resolve({
          // The reader keeps only the scopes of a producer's result (its own resource is the provider's).
          resourceMetrics: { scopeMetrics: [scope] },
          errors: [],
        });
      },
    };
  }
}
