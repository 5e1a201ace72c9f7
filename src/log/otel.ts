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

/** Runs inbound requests inside spans and names the context for outbound ones. */
export interface RequestTracer {
  /**
   * Runs `answer` (one inbound request, answered) inside a server span
   * named after `method`, a child of `trace` when it is a valid
   * `traceparent`. An error answer marks the span failed with its code.
   */
  run<T extends object>(
    method: string,
    id: number | string | bigint,
    trace: TraceContext | undefined,
    answer: () => Promise<T>,
  ): Promise<T>;
  /** The active span as a W3C trace context, for an outbound request. */
  current(): TraceContext | undefined;
}

/**
 * True when Deno's OpenTelemetry export is switched on (`OTEL_DENO=true`).
 * Never prompts: without permission to read the variable it is off.
 */
export function otelEnabled(): boolean {
  try {
    if (Deno.permissions.querySync({ name: "env", variable: "OTEL_DENO" }).state !== "granted") {
      return false;
    }
    return ["true", "1"].includes((Deno.env.get("OTEL_DENO") ?? "").toLowerCase());
  } catch {
    return false;
  }
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
  options: { force?: boolean; name?: string; version?: string } = {},
): Promise<RequestTracer | null> {
  if (!options.force && !otelEnabled()) return null;
  const api = await import("@opentelemetry/api");
  const tracer = api.trace.getTracer(options.name ?? "exec-server", options.version);
  return {
    run(method, id, trace, answer) {
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
        method,
        {
          kind: api.SpanKind.SERVER,
          attributes: {
            "rpc.system": "jsonrpc",
            "rpc.method": method,
            "rpc.jsonrpc.version": "2.0",
            "rpc.jsonrpc.request_id": String(id),
          },
        },
        parent,
        async (span) => {
          try {
            const outcome = await answer();
            const error = (outcome as { error?: { code: number; message: string } }).error;
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
