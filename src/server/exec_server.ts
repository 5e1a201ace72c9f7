/**
 * The exec-server core: sessions, the method table and the environment,
 * independent of any transport. Listeners hand it connections.
 *
 * @module
 */

import { SandboxFsGateway } from "../sandbox/fs_gateway.ts";
import { probeSandboxSupport, type SandboxSupport, sandboxSupport } from "../sandbox/bwrap.ts";
import { tcpCaptureSupport } from "../sandbox/tcp_capture/support.ts";
import type { CloseInfo, Connection } from "../jsonrpc/connection.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import type { RequestTracer } from "../log/otel.ts";
import { ShellSnapshots } from "../process/shell_snapshot.ts";
import { HistoryBudget } from "../process/output_log.ts";
import { MemoryTrimmer } from "../util/memory_trim.ts";
import { nextTask } from "../util/async.ts";
import { OrphanGuard } from "../process/orphan_guard.ts";
import { sealInheritedDescriptors } from "../process/inherited_fds.ts";
import type { EnvironmentInfo } from "../protocol/types.ts";
import { serverCapabilities } from "./capabilities.ts";
import { type DisconnectPolicy, ServerConnection } from "./connection.ts";
import type { ExecServerMetrics, MetricsTransport } from "../telemetry/exec_metrics.ts";
import type { ExecTelemetry } from "../telemetry/tracing.ts";
import { environmentInfo } from "./environment_info.ts";
import { type LazyMethods, lazyMethods, type MethodRegistry } from "./handler.ts";
import { environmentMethods } from "./handlers/environment.ts";
import { Method } from "../protocol/methods.ts";
import { fsRequests } from "../protocol/fs.ts";
import { httpRequests } from "../protocol/http.ts";
import { processRequests } from "../protocol/process.ts";
import type { ManagedNetworkEnv, ResolvedExecServerOptions, ServerState } from "./server_state.ts";
import { SessionRegistry } from "./session_registry.ts";
import { ptyAvailability } from "../process/pty/spawn_pty.ts";

export type { ResolvedExecServerOptions } from "./server_state.ts";

/** Options of an {@linkcode ExecServer}. */
export interface ExecServerOptions {
  /** Requests handled at once per connection and lane. Default 32. */
  readonly concurrency?: number;
  /** How long a closed process stays readable, in ms. Default 80 000. */
  readonly processRetentionMs?: number;
  /** How long a detached session may be resumed, in ms. Default 80 000. */
  readonly sessionTtlMs?: number;
  /** Cap on buffered `http/request` bodies, in bytes. Default 256 MiB. */
  readonly httpBodyLimitBytes?: number;
  /**
   * Delivered output each process keeps so a client that reconnects can
   * fetch what was in flight (socket and relay buffers) when the connection
   * dropped. Default 16 MiB (only chatty processes use it).
   */
  readonly outputHistoryBytes?: number;
  /**
   * The histories of all processes together (see `outputHistoryBytes`):
   * past it the oldest processes' histories are trimmed first. Default
   * 64 MiB.
   */
  readonly outputHistoryBudgetBytes?: number;
  /**
   * PID namespace of sandboxed processes: `isolate` (default) or `inherit`
   * (the reference's `--linux-sandbox-pid-namespace`).
   */
  readonly sandboxPidNamespace?: "isolate" | "inherit";
  /**
   * Capture the raw TCP of every sandbox routed to the managed proxy
   * (`enforceManagedNetwork`), as if each start asked for
   * `networkProxy.proxy.transparentTcp` (the reference's
   * `--linux-sandbox-transparent-tcp`). Default false.
   */
  readonly sandboxTransparentTcp?: boolean;
  /**
   * An HTTP CONNECT proxy (`http://HOST:PORT`) that every SOCKS5 TCP
   * connection of a launched proxy must go through (the reference's
   * `--tcp-upstream-proxy`); a managed-network start with no proxy of its
   * own is refused. Default none.
   */
  readonly tcpUpstreamProxy?: URL;
  /** Where to log. Default: nowhere (the CLI logs JSON lines on stderr). */
  readonly logger?: Logger;
  /**
   * An egress proxy for processes started with `enforceManagedNetwork:
   * true` (their environment is routed through it; see `NetworkProxy`).
   */
  readonly managedNetwork?: ManagedNetworkEnv;
  /**
   * Spans per JSON-RPC request (see `otelRequestTracer`, which the CLI
   * passes when `OTEL_DENO=true`). Default: none.
   */
  readonly tracer?: RequestTracer | null;
  /**
   * Metrics as the reference names them (see `ExecServerMetrics`, read by
   * any OpenTelemetry SDK reader through its `producer()`). Default: none,
   * and nothing is measured.
   */
  readonly metrics?: ExecServerMetrics | null;
  /**
   * Spans and events per process and per HTTP request (see `startTracing`):
   * reported inside the request's span. Default: none.
   */
  readonly execTelemetry?: ExecTelemetry | null;
}

