/**
 * OpenTelemetry through Deno's built-in exporter (`OTEL_DENO=true`): one
 * span per inbound JSON-RPC request, continuing the W3C trace context the
 * request carries (`trace.traceparent` / `trace.tracestate`), and the active
 * span's context on outbound requests. `npm:@opentelemetry/api` is loaded
 * only when telemetry is on, so nothing else pays for it.
 *
 * @module
 */

import type { TraceContext } from "./trace_context.ts";
import { grantedEnv } from "../util/env.ts";

/** Runs inbound requests inside spans and names the context for outbound ones. */
export interface RequestTracer {
  /**
   * Runs `answer` (one inbound request, answered) inside a server span
   * named after `method`, a child of `trace` when it is a valid
   * `traceparent`. An error answer marks the span failed with its code.
   * With `receivedAt` (`performance.now()` at receipt) the span starts
   * then, and `rpc.dispatch_offset_ns` / `rpc.response_enqueue_offset_ns`
   * say when the handler began and when the answer was ready, as the
   * reference's spans do.
   */
  run<T extends object>(
    method: string,
    id: number | string | bigint,
    trace: TraceContext | undefined,
    answer: () => Promise<T>,
    receivedAt?: number,
  ): Promise<T>;
  /** The active span as a W3C trace context, for an outbound request. */
  current(): TraceContext | undefined;
}

/**
 * An OpenTelemetry `TracerProvider`, structurally (this package does not
 * re-export the API's types): what `otelRequestTracer` makes spans on.
 */
export interface SpanProvider {
  /** A tracer (an OpenTelemetry `Tracer`). */
  getTracer(name: string, version?: string): unknown;
}

/**
 * True when Deno's OpenTelemetry export is switched on (`OTEL_DENO=true`).
 * Never prompts: without permission to read the variable it is off.
 */
export function otelEnabled(): boolean {
  return ["true", "1"].includes((grantedEnv("OTEL_DENO") ?? "").toLowerCase());
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/** The parts of a `traceparent`; `null` when it is malformed or all-zero. */
export function parseTraceparent(
  value: string,
): { traceId: string; spanId: string; traceFlags: number } | null {
  const m = TRACEPARENT.exec(value.trim());
  if (!m || m[1] === "ff") return null;
  // Version 00 has exactly four fields; later versions may add more.
  if (m[1] === "00" && value.trim().length !== 55) return null;
  if (/^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return null;
  return { traceId: m[2]!, spanId: m[3]!, traceFlags: parseInt(m[4]!, 16) };
}

/**
 * A tracer on Deno's OpenTelemetry providers, or `null` when telemetry is
 * off (the caller then runs handlers directly).
 *
 * @example
 * ```ts
 * import { otelRequestTracer } from "./otel.ts";
 * const tracer = await otelRequestTracer();
 * const answer = tracer
 *   ? await tracer.run("fs/readFile", 1, undefined, () => Promise.resolve({ result: 42 }))
 *   : { result: 42 };
 * ```
 */
export async function otelRequestTracer(
  options: {
    force?: boolean;
    name?: string;
    version?: string;
    /** Spans go to this provider (e.g. an OTLP push) instead of Deno's; implies `force`. */
    tracerProvider?: SpanProvider | null;
    /** A span's name for a method (default: the method). */
    spanName?: (method: string) => string;
  } = {},
): Promise<RequestTracer | null> {
  if (!options.force && !options.tracerProvider && !otelEnabled()) return null;
  const api = await import("@opentelemetry/api");
  const provider =
    (options.tracerProvider ?? api.trace) as import("@opentelemetry/api").TracerProvider;
  const tracer = provider.getTracer(options.name ?? "exec-server", options.version);
  const spanName = options.spanName ?? ((method: string) => method);
  // Nanoseconds since `receivedAt` (a `performance.now()` reading).
  const offset = (receivedAt: number) => Math.round((performance.now() - receivedAt) * 1e6);
  return {
    run(method, id, trace, answer, receivedAt) {
      let parent = api.context.active();
      const remote = trace ? parseTraceparent(trace.traceparent) : null;
      if (remote) {
        parent = api.trace.setSpanContext(parent, {
          ...remote,
          isRemote: true,
          ...(trace?.tracestate ? { traceState: api.createTraceState(trace.tracestate) } : {}),
        });
      }
      return tracer.startActiveSpan(
        spanName(method),
        {
          kind: api.SpanKind.SERVER,
          attributes: {
            method,
            "rpc.system": "jsonrpc",
            "rpc.method": method,
            "rpc.jsonrpc.version": "2.0",
            "rpc.jsonrpc.request_id": String(id),
            ...(receivedAt !== undefined ? { "rpc.dispatch_offset_ns": offset(receivedAt) } : {}),
          },
          ...(receivedAt !== undefined ? { startTime: performance.timeOrigin + receivedAt } : {}),
        },
        parent,
        async (span) => {
          try {
            const outcome = await answer();
            const error = (outcome as { error?: { code: number; message: string } }).error;
            if (receivedAt !== undefined) {
              span.setAttribute("rpc.response_enqueue_offset_ns", offset(receivedAt));
            }
            span.setAttribute("result", error ? "error" : "success");
            if (error) {
              span.setAttribute("rpc.jsonrpc.error_code", error.code);
              span.setAttribute("rpc.jsonrpc.error_message", error.message);
              span.setStatus({ code: api.SpanStatusCode.ERROR, message: error.message });
            }
            return outcome;
          } finally {
            span.end();
          }
        },
      );
    },
    current() {
      const ctx = api.trace.getSpanContext(api.context.active());
      if (!ctx || !api.isSpanContextValid(ctx)) return undefined;
      const flags = (ctx.traceFlags & 0xff).toString(16).padStart(2, "0");
      const state = ctx.traceState?.serialize();
      return {
        traceparent: `00-${ctx.traceId}-${ctx.spanId}-${flags}`,
        ...(state ? { tracestate: state } : {}),
      };
    },
  };
}
