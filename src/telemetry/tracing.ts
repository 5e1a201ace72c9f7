/**
 * Spans and log events pushed over OTLP/HTTP, as the reference pushes them
 * when Codex's configuration has `[otel] trace_exporter` (spans) and
 * `[otel] exporter` (log events): the runtime span `codex.exec_server`
 * (the server's lifetime), a `SERVER` span per request named after its
 * method (`unknown` for a method outside the protocol; see
 * `otelRequestTracer`), and per process a `codex.exec_server.process`
 * span, a child of its `process/start`, with `process.id` and `result`,
 * the events `codex.exec_server.process_start`,
 * `codex.exec_server.process_exit` (`sandbox.type`, `process.exit_code`,
 * `process.termination_requested`), `codex.exec_server.sandbox_denied`
 * and `codex.exec_server.process_spawn_failed` in scope
 * `codex_otel.log_only` (with the request's `conversation.id` and
 * `tool.call_id` when it names them),
 * and a `CLIENT` span `codex.exec_server.http_request` per `http/request`
 * (`http.request.method`, `server.address`, `server.port`,
 * `http.response.status_code`). The
 * tracing and logs SDKs and their exporters load only here, when asked.
 *
 * @module
 */

import type { RequestTracer } from "../log/otel.ts";
import type { OtlpExportSettings } from "./otlp_settings.ts";
import { VERSION } from "../version.ts";
import { osResource } from "./provider.ts";
import { type Span, SpanKind, SpanRecorder } from "./spans.ts";
import { otlpSpanSink } from "./otlp_traces.ts";

/** The span a remote executor serves each rendezvous socket in (the reference's name). */
const ENVIRONMENT_SPAN = "run_multiplexed_environment";
/** A refused handshake's span. */
const HANDSHAKE_DIAGNOSTIC = "codex.exec_server.noise_handshake_diagnostic";
/** The instant span under each request received over the relay. */
const NOISE_REQUEST_SPAN = "codex.exec_server.noise_request_received";

/** What a server reports about the processes it starts and the HTTP requests it makes. */
export interface ExecTelemetry {
  /**
   * A process started (inside its `process/start`'s span); returns how to
   * report its end. `metadata` is the request's (`threadId` becomes the
   * events' `conversation.id`, `toolCallId` their `tool.call_id`).
   */
  processStarted(
    processId: string,
    sandboxed: boolean,
    metadata?: ProcessMetadataLike | null,
  ): ProcessEnd;
  /** A process could not be spawned. */
  processSpawnFailed(sandboxed: boolean, metadata?: ProcessMetadataLike | null): void;
  /** An `http/request` is sent (inside its span); returns how to report its response. */
  httpRequest(method: string, url: URL): HttpEnd;
  /**
   * Runs `step` (a step of starting a process: the reference's
   * `codex.exec_server.process_prepare_sandbox`,
   * `…process_prepare_shell_snapshot`, `…process_capture_shell_snapshot`,
   * `codex.process.spawn`) inside an `INTERNAL` span `name` under the
   * active one, ended when `step` returns or its promise settles.
   */
  span<T>(name: string, attributes: Readonly<Record<string, string | boolean>>, step: () => T): T;
}

/**
 * What a remote executor reports (`RemoteExecutor`'s `tracing` option):
 * its registry and rendezvous calls as `CLIENT` spans, and who it is, for
 * the process events (`executor.environment_id`, `executor.registration_id`).
 */
export interface RemoteTracing {
  /** Runs `call` inside a root `CLIENT` span `name` (with `result` when `withResult`). */
  clientSpan<T>(
    name: string,
    attributes: Readonly<Record<string, string>>,
    call: () => Promise<T>,
    withResult?: boolean,
  ): Promise<T>;
  /** The executor's current registration. */
  executor(identity: { readonly environmentId: string; readonly registrationId: string }): void;
  /**
   * Serves one rendezvous socket (`serve`, every harness stream on it)
   * inside the reference's root span `run_multiplexed_environment`
   * (`noise_side` = `executor`): the streams' request spans are its
   * children, each with an instant child
   * `codex.exec_server.noise_request_received`.
   */
  environment<T>(serve: () => Promise<T>): Promise<T>;
  /**
   * A harness's handshake was refused: the reference's root span
   * `codex.exec_server.noise_handshake_diagnostic` and its `WARN` event
   * ("Noise executor handshake diagnostic").
   */
  handshakeRejected(rejection: HandshakeRejected): void;
}

/**
 * Why an executor refused a harness's handshake, as the reference's
 * `noise_reason` names it.
 */
export type HandshakeRejection =
  | "cooldown"
  | "duplicate_active_stream"
  | "duplicate_pending_stream"
  | "active_stream_limit"
  | "pending_validation_limit"
  | "handshake_request"
  | "authorization_too_long"
  | "authorization_not_utf8"
  | "registry_http"
  | "validation_protocol"
  | "validation_timeout"
  | "registry_request";

