/**
 * Spans recorded as plain data and pushed in batches — what the server's
 * OTLP trace push is built on, in place of the OpenTelemetry tracing SDK,
 * whose span objects and export cost ~25–57 µs of CPU a request here
 * (more than the request they measure): a span here is a few fields and
 * its attributes, its ids come from a pool of random bytes, and the export
 * (`otlp_traces.ts`) writes the OTLP encoding straight from them.
 *
 * The semantics are the SDK's defaults, which the reference's spans share:
 * a span's parent is the span active where it starts (an
 * `AsyncLocalStorage`), or a remote parent from a `traceparent`; the
 * sampler is parent-based, always on for roots (a parent that is not
 * sampled makes a span that carries the context but is not recorded);
 * `tracestate` members are kept when well-formed (at most 32); the batch
 * processor keeps at most `maxQueueSize` spans (2 048; beyond, spans are
 * dropped and counted), pushes `maxExportBatchSize` (512) at a time — at
 * once when that many are waiting, else `scheduledDelayMs` (5 s) after the
 * first — one push at a time, and pushes what is left at shutdown
 * (`OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
 * `OTEL_BSP_SCHEDULE_DELAY` override them, as for the SDK).
 *
 * @module
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { parseTraceparent, type RequestTracer } from "../log/otel.ts";
import { positiveIntegerEnv } from "../util/env.ts";

/** An attribute's value. */
export type AttributeValue = string | number | boolean;

/** OTLP span kinds. */
export const SpanKind = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;
/** An OTLP span kind. */
export type SpanKindValue = (typeof SpanKind)[keyof typeof SpanKind];

/** Where a span sits in its trace. */
export interface SpanContext {
  /** 32 lowercase hex digits. */
  readonly traceId: string;
  /** 16 lowercase hex digits. */
  readonly spanId: string;
  /** W3C trace flags (bit 0: sampled). */
  readonly traceFlags: number;
  /** The W3C `tracestate`, as kept. */
  readonly traceState?: string;
  /** True for a context received from another process. */
  readonly isRemote: boolean;
}

/** A finished span, as the exporter encodes it. */
export interface SpanData {
  readonly name: string;
  readonly kind: SpanKindValue;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly traceState: string | undefined;
  /** OTLP `flags`: the trace flags, and whether the parent is remote. */
  readonly flags: number;
  /** Milliseconds since the epoch (fractional). */
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  /** 0 unset, 2 error. */
  readonly statusCode: 0 | 2;
  readonly statusMessage: string;
}

/** Pushes one batch; rejects when it could not. */
export type SpanSink = (batch: readonly SpanData[]) => Promise<void>;

/** The batch processor's settings. */
export interface SpanBatchOptions {
  /** Spans kept waiting at most (default 2 048). */
  readonly maxQueueSize?: number;
  /** Spans per push at most (default 512). */
  readonly maxExportBatchSize?: number;
  /** How long the first waiting span waits for others (default 5 000 ms). */
  readonly scheduledDelayMs?: number;
  /** A push failed (the spans in it are gone). */
  readonly onError?: (error: unknown, spans: number) => void;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const HEX_DIGITS = new TextEncoder().encode("0123456789abcdef");
const latin1 = new TextDecoder("latin1");
// OTLP's span flags: the parent's remoteness is known, and it is remote.
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

/**
 * Random ids, from a pool refilled a few kilobytes at a time and turned
 * into hex at once: an id is a slice of one flat string, which the
 * encoders read without flattening a string built piece by piece.
 */
class IdSource {
  #pool = new Uint8Array(4096);
  #digits = new Uint8Array(this.#pool.length * 2);
  #hex = "";
  #at = this.#pool.length;

  #refill(): void {
    const pool = this.#pool;
    crypto.getRandomValues(pool);
    const digits = this.#digits;
    for (let i = 0; i < pool.length; i++) {
      digits[2 * i] = HEX_DIGITS[pool[i]! >> 4]!;
      digits[2 * i + 1] = HEX_DIGITS[pool[i]! & 15]!;
    }
    this.#hex = latin1.decode(digits);
    this.#at = 0;
  }

