// A small OTLP/HTTP receiver (JSON encoding) on loopback: what a server
// pushes to `/v1/metrics`, `/v1/traces` and `/v1/logs`, kept for the test.
// Protobuf trace pushes are decoded by OpenTelemetry's own generated
// decoder (otlp-transformer's protobufjs root) into the JSON shape.

import otlpRoot from "@opentelemetry/otlp-transformer/build/src/generated/root.js";

interface ProtoType {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): Record<string, unknown>;
}
const traceRequest = (otlpRoot as unknown as {
  opentelemetry: {
    proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtoType } } } };
  };
}).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const hex = (bytes: Uint8Array) =>
  Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/**
 * A protobuf `ExportTraceServiceRequest` in OTLP/JSON's shape (ids as hex,
 * 64-bit integers as decimal strings, enums as numbers, absent = default).
 */
export function decodeTracesProtobuf(bytes: Uint8Array): unknown {
  const object = traceRequest.toObject(traceRequest.decode(bytes), {
    longs: String,
    enums: Number,
    bytes: Array,
  });
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== "object") return v;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(v)) {
      out[key] = ["traceId", "spanId", "parentSpanId"].includes(key)
        ? hex(Uint8Array.from(value as number[]))
        : walk(value);
    }
    return out;
  };
  return walk(object);
}

/** An OTLP attribute value (the members the tests read). */
export type OtlpAnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
};
/** An OTLP attribute. */
export type OtlpKeyValue = { key: string; value: OtlpAnyValue };

/** A span as OTLP/JSON spells it. */
export interface OtlpSpan {
  readonly name: string;
  readonly kind: number;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly attributes?: OtlpKeyValue[];
}

/** A log record as OTLP/JSON spells it, with its scope's name. */
export interface OtlpLogRecord {
  readonly scope: string;
  readonly attributes: OtlpKeyValue[];
  readonly severityText?: string;
  readonly severityNumber?: number;
  readonly body?: { stringValue?: string };
}

/** Every span of the pushed trace bodies (`rx.bodies.get("/v1/traces")`), in order. */
export function otlpSpans(bodies: readonly unknown[] = []): OtlpSpan[] {
  return bodies.flatMap((b) =>
    (b as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> })
      .resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))
  );
}

/** Every log record of the pushed log bodies (`rx.bodies.get("/v1/logs")`), in order. */
export function otlpLogRecords(bodies: readonly unknown[] = []): OtlpLogRecord[] {
  return bodies.flatMap((b) =>
    (b as {
      resourceLogs: Array<{
        scopeLogs: Array<{ scope: { name: string }; logRecords: Omit<OtlpLogRecord, "scope">[] }>;
      }>;
    }).resourceLogs.flatMap((r) =>
      r.scopeLogs.flatMap((s) => s.logRecords.map((l) => ({ scope: s.scope.name, ...l })))
    )
  );
}

/** One metric data point, flattened: its metric, kind and attributes. */
export interface OtlpPoint {
  readonly scope: string;
  readonly name: string;
  readonly kind: "sum" | "gauge" | "histogram";
  readonly unit: string;
  readonly description: string;
  /** Aggregation temporality of sums and histograms (1 delta, 2 cumulative). */
  readonly temporality: number | undefined;
  readonly monotonic: boolean | undefined;
  readonly attributes: Record<string, string>;
  /** A sum's or gauge's value; a histogram's count. */
  readonly value: number;
  readonly bounds: number[] | undefined;
}

/** A running receiver. */
export interface OtlpReceiver extends AsyncDisposable {
  readonly url: string;
  /** Every JSON request body received, by path (protobuf trace pushes decoded). */
  readonly bodies: Map<string, unknown[]>;
  /** Every other body (protobuf), with its path and content type. */
  readonly raw: Array<
    { path: string; type: string; headers: Record<string, string>; bytes: Uint8Array }
  >;
  /** The metric points received so far. */
  points(): OtlpPoint[];
  /** The resource attributes of the metric exports received. */
  resources(): Record<string, string>[];
  /** Resolves when a metrics export has arrived satisfying `ready`. */
  waitFor(
    ready: (points: OtlpPoint[], raw: ReadonlyArray<{ path: string; type: string }>) => boolean,
    timeoutMs?: number,
  ): Promise<OtlpPoint[]>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};

