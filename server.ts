/**
 * The exec-server itself: {@linkcode ExecServer} and its listeners (stdio,
 * WebSocket with token or JWT auth), and structured logging.
 *
 * @example Serve on a loopback WebSocket
 * ```ts ignore
 * import { ExecServer, listenWebSocket } from "jsr:@org/exec-server/server";
 *
 * const server = new ExecServer();
 * const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
 * console.log(listener.url);
 * ```
 *
 * @module
 */

export {
  ExecServer,
  type ExecServerOptions,
  type ResolvedExecServerOptions,
} from "./src/server/exec_server.ts";
export { serveStdio, type StdioServeOptions } from "./src/server/listen_stdio.ts";
export type { ByteReader } from "./src/util/conn_io.ts";
export {
  listenWebSocket,
  type WebSocketListener,
  type WebSocketListenOptions,
} from "./src/server/listen_ws.ts";
export {
  type CapabilityTokenAuth,
  type NoAuth,
  type SignedBearerTokenAuth,
  signJwt,
  type WebSocketAuth,
} from "./src/server/ws_auth.ts";
export type { DisconnectPolicy } from "./src/server/connection.ts";
export type { ManagedNetworkEnv } from "./src/server/server_state.ts";

export {
  createLogger,
  type LogFields,
  type Logger,
  type LoggerOptions,
  type LogLevel,
  nullLogger,
} from "./src/log/logger.ts";
export {
  otelEnabled,
  otelRequestTracer,
  type RequestTracer,
  type SpanProvider,
} from "./src/log/otel.ts";
export {
  type ExecTelemetry,
  type HandshakeRejected,
  type HandshakeRejection,
  type HttpEnd,
  type ProcessEnd,
  type ProcessMetadataLike,
  type RemoteTracing,
  startTracing,
  type Tracing,
  type TracingOptions,
} from "./src/telemetry/tracing.ts";
export { type OtlpExportSettings, type OtlpSignal } from "./src/telemetry/otlp_settings.ts";
export {
  DURATION_BOUNDS_SECONDS,
  ExecServerMetrics,
  methodLabel,
  type MetricsCollection,
  type MetricsProducer,
  type MetricsTransport,
  type ReconnectReason,
  type RemoteMetrics,
  type RequestResult,
  type RequestTimings,
} from "./src/telemetry/exec_metrics.ts";
export {
  type Cell,
  type GaugeRead,
  type Labels,
  MetricSet,
  Series,
  type Temporality,
} from "./src/telemetry/aggregate.ts";
export { type MetricsAddress, metricsUrl, parseMetricsAddress } from "./src/telemetry/address.ts";