/**
 * The method families whose handlers (and what they use: processes,
 * sandboxes, files, HTTP) are evaluated on first use — or right after the
 * first `initialize` is answered — so that answer does not wait for them.
 */
function lazyFamilies(): LazyMethods[] {
  return [
    lazyMethods(
      "process",
      Object.keys(processRequests),
      async () => (await import("./handlers/process.ts")).processMethods(),
    ),
    lazyMethods(
      "fs",
      Object.keys(fsRequests),
      async () => (await import("./handlers/fs.ts")).fsMethods,
    ),
    lazyMethods(
      "http",
      Object.keys(httpRequests),
      async () => (await import("./handlers/http.ts")).httpMethods,
    ),
    lazyMethods(
      "discovery",
      [Method.CapabilitiesDiscoverV2, Method.CapabilityRootsDiscoverV1],
      async () => (await import("./handlers/discovery.ts")).discoveryMethods,
    ),
  ];
}

/** The registered methods. */
function methodTable(families: readonly LazyMethods[]): MethodRegistry {
  return new Map(
    Object.entries(Object.assign({}, environmentMethods, ...families.map((f) => f.methods))),
  );
}

/** See the module documentation. */
export class ExecServer {
  #state: ServerState;
  #methods: MethodRegistry;
  #connections = new Set<ServerConnection>();
  #infoNow: () => EnvironmentInfo;
  #warmed = false;
  #closed = false;