/** One refused handshake. */
export interface HandshakeRejected {
  /** The executor's environment. */
  readonly environmentId: string;
  /** Its current registration. */
  readonly registrationId: string;
  /** The harness's stream. */
  readonly streamId: string;
  /** Why. */
  readonly reason: HandshakeRejection;
  /** The registry's HTTP status (`registry_http`), else null. */
  readonly registryStatus: number | null;
}

/** The answer to one HTTP request, reported once. */
export interface HttpEnd {
  /** Its status (`null`: no response). */
  finished(status: number | null): void;
}

/** What a `process/start` says about its caller (its `metadata`). */
export interface ProcessMetadataLike {
  /** Codex's thread (the events' `conversation.id`). */
  readonly threadId?: string | null;
  /** The tool call (the events' `tool.call_id`). */
  readonly toolCallId?: string | null;
}

/** The end of one process, reported once. */
export interface ProcessEnd {
  /**
   * It exited (`null`: killed by a signal); `terminationRequested`: a client
   * asked; `sandboxDenied`: its failure looks like the sandbox's refusal.
   */
  finished(exitCode: number | null, terminationRequested: boolean, sandboxDenied?: boolean): void;
}

/** Running tracing: the request spans, the process reports, shutdown. */
export interface Tracing extends AsyncDisposable {
  /** A span per request (null when only log events are pushed). */
  readonly requestTracer: RequestTracer | null;
  /** Process and HTTP spans and events. */
  readonly exec: ExecTelemetry;
  /** A remote executor's spans (`serve --remote`). */
  readonly remote: RemoteTracing;
  /** Ends the runtime span and pushes what is left. */
  close(): Promise<void>;
}

/** What to push, and as whom. */
export interface TracingOptions {
  /** Spans there. */
  readonly traces?: OtlpExportSettings | null;
  /** Log events there. */
  readonly logs?: OtlpExportSettings | null;
  /** The resource's `service.name`. Default `codex-exec-server`. */
  readonly serviceName?: string;
  /** A request span's name for its method (default: the method). */
  readonly spanName?: (method: string) => string;
  /** A push of spans failed (`spans` of them are gone). */
  readonly onExportError?: (error: unknown, spans: number) => void;
}

/**
 * Starts the span and log pushes `options` asks for; null when it asks
 * for neither.
 *
 * @example
 * ```ts
 * import { startTracing } from "./tracing.ts";
 * console.log(await startTracing({})); // null: nothing asked for
 * ```
 */
