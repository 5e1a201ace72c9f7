/**
 * `exec-server serve`: flags (a superset of `codex exec-server`'s where they
 * apply), validation with the reference's messages, and the run loop.
 *
 * @module
 */

import { consoleWrite, createLogger, type Logger, type LogLevel } from "../log/logger.ts";
import type { MetricsAddress } from "../telemetry/address.ts";
import { requestedOtlp, startCommandMetrics } from "../telemetry/command.ts";
import type { ExecServerMetrics } from "../telemetry/exec_metrics.ts";
import { otelRequestTracer } from "../log/otel.ts";
import { ExecServer } from "../server/exec_server.ts";
import { serveStdio } from "../server/listen_stdio.ts";
import type { WebSocketAuth } from "../server/ws_auth.ts";
import { VERSION } from "../version.ts";
import {
  announce,
  environmentIdFlag,
  logLevelFlag,
  metricsListenFlag,
  onTerminationSignal,
  parseByteSize,
  parseDuration,
  parseFlags,
  parsePositiveInt,
  printLine,
  readSecretFile,
  registrationBearer,
  UsageError,
} from "./common.ts";

/** Where to listen. */
export type ListenTarget = { kind: "stdio" } | { kind: "ws"; hostname: string; port: number };

/** Validated `serve` configuration. */
export interface ServeConfig {
  /** Listener. */
  readonly listen: ListenTarget;
  /** Concurrent requests per connection and lane. */
  readonly concurrency: number;
  /** Exit when stdin closes (WebSocket mode). */
  readonly exitOnStdinClose: boolean;
  /** PID namespace of sandboxed processes. */
  readonly sandboxPidNamespace: "isolate" | "inherit";
  /** Capture the raw TCP of every sandbox routed to the managed proxy. */
  readonly sandboxTransparentTcp: boolean;
  /** The mandatory HTTP CONNECT upstream of the proxies' SOCKS5 TCP, or null. */
  readonly tcpUpstreamProxy: URL | null;
  /** Log threshold. */
  readonly logLevel: LogLevel;
  /** How upgrades are authenticated (resolved lazily: token digests are async). */
  readonly auth: () => Promise<WebSocketAuth>;
  /** Allow non-loopback binds without auth. */
  readonly allowUnauthenticated: boolean;
  /** Closed-process retention (ms). */
  readonly processRetentionMs: number;
  /** Detached-session TTL (ms). */
  readonly sessionTtlMs: number;
  /** Buffered HTTP body cap (bytes). */
  readonly httpBodyLimitBytes: number;
  /** Egress proxy configuration file for managed-network processes. */
  readonly networkProxyConfig: string | null;
  /** Requirements file enforced on that proxy. */
  readonly networkRequirements?: string | null;
  /** Where `GET /metrics` (Prometheus text) is served, when asked for. */
  readonly metricsListen?: MetricsAddress | null;
  /** Remote mode: register with this registry and serve through its relay. */
  readonly remote: {
    url: string;
    environmentId: string;
    name: string | null;
    bearerFromStdin: boolean;
  } | null;
}

/** Help text for `serve`. */
export const SERVE_USAGE = `Usage: exec-server [serve] [OPTIONS]

Serve the exec-server JSON-RPC protocol on stdio or WebSocket.

Options:
  --listen <URL>                    stdio, stdio://, or ws://IP:PORT (default ws://127.0.0.1:0)
  --concurrent-requests <N>         requests handled at once per connection (default 32)
  --exit-on-stdin-close             exit when stdin closes (env CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE)
  --log-level <LEVEL>               error, warn, info, debug, trace (default info)
  --linux-sandbox-pid-namespace <MODE>
                                    sandboxed processes: isolate (own PID namespace, default)
                                    or inherit (can signal other same-user processes)
  --linux-sandbox-transparent-tcp   route a managed sandbox's raw TCP through the SOCKS5
                                    proxy (as if every routed start set transparentTcp)
  --tcp-upstream-proxy <HOST:PORT>  the HTTP CONNECT proxy every SOCKS5 TCP connection of a
                                    managed proxy must use (local targets are refused)
  --process-retention <DURATION>    keep closed processes readable this long (default 80s)
  --session-ttl <DURATION>          keep detached sessions resumable this long (default 80s)
  --http-body-limit <SIZE>          cap on buffered http/request bodies (default 256M)
  --ws-auth <MODE>                  capability-token or signed-bearer-token
  --ws-token-file <PATH>            absolute path of the capability token
  --ws-token-sha256 <HEX>           SHA-256 (hex) of the capability token
  --ws-shared-secret-file <PATH>    absolute path of the JWT shared secret (>= 32 bytes)
  --ws-issuer <ISSUER>              required JWT issuer
  --ws-audience <AUDIENCE>          required JWT audience
  --ws-max-clock-skew-seconds <N>   JWT exp/nbf tolerance (default 30)
  --allow-unauthenticated           allow a non-loopback ws listener without --ws-auth
  --remote <URL>                    register with the environment registry at URL and serve
                                    harnesses end-to-end encrypted through its relay
  --environment-id <ID>             the environment to register (with --remote)
  --name <NAME>                     human-readable environment name (logs)
  --registration-bearer-stdin       read the registration bearer from stdin (one line);
                                    otherwise EXEC_SERVER_REGISTRATION_BEARER
  --network-proxy <FILE>            run the egress proxy from FILE and route processes started
                                    with enforceManagedNetwork: true through it
  --network-requirements <FILE>     an administrator's limits for that proxy (see
                                    \`exec-server proxy --help\`, --requirements)
  --metrics-listen <[HOST:]PORT>    serve GET /metrics (Prometheus text format) on its own
                                    listener (loopback unless an IP is given)
  -h, --help                        show this help
`;