function attrs(list: Array<{ key: string; value: AnyValue }> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { key, value } of list ?? []) {
    out[key] = String(
      value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue ?? "",
    );
  }
  return out;
}

/** Starts a receiver on 127.0.0.1 (any free port). */
export function startOtlpReceiver(): OtlpReceiver {
  const bodies = new Map<string, unknown[]>();
  const raw: Array<
    { path: string; type: string; headers: Record<string, string>; bytes: Uint8Array }
  > = [];
  const waiters = new Set<() => void>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    const type = req.headers.get("content-type") ?? "";
    if (req.method !== "POST") return new Response("POST only", { status: 405 });
    if (!type.startsWith("application/json")) {
      // Kept as bytes (a protobuf push): its arrival and size are checked.
      const bytes = new Uint8Array(await req.arrayBuffer());
      raw.push({ path, type, headers: Object.fromEntries(req.headers), bytes });
      if (path === "/v1/traces" && type === "application/x-protobuf") {
        if (!bodies.has(path)) bodies.set(path, []);
        bodies.get(path)!.push(decodeTracesProtobuf(bytes));
      }
      for (const wake of waiters) wake();
      return new Response(null, { status: 200 });
    }
    const body = await req.json();
    if (!bodies.has(path)) bodies.set(path, []);
    bodies.get(path)!.push(body);
    for (const wake of waiters) wake();
    return Response.json({});
  });
  const metricBodies = () =>
    (bodies.get("/v1/metrics") ?? []) as Array<{
      resourceMetrics?: Array<{
        resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
        scopeMetrics?: Array<
          { scope?: { name?: string }; metrics?: Array<Record<string, unknown>> }
        >;
      }>;
    }>;
  const points = (): OtlpPoint[] => {
    const out: OtlpPoint[] = [];
    for (const body of metricBodies()) {
      for (const rm of body.resourceMetrics ?? []) {
        for (const sm of rm.scopeMetrics ?? []) {
          for (const m of sm.metrics ?? []) {
            const kind = "sum" in m
              ? "sum"
              : "gauge" in m
              ? "gauge"
              : "histogram" in m
              ? "histogram"
              : null;
            if (!kind) continue;
            const data = m[kind] as {
              dataPoints?: Array<Record<string, unknown>>;
              aggregationTemporality?: number | string;
              isMonotonic?: boolean;
            };
            for (const p of data.dataPoints ?? []) {
              const value = kind === "histogram"
                ? Number(p.count ?? 0)
                : Number(p.asInt ?? p.asDouble ?? 0);
              out.push({
                scope: sm.scope?.name ?? "",
                name: m.name as string,
                kind,
                unit: (m.unit as string | undefined) ?? "",
                description: (m.description as string | undefined) ?? "",
                temporality: data.aggregationTemporality === undefined
                  ? undefined
                  : Number(data.aggregationTemporality),
                monotonic: data.isMonotonic,
                attributes: attrs(p.attributes as never),
                value,
                bounds: kind === "histogram"
                  ? (p.explicitBounds as number[]).map(Number)
                  : undefined,
              });
            }
          }
        }
      }
    }
    return out;
  };
  const close = async () => {
    await server.shutdown();
  };
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    bodies,
    raw,
    points,
    resources: () =>
      metricBodies().flatMap((b) =>
        (b.resourceMetrics ?? []).map((rm) => attrs(rm.resource?.attributes))
      ),
    async waitFor(ready, timeoutMs = 60_000) {
      const deadline = AbortSignal.timeout(timeoutMs);
      while (!ready(points(), raw)) {
        if (deadline.aborted) throw new Error(`no matching metrics export within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            deadline.removeEventListener("abort", wake);
            resolve();
          };
          waiters.add(wake);
          deadline.addEventListener("abort", wake);
        });
      }
      return points();
    },
    [Symbol.asyncDispose]: close,
  };
}
