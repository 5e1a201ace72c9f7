/**
 * Plain counters, histograms and gauges, read by OpenTelemetry SDK readers
 * through a `MetricProducer` ({@linkcode MetricSet.producer}) — without the
 * SDK's instruments on the measured path: a measurement is a map lookup
 * and an array increment (the SDK's instruments cost ~1.6 µs each). Every
 * part of this package measures itself with one of these (the exec-server,
 * the egress proxy, the relay, the MCP runtime and bridge), so the Prometheus
 * endpoint and the OTLP push serve them all the same way.
 *
 * This module loads no SDK code: the SDK's enums are written as values.
 *
 * @module
 */

import type { MetricData, ScopeMetrics } from "@opentelemetry/sdk-metrics";

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

/**
 * What a reader collects: an OpenTelemetry SDK `CollectionResult` (its
 * `resourceMetrics.scopeMetrics` are the SDK's `ScopeMetrics`).
 */
export interface MetricsCollection {
  /** The metrics, in one scope (the resource is the reader's provider's). */
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

/** Cumulative totals since the start (Prometheus) or what changed since the last collection (an OTLP push). */
export type Temporality = "cumulative" | "delta";

const SUM = 3 as MetricData["dataPointType"];
const GAUGE = 2 as MetricData["dataPointType"];
const HISTOGRAM = 0 as MetricData["dataPointType"];
const DELTA = 0 as MetricData["aggregationTemporality"];
const CUMULATIVE = 1 as MetricData["aggregationTemporality"];
const INT = 0;
const DOUBLE = 1;

/** A label set: label names to values (always strings here, from bounded sets). */
export type Labels = Readonly<Record<string, string>>;

/** One label set's running total: a counter's value, or a histogram's sum and bucket counts. */
export interface Cell {
  /** The label set. */
  readonly attributes: Labels;
  /** A counter's total; a histogram's sum. */
  value: number;
  /** A histogram's counts per bucket (the last is `+Inf`); null for a counter. */
  readonly counts: number[] | null;
}

/** A counter or histogram: its cells by a caller-chosen key (one per label set). */
export class Series {
  /** The cells, by key. */
  readonly cells: Map<string, Cell> = new Map();

  /** See {@linkcode MetricSet.counter} and {@linkcode MetricSet.histogram}. */
  constructor(
    readonly name: string,
    readonly description: string,
    readonly unit: string,
    /** Histogram bounds; null for a counter. */
    readonly bounds: readonly number[] | null,
  ) {}

  /** The cell of `key`, made with `attributes()` the first time. */
  cell(key: string, attributes: () => Labels): Cell {
    let c = this.cells.get(key);
    if (c === undefined) {
      c = {
        attributes: attributes(),
        value: 0,
        counts: this.bounds ? new Array(this.bounds.length + 1).fill(0) : null,
      };
      this.cells.set(key, c);
    }
    return c;
  }

  /** Adds `n` (default 1) to a counter's label set. */
  add(labels: Readonly<Record<string, string>> = {}, n = 1): void {
    this.cell(labelKey(labels), () => ({ ...labels })).value += n;
  }

  /** Records `value` in a histogram's label set. */
  record(labels: Readonly<Record<string, string>>, value: number): void {
    this.observe(this.cell(labelKey(labels), () => ({ ...labels })), value);
  }

  /** Adds `value` to a histogram cell. */
  observe(c: Cell, value: number): void {
    const bounds = this.bounds!;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    c.counts![i]!++;
    c.value += value;
  }

  /** A counter's total (over every label set matching `labels`), for tests and status. */
  total(labels: Readonly<Record<string, string>> = {}): number {
    let sum = 0;
    for (const c of this.cells.values()) {
      if (Object.entries(labels).every(([k, v]) => c.attributes[k] === v)) {
        sum += c.counts ? c.counts.reduce((a, b) => a + b, 0) : c.value;
      }
    }
    return sum;
  }
}

function labelKey(labels: Readonly<Record<string, string>>): string {
  let key = "";
  for (const k in labels) key += `${labels[k]}\u0000`;
  return key;
}

type HrTime = [number, number];
const hrTime = (ms: number): HrTime => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];

/** A gauge's points now: each label set with its value. */
export type GaugeRead = () => Iterable<readonly [Labels, number]>;

/**
 * A set of metrics in one instrumentation scope, read by any number of
 * readers (one {@linkcode MetricSet.producer} each).
 *
 * @example
 * ```ts
 * import { MetricSet } from "./aggregate.ts";
 * const set = new MetricSet("demo");
 * const hits = set.counter("demo_hits_total", "Hits.");
 * hits.add({ result: "ok" });
 * hits.add({ result: "ok" }, 2);
 * const { resourceMetrics } = await set.producer("cumulative").collect();
 * const [scope] = resourceMetrics.scopeMetrics as Array<{ metrics: Array<{ dataPoints: Array<{ value: number }> }> }>;
 * console.log(scope!.metrics[0]!.dataPoints[0]!.value); // 3
 * ```
 */
