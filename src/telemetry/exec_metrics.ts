/**
 * The exec-server's metrics, named, described, typed and bucketed as the
 * reference's (Codex 0.171.0, probed with an OTLP receiver): connections
 * by transport, requests by method and result with their queue, run and
 * total durations, processes active, finished and their duration, and a
 * remote executor's registrations, rendezvous dials and reconnects.
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

import { MetricSet, type MetricsProducer } from "./aggregate.ts";
import { methodLabel } from "./method_label.ts";

export { methodLabel };

export {
  DURATION_BOUNDS_SECONDS,
  type MetricsCollection,
  type MetricsProducer,
} from "./aggregate.ts";

/** How a connection reached the server. */
export type MetricsTransport = "relay" | "stdio" | "websocket";

/** How a request ended: answered with a result, with an error, or its connection went first. */
export type RequestResult = "success" | "error" | "disconnected";

/**
 * Why a remote executor's rendezvous socket is dialled again (the
 * reference's `reason` values): the relay closed it, reading or writing
 * failed, a ping went unanswered, or the dial itself failed.
 */
export type ReconnectReason =
  | "peer_close"
  | "read_error"
  | "write_error"
  | "pong_timeout"
  | "connect_failed";

/**
 * What a remote executor reports (`RemoteExecutor`'s `metrics` option):
 * each registration and rendezvous dial with its outcome and duration,
 * and each reconnect with its reason.
 */
export interface RemoteMetrics {
  /** A registration attempt ended. */
  registration(result: "success" | "error", seconds: number): void;
  /** A rendezvous dial ended. */
  rendezvousConnect(result: "success" | "error", seconds: number): void;
  /** The socket is dialled again. */
  reconnect(reason: ReconnectReason): void;
}

const TRANSPORTS: readonly MetricsTransport[] = ["websocket", "relay", "stdio"];

/** Timings of one request, in seconds (see {@linkcode ExecServerMetrics.request}). */
export interface RequestTimings {
  /** From receipt until its handler started (waiting for its lane or its turn). */
  readonly queuedSeconds: number;
  /** From its handler's start until its answer was enqueued. */
  readonly runSeconds: number;
}

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
export class ExecServerMetrics implements RemoteMetrics {
  /**
   * The metrics, in the reference's `codex` scope; parts of the same
   * program (an embedded egress proxy) are added with `set.include(…)`.
   */
  readonly set: MetricSet = new MetricSet("codex");
  #active = new Map<MetricsTransport, number>(TRANSPORTS.map((t) => [t, 0]));
  #processes = 0;
  // Codex's own start counter: once per program run, not per child (the
  // reference counts 1 for a server that ran three processes).
  readonly #started = this.set.counter("codex.process.start", "");
  readonly #connections = this.set.counter(
    "exec_server_connections_total",
    "Total number of accepted exec-server connections.",
  );
  readonly #queueDuration = this.set.histogram(
    "exec_server_request_queue_duration_seconds",
    "Time exec-server requests spend queued before execution in seconds.",
  );
  readonly #requests = this.set.counter(
    "exec_server_requests_total",
    "Total number of exec-server requests.",
  );
  readonly #requestDuration = this.set.histogram(
    "exec_server_request_duration_seconds",
    "Duration of exec-server requests in seconds.",
  );
  readonly #totalDuration = this.set.histogram(
    "exec_server_request_total_duration_seconds",
    "Total exec-server request duration in seconds, including queueing, from decoded receipt until response enqueue or disconnection.",
  );
  readonly #processesFinished = this.set.counter(
    "exec_server_processes_finished_total",
    "Total number of finished exec-server processes.",
  );
  readonly #processDuration = this.set.histogram(
    "exec_server_process_duration_seconds",
    "Duration of exec-server processes in seconds.",
  );
  readonly #registrations = this.set.counter(
    "exec_server_remote_registration_total",
    "Total number of remote exec-server registration attempts.",
  );
  readonly #registrationDuration = this.set.histogram(
    "exec_server_remote_registration_duration_seconds",
    "Duration of remote exec-server registration attempts in seconds.",
  );
  readonly #rendezvous = this.set.counter(
    "exec_server_remote_rendezvous_connect_total",
    "Total number of remote exec-server rendezvous connection attempts.",
  );
  readonly #rendezvousDuration = this.set.histogram(
    "exec_server_remote_rendezvous_connect_duration_seconds",
    "Duration of remote exec-server rendezvous connection attempts in seconds.",
  );
  readonly #reconnects = this.set.counter(
    "exec_server_remote_reconnects_total",
    "Total number of remote exec-server reconnects.",
  );

  /** Starts measuring (this server run counts once in `codex.process.start`). */
  constructor() {
    this.#started.add({ originator: "other" });
    this.set.gauge(
      "exec_server_connections_active",
      "Number of active exec-server connections.",
      () => [...this.#active].map(([transport, n]) => [{ transport }, n] as const),
    );
    this.set.gauge(
      "exec_server_processes_active",
      "Number of active exec-server processes.",
      () => [[{}, this.#processes]],
    );
  }

  /** A connection was accepted. */
  connectionOpened(transport: MetricsTransport): void {
    this.#active.set(transport, this.#active.get(transport)! + 1);
    this.#connections.cell(transport, () => ({ transport })).value++;
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
    this.#requests.cell(key, attributes).value++;
    const queued = this.#queueDuration;
    const run = this.#requestDuration;
    const total = this.#totalDuration;
    queued.observe(queued.cell(label, () => ({ method: label })), timings.queuedSeconds);
    run.observe(run.cell(key, attributes), timings.runSeconds);
    total.observe(total.cell(key, attributes), timings.queuedSeconds + timings.runSeconds);
  }

  /** A process started. */
  processStarted(): void {
    this.#processes++;
  }

  /** A process finished: `success` when it exited with 0, else `error`. */
  processFinished(exitCode: number | null, seconds: number): void {
    this.#processes = Math.max(0, this.#processes - 1);
    const result = exitCode === 0 ? "success" : "error";
    this.#processesFinished.add({ result });
    this.#processDuration.record({ result }, seconds);
  }

  /** A remote registration attempt ended. */
  registration(result: "success" | "error", seconds: number): void {
    this.#registrations.add({ result });
    this.#registrationDuration.record({ result }, seconds);
  }

  /** A rendezvous dial ended. */
  rendezvousConnect(result: "success" | "error", seconds: number): void {
    this.#rendezvous.add({ result });
    this.#rendezvousDuration.record({ result }, seconds);
  }

  /** The rendezvous socket is dialled again. */
  reconnect(reason: ReconnectReason): void {
    this.#reconnects.add({ reason });
  }

  /**
   * A `MetricProducer` for one reader (`metricProducers: [m.producer(…)]`):
   * `cumulative` totals since the start (Prometheus), or `delta` — what
   * changed since this producer's previous collection (the reference's
   * OTLP push; label sets without a change are left out, as the SDK does).
   */
  producer(temporality: "cumulative" | "delta"): MetricsProducer {
    return this.set.producer(temporality);
  }
}