  /** `bytes` random bytes as hex, never all zero. */
  hex(bytes: number): string {
    for (;;) {
      if (this.#at + bytes > this.#pool.length) this.#refill();
      const at = this.#at;
      this.#at += bytes;
      const pool = this.#pool;
      for (let i = at; i < at + bytes; i++) {
        if (pool[i] !== 0) return this.#hex.slice(2 * at, 2 * (at + bytes));
      }
    }
  }
}

const TRACESTATE_KEY =
  /^(?:[a-z0-9][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})$/;
const TRACESTATE_VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/**
 * A `tracestate` with its malformed members left out (at most 32 kept, a
 * key once); `undefined` when none is left.
 */
export function cleanTraceState(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const kept: string[] = [];
  const keys = new Set<string>();
  for (const raw of value.split(",")) {
    const member = raw.trim();
    const eq = member.indexOf("=");
    if (eq <= 0) continue;
    const key = member.slice(0, eq);
    if (!TRACESTATE_KEY.test(key) || !TRACESTATE_VALUE.test(member.slice(eq + 1))) continue;
    if (keys.has(key)) continue;
    keys.add(key);
    kept.push(member);
    if (kept.length === 32) break;
  }
  return kept.length ? kept.join(",") : undefined;
}

/** A span being recorded. */
export class Span implements SpanData {
  readonly name: string;
  readonly kind: SpanKindValue;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly traceState: string | undefined;
  readonly flags: number;
  readonly startMs: number;
  endMs = 0;
  readonly attributes: Record<string, AttributeValue>;
  statusCode: 0 | 2 = 0;
  statusMessage = "";
  readonly #recorder: SpanRecorder | null;

  /** Use {@linkcode SpanRecorder.start}. */
  constructor(
    recorder: SpanRecorder | null,
    name: string,
    kind: SpanKindValue,
    context: SpanContext,
    parent: SpanContext | null,
    attributes: Record<string, AttributeValue>,
    startMs: number,
  ) {
    this.#recorder = recorder;
    this.name = name;
    this.kind = kind;
    this.traceId = context.traceId;
    this.spanId = context.spanId;
    this.parentSpanId = parent?.spanId;
    this.traceState = context.traceState;
    this.flags = (context.traceFlags & 0xff) | HAS_IS_REMOTE | (parent?.isRemote ? IS_REMOTE : 0);
    this.startMs = startMs;
    this.attributes = attributes;
  }

  /** Where the span sits, for its children and outbound requests. */
  get context(): SpanContext {
    return {
      traceId: this.traceId,
      spanId: this.spanId,
      traceFlags: this.flags & 0xff,
      ...(this.traceState !== undefined ? { traceState: this.traceState } : {}),
      isRemote: false,
    };
  }

  /** True when the span is recorded (its trace is sampled). */
  get recording(): boolean {
    return this.#recorder !== null;
  }

  /** Sets one attribute. */
  setAttribute(key: string, value: AttributeValue): void {
    this.attributes[key] = value;
  }

  /** Marks the span failed. */
  setError(message: string): void {
    this.statusCode = 2;
    this.statusMessage = message;
  }

