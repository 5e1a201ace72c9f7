/**
 * Spans over OTLP/HTTP: an `ExportTraceServiceRequest` written straight
 * from the recorded spans (`spans.ts`), in the protobuf encoding
 * (`application/x-protobuf`, Codex's default `binary`) or OTLP's JSON
 * (`application/json`: ids as hex, 64-bit integers as decimal strings), and
 * pushed as the OpenTelemetry exporters push: a timeout per attempt
 * (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT`,
 * default 10 s), the retryable answers (429, 502, 503, 504) tried again up
 * to five times with a growing, jittered delay (or the `Retry-After` asked
 * for), within 30 s a batch.
 *
 * @module
 */

import { ProtoWriter } from "../util/protobuf.ts";
import { grantedEnv, positiveIntegerEnv } from "../util/env.ts";
import type { AttributeValue, SpanData, SpanSink } from "./spans.ts";
import type { OtlpExportSettings } from "./otlp_settings.ts";

/** Who the spans come from. */
export interface SpanSource {
  /** Resource attributes (`service.name`, …). */
  readonly resource: Readonly<Record<string, AttributeValue>>;
  /** The instrumentation scope. */
  readonly scope: { readonly name: string; readonly version?: string };
}

/** Nanoseconds since the epoch of a fractional millisecond timestamp. */
function nanos(ms: number): bigint {
  const whole = Math.floor(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
}

const isInt = (v: number) => Number.isSafeInteger(v);

function writeKeyValues(
  w: ProtoWriter,
  field: number,
  attributes: Readonly<Record<string, AttributeValue>>,
) {
  for (const key in attributes) {
    const v = attributes[key]!;
    w.begin(field);
    w.string(1, key);
    w.begin(2);
    // AnyValue is a oneof: its member is written even when zero or empty.
    if (typeof v === "string") w.string(1, v, true);
    else if (typeof v === "boolean") w.bool(2, v, true);
    else if (isInt(v)) w.int64(3, v, true);
    else w.double(4, v, true);
    w.end();
    w.end();
  }
}

/**
 * The protobuf `ExportTraceServiceRequest` for `spans`.
 *
 * @example
 * ```ts
 * import { encodeTracesProtobuf } from "./otlp_traces.ts";
 * const bytes = encodeTracesProtobuf([], { resource: { "service.name": "demo" }, scope: { name: "demo" } });
 * console.log(bytes.length > 0);
 * ```
 */
export function encodeTracesProtobuf(
  spans: readonly SpanData[],
  source: SpanSource,
): Uint8Array<ArrayBuffer> {
  const w = new ProtoWriter(1024 + spans.length * 512);
  w.begin(1); // ResourceSpans
  w.begin(1); // Resource
  writeKeyValues(w, 1, source.resource);
  w.end();
  w.begin(2); // ScopeSpans
  w.begin(1); // InstrumentationScope
  w.string(1, source.scope.name);
  w.string(2, source.scope.version ?? "");
  w.end();
  for (const s of spans) {
    w.begin(2);
    w.hexBytes(1, s.traceId);
    w.hexBytes(2, s.spanId);
    w.string(3, s.traceState ?? "");
    w.hexBytes(4, s.parentSpanId ?? "");
    w.string(5, s.name);
    w.uint(6, s.kind);
    w.fixed64(7, nanos(s.startMs));
    w.fixed64(8, nanos(s.endMs));
    writeKeyValues(w, 9, s.attributes);
    w.begin(15); // Status
    w.string(2, s.statusMessage);
    w.uint(3, s.statusCode);
    w.end();
    w.fixed32(16, s.flags);
    w.end();
  }
  w.end();
  w.end();
  return w.finish();
}

type JsonAnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number };

function jsonKeyValues(attributes: Readonly<Record<string, AttributeValue>>) {
  const out: Array<{ key: string; value: JsonAnyValue }> = [];
  for (const key in attributes) {
    const v = attributes[key]!;
    out.push({
      key,
      value: typeof v === "string"
        ? { stringValue: v }
        : typeof v === "boolean"
        ? { boolValue: v }
        : isInt(v)
        ? { intValue: String(v) }
        : { doubleValue: v },
    });
  }
  return out;
}