export class MetricSet {
  readonly #scope: string;
  readonly #start = Date.now();
  readonly #entries: Array<Series | { name: string; description: string; read: GaugeRead }> = [];
  readonly #parts: MetricSet[] = [];

  /** A set in scope `scope`. */
  constructor(scope = "codex") {
    this.#scope = scope;
  }

  /** A monotonic counter (`unit` empty unless given; Prometheus adds `_total` when missing). */
  counter(name: string, description: string, unit = ""): Series {
    const s = new Series(name, description, unit, null);
    this.#entries.push(s);
    return s;
  }

  /** A histogram, in seconds with the reference's bounds unless told otherwise. */
  histogram(
    name: string,
    description: string,
    bounds: readonly number[] = DURATION_BOUNDS_SECONDS,
    unit = "s",
  ): Series {
    const s = new Series(name, description, unit, bounds);
    this.#entries.push(s);
    return s;
  }

  /** A gauge, read at each collection. */
  gauge(name: string, description: string, read: GaugeRead): void {
    this.#entries.push({ name, description, read });
  }

  /** The names of this set's metrics (its parts' not included), in registration order. */
  get names(): string[] {
    return this.#entries.map((e) => e.name);
  }

  /** Collects `part`'s metrics too (in its own scope), e.g. an embedded proxy's in a server's. */
  include(part: MetricSet): void {
    if (!this.#parts.includes(part)) this.#parts.push(part);
  }

  /**
   * A `MetricProducer` for one reader (`metricProducers: [set.producer(…)]`):
   * `cumulative` totals since the start (Prometheus), or `delta` — what
   * changed since this producer's previous collection (an OTLP push; label
   * sets without a change are left out, as the SDK does).
   */
  producer(temporality: Temporality): MetricsProducer {
    const read = this.#reader(temporality);
    return {
      collect: () =>
        Promise.resolve({
          // A reader keeps only the scopes of a producer's result (the resource is its provider's).
          resourceMetrics: { scopeMetrics: read() },
          errors: [],
        }),
    };
  }

  /** One reader's collection: this set's scope, then its parts' (each with its own delta state). */
  #reader(temporality: Temporality): () => ScopeMetrics[] {
    const state = {
      previous: new Map<Cell, { value: number; counts: number[] | null }>(),
      last: this.#start,
    };
    const parts = new Map<MetricSet, () => ScopeMetrics[]>();
    return () => [
      this.#collect(temporality, state),
      ...this.#parts.flatMap((p) => {
        let read = parts.get(p);
        if (!read) parts.set(p, read = p.#reader(temporality));
        return read();
      }),
    ];
  }

  #collect(
    temporality: Temporality,
    state: { previous: Map<Cell, { value: number; counts: number[] | null }>; last: number },
  ): ScopeMetrics {
    const now = Date.now();
    const metrics: MetricData[] = [];
    for (const entry of this.#entries) {
      if (!(entry instanceof Series)) {
        metrics.push({
          descriptor: {
            name: entry.name,
            description: entry.description,
            unit: "",
            valueType: INT,
          },
          aggregationTemporality: CUMULATIVE,
          dataPointType: GAUGE,
          dataPoints: [...entry.read()].map(([attributes, value]) => ({
            startTime: hrTime(now),
            endTime: hrTime(now),
            attributes,
            value,
          })),
        } as MetricData);
        continue;
      }
      const points = [];
      for (const c of entry.cells.values()) {
        let value = c.value;
        let counts = c.counts;
        if (temporality === "delta") {
          const before = state.previous.get(c);
          if (before) {
            value -= before.value;
            counts = counts && counts.map((n, i) => n - before.counts![i]!);
          }
          state.previous.set(c, { value: c.value, counts: c.counts && [...c.counts] });
          const changed = counts ? counts.some((n) => n > 0) : value !== 0;
          if (!changed) continue;
        }
        points.push({
          startTime: hrTime(temporality === "delta" ? state.last : this.#start),
          endTime: hrTime(now),
          attributes: c.attributes,
          value: counts
            ? {
              buckets: { boundaries: [...entry.bounds!], counts: [...counts] },
              sum: value,
              count: counts.reduce((a, b) => a + b, 0),
            }
            : value,
        });
      }
      if (points.length === 0) continue;
      const histogram = entry.bounds !== null;
      metrics.push({
        descriptor: {
          name: entry.name,
          description: entry.description,
          unit: entry.unit,
          valueType: histogram ? DOUBLE : INT,
        },
        aggregationTemporality: temporality === "delta" ? DELTA : CUMULATIVE,
        dataPointType: histogram ? HISTOGRAM : SUM,
        ...(histogram ? {} : { isMonotonic: true }),
        dataPoints: points,
      } as MetricData);
    }
    state.last = now;
    return { scope: { name: this.#scope }, metrics };
  }
}