export async function startTracing(options: TracingOptions): Promise<Tracing | null> {
  const { traces, logs } = options;
  if (!traces && !logs) return null;
  const resourceAttributes = {
    "service.name": options.serviceName ?? "codex-exec-server",
    "service.version": VERSION,
    env: (traces ?? logs)!.environment,
    ...osResource(),
  };
  const exporterOptions = (s: OtlpExportSettings) => ({
    url: s.endpoint,
    headers: { ...s.headers },
  });

  const recorder = traces
    ? new SpanRecorder(
      otlpSpanSink(traces, {
        resource: resourceAttributes,
        scope: { name: "codex-exec-server", version: VERSION },
      }),
      options.onExportError ? { onError: options.onExportError } : {},
    )
    : null;
  const runtime = recorder?.start("codex.exec_server", SpanKind.INTERNAL, { root: true }) ?? null;
  // Only these handlers start spans under their request's (the process's
  // and the HTTP request's below).
  const parents = new Set(["process/start", "http/request"]);
  const requestTracer = recorder?.requestTracer({
    ...(options.spanName ? { spanName: options.spanName } : {}),
    activeFor: (method) => parents.has(method),
    received: (active) => active?.name === ENVIRONMENT_SPAN ? NOISE_REQUEST_SPAN : undefined,
  }) ?? null;
  // Runs `step` inside a child span of the active one, active meanwhile.
  const within = <T>(span: Span, step: () => T): T => {
    let result: T;
    try {
      result = recorder!.runActive(span, step);
    } catch (error) {
      span.end();
      throw error;
    }
    if (result instanceof Promise) {
      return result.finally(() => span.end()) as T;
    }
    span.end();
    return result;
  };

  let loggerProvider: import("@opentelemetry/sdk-logs").LoggerProvider | null = null;
  if (logs) {
    const [sdk, resources] = await Promise.all([
      import("@opentelemetry/sdk-logs"),
      import("@opentelemetry/resources"),
    ]);
    const exporter = logs.protocol === "json"
      ? new (await import("@opentelemetry/exporter-logs-otlp-http")).OTLPLogExporter(
        exporterOptions(logs),
      )
      : new (await import("@opentelemetry/exporter-logs-otlp-proto")).OTLPLogExporter(
        exporterOptions(logs),
      );
    loggerProvider = new sdk.LoggerProvider({
      resource: resources.resourceFromAttributes(resourceAttributes),
      processors: [new sdk.BatchLogRecordProcessor(exporter)],
    });
  }
  const events = loggerProvider?.getLogger("codex_otel.log_only") ?? null;
  // In remote mode the events say which executor they come from.
  let executor: Record<string, string> = {};
  const event = (name: string, attributes: Record<string, string | number | boolean>) =>
    // Severity INFO (9), as the reference's events.
    events?.emit({
      severityNumber: 9,
      severityText: "INFO",
      attributes: { "event.name": name, ...executor, ...attributes },
    });

  // The attributes every process event carries.
  const processAttributes = (sandboxed: boolean, metadata?: ProcessMetadataLike | null) => ({
    ...(metadata?.threadId ? { "conversation.id": metadata.threadId } : {}),
    ...(metadata?.toolCallId ? { "tool.call_id": metadata.toolCallId } : {}),
    "sandbox.type": sandboxed ? "LinuxSeccomp" : "None",
  });
  const exec: ExecTelemetry = {
    span(name, attributes, step) {
      if (!recorder) return step();
      return within(
        recorder.start(name, SpanKind.INTERNAL, { attributes: { ...attributes } }),
        step,
      );
    },
    processSpawnFailed(sandboxed, metadata) {
      event("codex.exec_server.process_spawn_failed", processAttributes(sandboxed, metadata));
    },
    httpRequest(method, url) {
      const span = recorder?.start("codex.exec_server.http_request", SpanKind.CLIENT, {
        attributes: {
          "http.request.method": method,
          "server.address": url.hostname.replace(/^\[(.*)\]$/, "$1"),
          "server.port": Number(url.port || (url.protocol === "https:" ? 443 : 80)),
        },
      });
      let ended = false;
      return {
        finished(status) {
          if (ended) return;
          ended = true;
          if (status !== null) span?.setAttribute("http.response.status_code", status);
          span?.end();
        },
      };
    },
    processStarted(processId, sandboxed, metadata) {
      const span = recorder?.start("codex.exec_server.process", SpanKind.INTERNAL, {
        attributes: { "process.id": processId },
      });
      const sandbox = processAttributes(sandboxed, metadata);
      event("codex.exec_server.process_start", sandbox);
      let ended = false;
      return {
        finished(exitCode, terminationRequested, sandboxDenied = false) {
          if (ended) return;
          ended = true;
          span?.setAttribute("result", exitCode === 0 ? "success" : "error");
          span?.end();
          if (sandboxDenied) {
            event("codex.exec_server.sandbox_denied", { ...sandbox, reason: "inferred_denial" });
          }
          event("codex.exec_server.process_exit", {
            ...sandbox,
            ...(exitCode !== null ? { "process.exit_code": exitCode } : {}),
            "process.termination_requested": terminationRequested,
          });
        },
      };
    },
  };

  const remote: RemoteTracing = {
    async clientSpan(name, attributes, call, withResult = true) {
      if (!recorder) return await call();
      const span: Span = recorder.start(name, SpanKind.CLIENT, {
        root: true,
        attributes: { ...attributes },
      });
      try {
        const value = await call();
        if (withResult) span.setAttribute("result", "success");
        return value;
      } catch (error) {
        if (withResult) span.setAttribute("result", "error");
        throw error;
      } finally {
        span.end();
      }
    },
    environment(serve) {
      if (!recorder) return serve();
      const span = recorder.start(ENVIRONMENT_SPAN, SpanKind.INTERNAL, {
        root: true,
        attributes: { noise_side: "executor" },
      });
      return within(span, serve);
    },
    handshakeRejected(r) {
      const attributes = {
        noise_event: "handshake",
        noise_outcome: "rejected",
        noise_side: "executor",
        noise_reason: r.reason,
        // Spelled as the reference spells it (Rust's `Option` debug form).
        registry_status: r.registryStatus === null ? "None" : `Some(${r.registryStatus})`,
        environment_id: r.environmentId,
        executor_registration_id: r.registrationId,
        stream_id: r.streamId,
      };
      recorder?.start(HANDSHAKE_DIAGNOSTIC, SpanKind.INTERNAL, { root: true, attributes }).end();
      // Severity WARN (13), as the reference's, with its message and without an event name.
      events?.emit({
        severityNumber: 13,
        severityText: "WARN",
        body: "Noise executor handshake diagnostic",
        attributes,
      });
    },
    executor(identity) {
      executor = {
        "executor.environment_id": identity.environmentId,
        "executor.registration_id": identity.registrationId,
      };
    },
  };

  let closing: Promise<void> | null = null;
  const close = () =>
    closing ??= (async () => {
      runtime?.end();
      await Promise.allSettled([recorder?.shutdown(), loggerProvider?.shutdown()]);
    })();
  return { requestTracer, exec, remote, close, [Symbol.asyncDispose]: close };
}