  /** Ends the span (once; later calls do nothing). */
  end(endMs: number = performance.timeOrigin + performance.now()): void {
    if (this.endMs !== 0) return;
    this.endMs = endMs;
    this.#recorder?.finished(this);
  }
}

/**
 * Records spans and pushes them in batches through `sink`.
 *
 * @example
 * ```ts
 * import { SpanKind, SpanRecorder } from "./spans.ts";
 * const pushed: string[] = [];
 * const recorder = new SpanRecorder(async (batch) => {
 *   pushed.push(...batch.map((s) => s.name));
 * });
 * const span = recorder.start("work", SpanKind.INTERNAL, { attributes: { items: 3 } });
 * span.end();
 * await recorder.shutdown();
 * console.log(pushed); // ["work"]
 * ```
 */
export class SpanRecorder {
  readonly #sink: SpanSink;
  readonly #maxQueue: number;
  readonly #batch: number;
  readonly #delayMs: number;
  readonly #onError: ((error: unknown, spans: number) => void) | undefined;
  readonly #ids = new IdSource();
  readonly #active = new AsyncLocalStorage<Span>();
  #queue: Span[] = [];
  #timer: ReturnType<typeof setTimeout> | null = null;
  #pushing: Promise<void> | null = null;
  #dropped = 0;
  #closed = false;

  /** A recorder pushing through `sink`. */
  constructor(sink: SpanSink, options: SpanBatchOptions = {}) {
    this.#sink = sink;
    this.#maxQueue = options.maxQueueSize ?? positiveIntegerEnv("OTEL_BSP_MAX_QUEUE_SIZE") ?? 2048;
    this.#batch = Math.min(
      this.#maxQueue,
      options.maxExportBatchSize ?? positiveIntegerEnv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") ?? 512,
    );
    this.#delayMs = options.scheduledDelayMs ?? positiveIntegerEnv("OTEL_BSP_SCHEDULE_DELAY") ??
      5000;
    this.#onError = options.onError;
  }

  /** Spans dropped because the queue was full. */
  get dropped(): number {
    return this.#dropped;
  }

  /** The span active here (in `runActive`'s callback), if any. */
  active(): Span | undefined {
    return this.#active.getStore();
  }

  /** Runs `fn` with `span` active. */
  runActive<T>(span: Span, fn: () => T): T {
    return this.#active.run(span, fn);
  }