/** Parses `--listen`, with the reference's error messages. */
export function parseListen(value: string): ListenTarget {
  if (value === "stdio" || value === "stdio://") return { kind: "stdio" };
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\//.exec(value);
  if (!scheme || scheme[1]!.toLowerCase() !== "ws") {
    throw new UsageError(
      `unsupported --listen URL \`${value}\`; expected \`ws://IP:PORT\` or \`stdio\``,
    );
  }
  const bad = () =>
    new UsageError(`invalid websocket --listen URL \`${value}\`; expected \`ws://IP:PORT\``);
  const m = /^ws:\/\/(\[[0-9a-fA-F:.]+\]|\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})\/?$/.exec(value);
  if (!m) throw bad();
  const port = Number(m[2]);
  if (port > 65535) throw bad();
  const host = m[1]!.startsWith("[") ? m[1]!.slice(1, -1) : m[1]!;
  if (!host.includes(":") && host.split(".").some((o) => Number(o) > 255)) throw bad();
  return { kind: "ws", hostname: host, port };
}

function parseBoolEnv(name: string, value: string): boolean {
  if (value === "true") return true;
  if (value === "false") return false;
  throw new UsageError(`invalid value '${value}' for ${name}: expected true or false`, 2);
}

/** The WebSocket auth flags the serve parser saw (strings as given). */
type AuthFlagValues = Partial<Record<(typeof AUTH_FLAGS)[number], string>>;

const AUTH_FLAGS = [
  "ws-auth",
  "ws-token-file",
  "ws-token-sha256",
  "ws-shared-secret-file",
  "ws-issuer",
  "ws-audience",
  "ws-max-clock-skew-seconds",
] as const;

/**
 * `--ws-auth` and the flags that go with each mode, checked as the
 * reference checks them; returns how to build the listener's auth (secret
 * files are read now, digests computed when listening).
 */