/**
 * The OTLP/JSON `ExportTraceServiceRequest` for `spans`.
 *
 * @example
 * ```ts
 * import { encodeTracesJson } from "./otlp_traces.ts";
 * const text = encodeTracesJson([], { resource: { "service.name": "demo" }, scope: { name: "demo" } });
 * console.log(JSON.parse(text).resourceSpans.length); // 1
 * ```
 */
export function encodeTracesJson(spans: readonly SpanData[], source: SpanSource): string {
  return JSON.stringify({
    resourceSpans: [{
      resource: { attributes: jsonKeyValues(source.resource), droppedAttributesCount: 0 },
      scopeSpans: [{
        scope: { name: source.scope.name, version: source.scope.version ?? "" },
        spans: spans.map((s) => ({
          traceId: s.traceId,
          spanId: s.spanId,
          ...(s.parentSpanId !== undefined ? { parentSpanId: s.parentSpanId } : {}),
          ...(s.traceState !== undefined ? { traceState: s.traceState } : {}),
          name: s.name,
          kind: s.kind,
          startTimeUnixNano: String(nanos(s.startMs)),
          endTimeUnixNano: String(nanos(s.endMs)),
          attributes: jsonKeyValues(s.attributes),
          droppedAttributesCount: 0,
          events: [],
          droppedEventsCount: 0,
          status: s.statusCode === 0
            ? { code: 0 }
            : { code: s.statusCode, message: s.statusMessage },
          links: [],
          droppedLinksCount: 0,
          flags: s.flags,
        })),
      }],
    }],
  });
}

/** A push the collector refused, or that did not get through. */
export class OtlpPushError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "OtlpPushError";
  }
}

const RETRYABLE = new Set([429, 502, 503, 504]);
const MAX_ATTEMPTS = 5;
const BATCH_DEADLINE_MS = 30_000;

function timeoutMs(env: (name: string) => string | undefined): number {
  return positiveIntegerEnv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", env) ??
    positiveIntegerEnv("OTEL_EXPORTER_OTLP_TIMEOUT", env) ?? 10_000;
}

/** `Retry-After` in milliseconds (seconds or an HTTP date), if usable. */
function retryAfter(value: string | null): number | null {
  if (value === null) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/**
 * A sink pushing each batch to `settings.endpoint` in its protocol.
 *
 * @example
 * ```ts
 * import { otlpSpanSink } from "./otlp_traces.ts";
 * const sink = otlpSpanSink(
 *   { endpoint: "http://127.0.0.1:4318/v1/traces", protocol: "binary", headers: {}, environment: "dev" },
 *   { resource: { "service.name": "demo" }, scope: { name: "demo" } },
 * );
 * console.log(typeof sink); // "function"
 * ```
 */
export function otlpSpanSink(
  settings: OtlpExportSettings,
  source: SpanSource,
  env: (name: string) => string | undefined = grantedEnv,
): SpanSink {
  const json = settings.protocol === "json";
  const headers = {
    ...settings.headers,
    "content-type": json ? "application/json" : "application/x-protobuf",
  };
  const perAttempt = timeoutMs(env);
  return async (batch) => {
    const body = json ? encodeTracesJson(batch, source) : encodeTracesProtobuf(batch, source);
    const deadline = Date.now() + BATCH_DEADLINE_MS;
    let delay = 1000;
    for (let attempt = 1;; attempt++) {
      let response: Response;
      const abort = new AbortController();
      const timer = setTimeout(
        () => abort.abort(new OtlpPushError(`no answer within ${perAttempt} ms`)),
        Math.max(1, Math.min(perAttempt, deadline - Date.now())),
      );
      try {
        response = await fetch(settings.endpoint, {
          method: "POST",
          headers,
          body,
          signal: abort.signal,
        });
        await response.body?.cancel();
      } catch (error) {
        throw new OtlpPushError(
          `OTLP push to ${settings.endpoint} failed: ${(error as Error).message}`,
          { cause: error },
        );
      } finally {
        clearTimeout(timer);
      }
      if (response.ok) return;
      const wait = retryAfter(response.headers.get("retry-after")) ??
        delay * (0.8 + Math.random() * 0.4);
      if (
        !RETRYABLE.has(response.status) || attempt === MAX_ATTEMPTS ||
        Date.now() + wait >= deadline
      ) {
        throw new OtlpPushError(
          `OTLP push to ${settings.endpoint} answered ${response.status} (attempt ${attempt})`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
      delay = Math.min(delay * 1.5, 5000);
    }
  };
}