  /** Creates a server; it serves nothing until given connections. */
  constructor(options: ExecServerOptions = {}) {
    const resolved: ResolvedExecServerOptions = {
      concurrency: options.concurrency ?? 32,
      processRetentionMs: options.processRetentionMs ?? 80_000,
      sessionTtlMs: options.sessionTtlMs ?? 80_000,
      httpBodyLimitBytes: options.httpBodyLimitBytes ?? 256 * 1024 * 1024,
      outputHistoryBytes: options.outputHistoryBytes ?? 16 * 1024 * 1024,
      sandboxPidNamespace: options.sandboxPidNamespace ?? "isolate",
      sandboxTransparentTcp: options.sandboxTransparentTcp ?? false,
      tcpUpstreamProxy: options.tcpUpstreamProxy ?? null,
    };
    // A library logs nothing unless given a logger (the CLI passes one).
    const logger = options.logger ?? nullLogger;
    // What this process inherited never reaches a child (or a sandbox).
    sealInheritedDescriptors(logger);
    const families = lazyFamilies();
    const methods = methodTable(families);
    this.#methods = methods;
    const describe = (sandbox: SandboxSupport): EnvironmentInfo =>
      environmentInfo(
        serverCapabilities({
          methods: new Set(methods.keys()),
          tty: ptyAvailability().available,
          managedNetworkProxy: options.managedNetwork !== undefined,
          sandbox: sandbox.available,
          transparentTcp: tcpCaptureSupport().available,
        }),
        { available: sandbox.available, mechanism: "bubblewrap", reason: sandbox.reason },
      );
    // The sandbox probe (a bubblewrap run) is awaited by the first
    // `initialize`, not by the constructor: the CLI starts it before the
    // server's modules load, and a server answers at once when it is done.
    const probing = probeSandboxSupport();
    let info: EnvironmentInfo | null = null;
    const infoReady = probing.then((sandbox) => (info ??= describe(sandbox)));
    // Awaited by `initialize`; never an unhandled rejection before one comes.
    infoReady.catch(() => {});
    this.#infoNow = () => (info ??= describe(sandboxSupport()));
    this.#state = {
      options: resolved,
      logger,
      sessions: new SessionRegistry(
        { processRetentionMs: resolved.processRetentionMs, sessionTtlMs: resolved.sessionTtlMs },
        logger,
      ),
      environmentInfo: () => info ?? infoReady,
      warm: () => {
        if (this.#warmed || this.#closed) return;
        this.#warmed = true;
        // After the answer is on its way: a task, not a microtask.
        nextTask(() => {
          if (this.#closed) return;
          for (const family of families) family.load().catch(() => {});
        });
      },
      managedNetwork: options.managedNetwork ?? null,
      tracer: options.tracer ?? null,
      metrics: options.metrics ?? null,
      execTelemetry: options.execTelemetry ?? null,
      shellSnapshots: new ShellSnapshots({ logger }),
      trimmer: new MemoryTrimmer(),
      historyBudget: new HistoryBudget(options.outputHistoryBudgetBytes ?? 64 * 1024 * 1024),
      sandboxFs: new SandboxFsGateway(),
      orphans: new OrphanGuard(logger),
    };
  }

  /** Resolved options. */
  get options(): ResolvedExecServerOptions {
    return this.#state.options;
  }

  /** Where the server logs. */
  get logger(): Logger {
    return this.#state.logger;
  }

  /** What `environment/info` answers. */
  get environmentInfo(): EnvironmentInfo {
    return this.#infoNow();
  }

  /** Connections currently served. */
  get connectionCount(): number {
    return this.#connections.size;
  }

  /** Live sessions (attached or detached). */
  get sessionCount(): number {
    return this.#state.sessions.size;
  }

  /**
   * Serves one connection; resolves when it has ended and been cleaned up.
   * With `detach` (WebSocket) its session survives a disconnect and can be
   * resumed; with `terminate` (stdio) the session's processes are killed.
   * `transport` labels its metrics (default: `stdio` for `terminate`,
   * `websocket` for `detach`).
   */
  serve(
    connection: Connection,
    onDisconnect: DisconnectPolicy,
    transport: MetricsTransport = onDisconnect === "terminate" ? "stdio" : "websocket",
  ): Promise<CloseInfo> {
    if (this.#closed) {
      connection.close("server is shutting down");
      return Promise.resolve({ reason: "server is shutting down" });
    }
    const served = new ServerConnection(this.#state, connection, {
      onDisconnect,
      methods: this.#methods,
    });
    this.#connections.add(served);
    const metrics = this.#state.metrics;
    metrics?.connectionOpened(transport);
    return served.closed.finally(() => {
      metrics?.connectionClosed(transport);
      this.#connections.delete(served);
      this.#state.trimmer.note();
    });
  }

  /** Closes every connection and kills every session's processes. */
  async close(): Promise<void> {
    this.#closed = true;
    const connections = [...this.#connections];
    for (const c of connections) c.close("server shutting down");
    await Promise.allSettled(connections.map((c) => c.closed));
    await this.#state.sessions.closeAll();
    await this.#state.sandboxFs[Symbol.asyncDispose]();
    await this.#state.shellSnapshots.close();
    await this.#state.trimmer.close();
    await this.#state.orphans.close();
    // The sandbox probe this server started never outlives it.
    await probeSandboxSupport();
  }

  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