function parseAuthFlags(v: AuthFlagValues, listen: ListenTarget): () => Promise<WebSocketAuth> {
  const authFlags = AUTH_FLAGS;
  const anyAuth = authFlags.some((f) => v[f] !== undefined);
  if (anyAuth && listen.kind === "stdio") {
    throw new UsageError("WebSocket auth requires a WebSocket listener, not stdio");
  }
  const mode = v["ws-auth"];
  let auth: () => Promise<WebSocketAuth> = () => Promise.resolve({ mode: "none" });
  if (mode === undefined) {
    if (anyAuth) {
      const flag = authFlags.find((f) => v[f] !== undefined)!;
      throw new UsageError(`\`--${flag}\` requires \`--ws-auth\``);
    }
  } else if (mode === "capability-token") {
    for (
      const f of [
        "ws-shared-secret-file",
        "ws-issuer",
        "ws-audience",
        "ws-max-clock-skew-seconds",
      ] as const
    ) {
      if (v[f] !== undefined) {
        throw new UsageError(`\`--${f}\` requires \`--ws-auth signed-bearer-token\``);
      }
    }
    const file = v["ws-token-file"];
    const digest = v["ws-token-sha256"];
    if (file !== undefined && digest !== undefined) {
      throw new UsageError("`--ws-token-file` and `--ws-token-sha256` cannot be used together");
    }
    if (file === undefined && digest === undefined) {
      throw new UsageError(
        "`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set",
      );
    }
    if (digest !== undefined) {
      if (!/^[0-9a-fA-F]{64}$/.test(digest)) {
        throw new UsageError("`--ws-token-sha256` must be 64 hexadecimal characters");
      }
      const bytes = Uint8Array.fromHex(digest.toLowerCase());
      auth = () => Promise.resolve({ mode: "capability-token", tokenSha256: bytes });
    } else {
      const token = readSecretFile("ws-token-file", file!);
      auth = async () => ({
        mode: "capability-token",
        tokenSha256: await (await import("../server/ws_auth.ts")).sha256(token),
      });
    }
  } else if (mode === "signed-bearer-token") {
    for (const f of ["ws-token-file", "ws-token-sha256"] as const) {
      if (v[f] !== undefined) {
        throw new UsageError(`\`--${f}\` requires \`--ws-auth capability-token\``);
      }
    }
    const file = v["ws-shared-secret-file"];
    if (file === undefined) {
      throw new UsageError(
        "`--ws-shared-secret-file` is required when `--ws-auth signed-bearer-token` is set",
      );
    }
    const secret = new TextEncoder().encode(readSecretFile("ws-shared-secret-file", file));
    if (secret.length < 32) {
      throw new UsageError("`--ws-shared-secret-file` must contain at least 32 bytes");
    }
    const skewText = v["ws-max-clock-skew-seconds"];
    if (skewText !== undefined && !/^\d+$/.test(skewText)) {
      throw new UsageError(`invalid value '${skewText}' for '--ws-max-clock-skew-seconds'`, 2);
    }
    const config: WebSocketAuth = {
      mode: "signed-bearer-token",
      secret,
      ...(v["ws-issuer"] !== undefined ? { issuer: v["ws-issuer"] } : {}),
      ...(v["ws-audience"] !== undefined ? { audience: v["ws-audience"] } : {}),
      maxClockSkewSeconds: skewText === undefined ? 30 : Number(skewText),
    };
    auth = () => Promise.resolve(config);
  } else {
    throw new UsageError(
      `invalid value '${mode}' for '--ws-auth <MODE>': expected capability-token or signed-bearer-token`,
      2,
    );
  }

  return auth;
}

/** Parses and validates `serve` arguments (and the environment). */
export function parseServeArgs(
  args: string[],
  env: Record<string, string | undefined> = Deno.env.toObject(),
): ServeConfig | "help" {
  const parsed = parseFlags({
    args,
    allowPositionals: false,
    strict: true,
    options: {
      listen: { type: "string" },
      "concurrent-requests": { type: "string" },
      "exit-on-stdin-close": { type: "boolean" },
      "log-level": { type: "string" },
      "process-retention": { type: "string" },
      "session-ttl": { type: "string" },
      "http-body-limit": { type: "string" },
      "ws-auth": { type: "string" },
      "ws-token-file": { type: "string" },
      "ws-token-sha256": { type: "string" },
      "ws-shared-secret-file": { type: "string" },
      "ws-issuer": { type: "string" },
      "ws-audience": { type: "string" },
      "ws-max-clock-skew-seconds": { type: "string" },
      "allow-unauthenticated": { type: "boolean" },
      "network-proxy": { type: "string" },
      "network-requirements": { type: "string" },
      remote: { type: "string" },
      "environment-id": { type: "string" },
      name: { type: "string" },
      "registration-bearer-stdin": { type: "boolean" },
      "linux-sandbox-pid-namespace": { type: "string" },
      "linux-sandbox-transparent-tcp": { type: "boolean" },
      "tcp-upstream-proxy": { type: "string" },
      "metrics-listen": { type: "string" },
    },
  });
  if (parsed === "help") return "help";
  const v = parsed.values;
  const listen = parseListen(v.listen ?? "ws://127.0.0.1:0");
  const envExit = env.CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE;
  const exitOnStdinClose = v["exit-on-stdin-close"] ??
    (envExit === undefined
      ? false
      : parseBoolEnv("CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE", envExit));

  const auth = parseAuthFlags(v, listen);

  const pidNamespace = v["linux-sandbox-pid-namespace"] ?? "isolate";
  if (pidNamespace !== "isolate" && pidNamespace !== "inherit") {
    throw new UsageError(
      `invalid value '${pidNamespace}' for '--linux-sandbox-pid-namespace <MODE>': expected isolate or inherit`,
      2,
    );
  }

  return {
    listen,
    sandboxPidNamespace: pidNamespace,
    sandboxTransparentTcp: v["linux-sandbox-transparent-tcp"] ?? false,
    tcpUpstreamProxy: v["tcp-upstream-proxy"] === undefined
      ? null
      : parseTcpUpstream(v["tcp-upstream-proxy"]),
    concurrency: v["concurrent-requests"] === undefined
      ? 32
      : parsePositiveInt("concurrent-requests <COUNT>", v["concurrent-requests"]),
    exitOnStdinClose,
    logLevel: logLevelFlag(v["log-level"], "info"),
    auth,
    allowUnauthenticated: v["allow-unauthenticated"] ?? false,
    processRetentionMs: parseDuration("process-retention", v["process-retention"] ?? "80"),
    sessionTtlMs: parseDuration("session-ttl", v["session-ttl"] ?? "80"),
    httpBodyLimitBytes: parseByteSize("http-body-limit", v["http-body-limit"] ?? "256M"),
    networkProxyConfig: v["network-proxy"] ?? null,
    networkRequirements: v["network-requirements"] ??
      null,
    metricsListen: metricsListenFlag(v["metrics-listen"]),
    remote: v.remote === undefined ? null : {
      url: v.remote,
      environmentId: environmentIdFlag(v["environment-id"], "--remote needs --environment-id"),
      name: v.name ?? null,
      bearerFromStdin: v["registration-bearer-stdin"] ?? false,
    },
  };
}