  /**
   * Starts a span: a child of `parent` (a remote context), else of the
   * active span unless `root`; now unless `startMs`.
   */
  start(
    name: string,
    kind: SpanKindValue,
    options: {
      readonly parent?: SpanContext | null;
      readonly root?: boolean;
      readonly attributes?: Record<string, AttributeValue>;
      readonly startMs?: number;
    } = {},
  ): Span {
    const parent = options.parent ?? (options.root ? null : this.#active.getStore()?.context) ??
      null;
    const sampled = parent === null || (parent.traceFlags & 1) === 1;
    const context: SpanContext = {
      traceId: parent?.traceId ?? this.#ids.hex(16),
      spanId: this.#ids.hex(8),
      traceFlags: sampled ? 1 : 0,
      ...(parent?.traceState !== undefined ? { traceState: parent.traceState } : {}),
      isRemote: false,
    };
    return new Span(
      sampled ? this : null,
      name,
      kind,
      context,
      parent,
      options.attributes ?? {},
      options.startMs ?? performance.timeOrigin + performance.now(),
    );
  }

  /** A span ended (called by `Span.end`). */
  finished(span: Span): void {
    if (this.#closed) return;
    if (this.#queue.length >= this.#maxQueue) {
      this.#dropped++;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= this.#batch) {
      if (this.#pushing === null) this.#pushing = this.#push(false);
    } else if (this.#timer === null && this.#pushing === null) {
      this.#schedule();
    }
  }

  // A push of what waits, `scheduledDelayMs` from now.
  #schedule(): void {
    const timer = setTimeout(() => {
      this.#timer = null;
      if (this.#pushing === null) this.#pushing = this.#push(false);
    }, this.#delayMs);
    Deno.unrefTimer(timer as unknown as number);
    this.#timer = timer;
  }

  // Pushes full batches (all of them when `all`), one at a time.
  async #push(all: boolean): Promise<void> {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    try {
      // A full batch now; a partial one only when the timer (or shutdown) asked.
      let first = true;
      while (this.#queue.length >= this.#batch || ((first || all) && this.#queue.length > 0)) {
        first = false;
        const batch = this.#queue.splice(0, this.#batch);
        try {
          await this.#sink(batch);
        } catch (error) {
          this.#onError?.(error, batch.length);
        }
      }
    } finally {
      this.#pushing = null;
      if (this.#queue.length > 0 && !all) this.#schedule();
    }
  }

  /** Pushes every span ended so far. */
  async flush(): Promise<void> {
    while (this.#pushing !== null) await this.#pushing;
    if (this.#queue.length > 0) await (this.#pushing = this.#push(true));
  }

  /** Pushes what is left; spans ended later are not pushed. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    await this.flush();
  }

  /**
   * Request spans on this recorder: a `SERVER` span per inbound request,
   * named by `spanName(method)`, a child of the request's `traceparent`
   * (else a root). It is the active span while the request is answered
   * (for child spans and `current()`) for the methods `activeFor` names —
   * by default all; making a span active costs about as much as the rest
   * of recording it, so a server names the methods whose handlers start
   * spans of their own.
   */
  requestTracer(
    options: {
      readonly spanName?: (method: string) => string;
      readonly activeFor?: (method: string) => boolean;
      /**
       * The name of an instant child span recorded under a request's span
       * as it starts, given the span active where the request arrived
       * (none: no such span).
       */
      readonly received?: (active: Span | undefined) => string | undefined;
    } = {},
  ): RequestTracer {
    const spanName = options.spanName ?? ((m: string) => m);
    const activeFor = options.activeFor ?? (() => true);
    const received = options.received;
    const recorded = async <T extends object>(
      span: Span,
      attributes: Record<string, AttributeValue>,
      answer: () => Promise<T>,
      receivedAt: number | undefined,
    ): Promise<T> => {
      try {
        const outcome = await answer();
        const error = (outcome as { error?: { code: number; message: string } }).error;
        const now = performance.now();
        if (receivedAt !== undefined) {
          attributes["rpc.response_enqueue_offset_ns"] = Math.round((now - receivedAt) * 1e6);
        }
        attributes.result = error ? "error" : "success";
        if (error) {
          attributes["rpc.jsonrpc.error_code"] = error.code;
          attributes["rpc.jsonrpc.error_message"] = error.message;
          span.setError(error.message);
        }
        span.end(performance.timeOrigin + now);
        return outcome;
      } finally {
        span.end();
      }
    };
    return {
      run: (method, id, trace, answer, receivedAt) => {
        const remote = trace ? parseTraceparent(trace.traceparent) : null;
        const traceState = remote ? cleanTraceState(trace?.tracestate) : undefined;
        const attributes: Record<string, AttributeValue> = {
          method,
          "rpc.system": "jsonrpc",
          "rpc.method": method,
          "rpc.jsonrpc.version": "2.0",
          "rpc.jsonrpc.request_id": String(id),
        };
        if (receivedAt !== undefined) {
          attributes["rpc.dispatch_offset_ns"] = Math.round(
            (performance.now() - receivedAt) * 1e6,
          );
        }
        const span = this.start(spanName(method), SpanKind.SERVER, {
          parent: remote
            ? { ...remote, ...(traceState !== undefined ? { traceState } : {}), isRemote: true }
            : null,
          attributes,
          ...(receivedAt !== undefined ? { startMs: performance.timeOrigin + receivedAt } : {}),
        });
        const mark = received?.(this.#active.getStore());
        if (mark !== undefined) {
          this.start(mark, SpanKind.INTERNAL, { parent: span.context }).end();
        }
        return activeFor(method)
          ? this.#active.run(span, () => recorded(span, attributes, answer, receivedAt))
          : recorded(span, attributes, answer, receivedAt);
      },
      current: () => {
        const span = this.#active.getStore();
        if (!span) return undefined;
        const flags = HEX[span.flags & 0xff];
        return {
          traceparent: `00-${span.traceId}-${span.spanId}-${flags}`,
          ...(span.traceState !== undefined ? { tracestate: span.traceState } : {}),
        };
      },
    };
  }
}
