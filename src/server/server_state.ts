/**
 * What handlers and connections share: resolved options, the logger, the
 * session registry, the method table and the environment description.
 * Internal; the public surface is `ExecServer`.
 *
 * @module
 */

import type { ExecServerMetrics } from "../telemetry/exec_metrics.ts";
import type { ExecTelemetry } from "../telemetry/tracing.ts";
import type { SandboxFsGateway } from "../sandbox/fs_gateway.ts";
import type { Logger } from "../log/logger.ts";
import type { RequestTracer } from "../log/otel.ts";
import type { ShellSnapshots } from "../process/shell_snapshot.ts";
import type { HistoryBudget } from "../process/output_log.ts";
import type { MemoryTrimmer } from "../util/memory_trim.ts";
import type { OrphanGuard } from "../process/orphan_guard.ts";
import type { EnvironmentInfo } from "../protocol/types.ts";
import type { SessionRegistry } from "./session_registry.ts";

/** What the server needs of an egress proxy: rewriting a child's environment. */
export interface ManagedNetworkEnv {
  /** Returns `env` routed through the proxy. */
  applyToEnv(env: Record<string, string>): Record<string, string>;
  /**
   * The proxy's loopback ports, which a restricted sandbox is routed to,
   * and the SOCKS5 one, which transparent TCP capture goes through.
   */
  managedNetworkContext?(): {
    readonly loopbackPorts: readonly number[];
    readonly socksPort?: number | null;
  };
}

/** Fully resolved server options. */
export interface ResolvedExecServerOptions {
  /** Requests handled at once per connection and lane. */
  readonly concurrency: number;
  /** How long a closed process stays readable, in ms. */
  readonly processRetentionMs: number;
  /** How long a detached session may be resumed, in ms. */
  readonly sessionTtlMs: number;
  /** Cap on buffered `http/request` bodies, in bytes. */
  readonly httpBodyLimitBytes: number;
  /**
   * Output already handed to a connection that each process keeps for
   * replay after a reconnect (bytes in flight in socket and relay buffers).
   */
  readonly outputHistoryBytes: number;
  /**
   * `isolate`: sandboxed processes get their own PID namespace (default);
   * `inherit`: they share the server's (and can signal same-user processes).
   */
  readonly sandboxPidNamespace: "isolate" | "inherit";
  /** Routed sandboxes capture raw TCP by default. */
  readonly sandboxTransparentTcp: boolean;
  /** The mandatory upstream of launched proxies' SOCKS5 TCP, or null. */
  readonly tcpUpstreamProxy: URL | null;
}

/** Shared server state (see the module documentation). */
export interface ServerState {
  /** Resolved options. */
  readonly options: ResolvedExecServerOptions;
  /** Where to log. */
  readonly logger: Logger;
  /** Live sessions. */
  readonly sessions: SessionRegistry;
  /**
   * What `environment/info` answers: at once, or once the start-up probes
   * (bubblewrap's) have answered.
   */
  environmentInfo(): EnvironmentInfo | Promise<EnvironmentInfo>;
  /**
   * Loads the handlers that load on first use, once, after the current
   * task (a connection calls it when it has answered `initialize`).
   */
  warm(): void;
  /** Applied to processes started with `enforceManagedNetwork: true`. */
  readonly managedNetwork: ManagedNetworkEnv | null;
  /** Returns freed memory to the OS after bursts of work. */
  readonly trimmer: MemoryTrimmer;
  /** The output history all processes share. */
  readonly historyBudget: HistoryBudget;
  /** Shell snapshots by scope (`process/start.shellSnapshot`). */
  readonly shellSnapshots: ShellSnapshots;
  /** Spans per request, when telemetry is on. */
  readonly tracer: RequestTracer | null;
  /** Metrics, when the server has them. */
  readonly metrics: ExecServerMetrics | null;
  /** Process and HTTP spans and events (an OTLP push), when asked for. */
  readonly execTelemetry: ExecTelemetry | null;
  /** Runs sandboxed `fs/*` requests inside their sandbox. */
  readonly sandboxFs: SandboxFsGateway;
  /** Kills the process groups this server started if it dies. */
  readonly orphans: OrphanGuard;
}