async function waitForStdinEof(): Promise<void> {
  try {
    for await (const _ of Deno.stdin.readable) { /* discard */ }
  } catch {
    // stdin closed or unreadable: treat as EOF.
  }
}

/**
 * `--tcp-upstream-proxy HOST:PORT` (a bracketed IPv6 literal or a name) as
 * an `http://` URL; the reference's reasons when it is not one.
 */
export function parseTcpUpstream(value: string): URL {
  const fail = (why: string): never => {
    throw new UsageError(
      `invalid value '${value}' for '--tcp-upstream-proxy <HOST:PORT>': ${why}`,
      2,
    );
  };
  const colon = value.lastIndexOf(":");
  if (colon === -1 || (value.startsWith("[") && colon < value.indexOf("]"))) fail("missing port");
  const host = value.slice(0, colon);
  const portText = value.slice(colon + 1);
  if (!/^\d+$/.test(portText) || Number(portText) > 65_535) fail("parse port as u16");
  if (Number(portText) === 0) fail("TCP upstream proxy port must be nonzero");
  let url: URL | null = null;
  try {
    url = new URL(`http://${host}:${portText}`);
  } catch { /* below */ }
  if (!url || host === "" || url.username || url.pathname !== "/" || url.search || url.hash) {
    fail("parse host from host-with-port");
  }
  return url!;
}

/** The egress proxy of `--network-proxy`, measured with the server when it is. */
async function startManagedProxy(
  config: ServeConfig,
  logger: Logger,
  metrics: ExecServerMetrics | null,
) {
  if (!config.networkProxyConfig) return null;
  // The proxy is loaded only by the servers that use it (a plain server's
  // idle memory and start-up are smaller without it).
  const requirements = config.networkRequirements
    ? await (await import("../proxy/config_file.ts")).loadNetworkRequirementsFile(
      config.networkRequirements,
    )
    : null;
  let proxyMetrics = null;
  if (metrics) {
    proxyMetrics = new (await import("../proxy/metrics.ts")).ProxyMetrics();
    metrics.set.include(proxyMetrics.set);
  }
  const proxy = await (await import("../proxy/start.ts")).startNetworkProxyFromFile(
    config.networkProxyConfig,
    {
      logger,
      metrics: proxyMetrics,
      ...(requirements ? { requirements } : {}),
      ...(config.tcpUpstreamProxy ? { tcpUpstream: config.tcpUpstreamProxy } : {}),
    },
  );
  logger.info("server.network_proxy", {
    http: proxy.addresses.http,
    socks: proxy.addresses.socks,
  });
  return proxy;
}

/** Runs the server until its input ends (stdio) or a termination signal. */
export async function runServe(config: ServeConfig): Promise<number> {
  if (config.networkRequirements && !config.networkProxyConfig) {
    throw new UsageError("--network-requirements needs --network-proxy", 2);
  }
  // Codex's configuration is parsed, and the telemetry SDKs loaded, only
  // when it (or a variable) asks for an OTLP push.
  const otlp = await requestedOtlp();
  // Closed last (declared first): the OTLP readers push what is left then.
  await using tracing = otlp?.traces || otlp?.logs
    ? await (await import("../telemetry/tracing.ts")).startTracing({
      ...otlp,
      spanName: (await import("../telemetry/exec_metrics.ts")).methodLabel,
      // Pushes start seconds after the logger below exists.
      onExportError: (error, spans) =>
        logger.warn("telemetry.export_failed", { signal: "traces", spans, error }),
    })
    : null;
  // Spans per request: pushed as Codex configures it, else with
  // OTEL_DENO=true through Deno's exporter, log lines then going through
  // console (which Deno exports), each continuing the caller's trace context.
  const tracer = tracing?.requestTracer ?? await otelRequestTracer({ version: VERSION });
  const logger = createLogger({
    level: config.logLevel,
    ...(tracer && !tracing?.requestTracer ? { write: consoleWrite } : {}),
  });
  const measured = await startCommandMetrics(
    config.metricsListen,
    async () => new (await import("../telemetry/exec_metrics.ts")).ExecServerMetrics(),
    { logger, settings: otlp },
  );
  await using _metrics = measured?.telemetry;
  const metrics = measured?.metrics ?? null;
  const proxy = await startManagedProxy(config, logger, metrics);
  const server = new ExecServer({
    ...(proxy ? { managedNetwork: proxy } : {}),
    metrics,
    execTelemetry: tracing?.exec ?? null,
    concurrency: config.concurrency,
    processRetentionMs: config.processRetentionMs,
    sandboxPidNamespace: config.sandboxPidNamespace,
    sandboxTransparentTcp: config.sandboxTransparentTcp,
    ...(config.tcpUpstreamProxy ? { tcpUpstreamProxy: config.tcpUpstreamProxy } : {}),
    sessionTtlMs: config.sessionTtlMs,
    httpBodyLimitBytes: config.httpBodyLimitBytes,
    logger,
    tracer,
  });
  const stop = Promise.withResolvers<string>();
  const removeSignals = onTerminationSignal((signal) => stop.resolve(signal));
  try {
    if (config.remote) {
      const bearer = await registrationBearer(config.remote.bearerFromStdin);
      const { RemoteExecutor } = await import("../relay/executor/executor.ts");
      const executor = await RemoteExecutor.start({
        registry: { url: config.remote.url, bearer },
        environmentId: config.remote.environmentId,
        server,
        logger,
        metrics,
        tracing: tracing?.remote ?? null,
      });
      logger.info("server.remote", {
        environment: config.remote.environmentId,
        name: config.remote.name,
        registration: executor.registration.executorRegistrationId,
      });
      announce(
        `exec-server ${VERSION} serving environment ${config.remote.environmentId} through ${config.remote.url} (Ctrl-C to stop)`,
      );
      const why = await stop.promise;
      logger.info("server.stopping", { reason: why });
      await executor.close();
    } else if (config.listen.kind === "stdio") {
      announce(`exec-server ${VERSION} serving JSON-RPC on stdio (end input or Ctrl-C to stop)`);
      const ended = serveStdio(server).then((info) => `stdio ${info.reason}`);
      const why = await Promise.race([ended, stop.promise]);
      logger.info("server.stopping", { reason: why });
    } else {
      // A stdio server never evaluates the WebSocket listener.
      const { listenWebSocket } = await import("../server/listen_ws.ts");
      const listener = listenWebSocket(server, {
        hostname: config.listen.hostname,
        port: config.listen.port,
        auth: await config.auth(),
        allowUnauthenticated: config.allowUnauthenticated,
      });
      await printLine(listener.url);
      logger.info("server.listening", { url: listener.url });
      announce(`exec-server ${VERSION} listening on ${listener.url} (Ctrl-C to stop)`);
      const waits: Promise<string>[] = [stop.promise];
      if (config.exitOnStdinClose) waits.push(waitForStdinEof().then(() => "stdin closed"));
      const why = await Promise.race(waits);
      logger.info("server.stopping", { reason: why });
      await listener.close();
    }
  } finally {
    removeSignals();
    await server.close();
    await proxy?.shutdown();
  }
  return 0;
}
