/**
 * `exec-server mcp-bridge`: run an MCP stdio server (here or on an
 * exec-server) and expose it on stdio or Streamable HTTP.
 *
 * @module
 */

import type { ExecServerClient } from "../client/client.ts";
import { serveMcpBridgeHttp, serveMcpBridgeStdio } from "../mcp/bridge_server.ts";
import type { McpEnvVar, McpServerSpec } from "../mcp/server_spec.ts";
import { connectFromFlags, CONNECTION_FLAGS } from "./client_args.ts";
import { McpSessionMetrics } from "../mcp/session_metrics.ts";
import { startCommandMetrics } from "../telemetry/command.ts";
import {
  commandLogger,
  metricsListenFlag,
  parseCommand,
  parseDuration,
  parsePositiveInt,
  terminationSignal,
  UsageError,
} from "./common.ts";

/** Help text. */
export const MCP_BRIDGE_USAGE =
  `Usage: exec-server mcp-bridge [OPTIONS] -- MCP_SERVER_COMMAND [ARGS...]

Starts an MCP stdio server — on this machine, or inside an environment
through an exec-server — and exposes it to MCP clients on stdio, or with
--http as Streamable HTTP where every MCP session gets its own server process.

Where the server runs (default: here):
  --url <ws://HOST:PORT>       on a WebSocket exec-server
  --token-file <PATH>          bearer token for --url or --remote
  --remote <URL> --environment-id <ID>
                               in an environment behind a registry + relay (end-to-end
                               encrypted; the harness token comes from --token-file)
  --stdio <"CMD ARGS">         on an exec-server spawned with this command

Server:
  --name <NAME>                server name for logs and process ids
                               ([a-zA-Z0-9_-]+, default: mcp)
  --cwd <DIR>                  working directory (absolute; required remotely)
  --env <K=V>                  set a variable (repeatable)
  --env-var <NAME>             copy a variable from this environment (repeatable)
  --remote-env-var <NAME>      take a variable from the exec-server's environment (repeatable)

Serving:
  --http <PORT>                Streamable HTTP on http://HOST:PORT/mcp instead of stdio
  --host <HOST>                interface for --http (default 127.0.0.1)
  --idle-timeout <DURATION>    close an idle HTTP session and its server (default 10m)
  --max-sessions <N>           HTTP sessions (each its own server process) open at once; more
                               get 503 with Retry-After (default 16)
  --metrics-listen <[HOST:]PORT>
                               with --http: serve GET /metrics (Prometheus text format) on its own
                               listener (loopback for a bare port): sessions open, refused, closed
  --log-level <LEVEL>          diagnostics on stderr (default warn)

Examples:
  exec-server mcp-bridge -- npx -y @modelcontextprotocol/server-everything
  exec-server mcp-bridge --url ws://10.0.0.5:7000 --cwd /work --http 8765 -- \\
    npx -y @modelcontextprotocol/server-filesystem /work
`;

/** Runs `mcp-bridge`; returns the exit status. */
export async function runMcpBridge(args: string[]): Promise<number> {
  const parsed = parseCommand({
    args,
    allowPositionals: true,
    options: {
      ...CONNECTION_FLAGS,
      name: { type: "string" },
      cwd: { type: "string" },
      env: { type: "string", multiple: true },
      "env-var": { type: "string", multiple: true },
      "remote-env-var": { type: "string", multiple: true },
      http: { type: "string" },
      host: { type: "string" },
      "idle-timeout": { type: "string" },
      "max-sessions": { type: "string" },
      "metrics-listen": { type: "string" },
    },
  }, MCP_BRIDGE_USAGE);
  if (!parsed) return 0;
  const flags = parsed.values;
  const [command, ...commandArgs] = parsed.positionals;
  if (command === undefined) throw new UsageError("missing the MCP server command after --", 2);
  const env: Record<string, string> = {};
  for (const pair of flags.env ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--env expects K=V, got ${pair}`, 2);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const envVars: McpEnvVar[] = [
    ...(flags["env-var"] ?? []).map((name) => ({ name })),
    ...(flags["remote-env-var"] ?? []).map((name) => ({ name, source: "remote" as const })),
  ];
  const spec: McpServerSpec = {
    name: flags.name ?? "mcp",
    command,
    args: commandArgs,
    env,
    envVars,
    ...(flags.cwd !== undefined ? { cwd: flags.cwd } : {}),
  };
  const logger = commandLogger(flags["log-level"], "warn");
  const metricsListen = metricsListenFlag(flags["metrics-listen"]);
  if (metricsListen && flags.http === undefined) {
    throw new UsageError("--metrics-listen needs --http (a stdio bridge has one session)", 2);
  }
  const remote = flags.url !== undefined || flags.stdio !== undefined || flags.remote !== undefined;
  let client: ExecServerClient | undefined;
  if (remote) client = await connectFromFlags(flags);
  try {
    const where = { ...(client ? { client } : {}), logger };
    if (flags.http === undefined) {
      await serveMcpBridgeStdio(spec, where);
      return 0;
    }
    const measured = await startCommandMetrics(metricsListen, () => new McpSessionMetrics(), {
      serviceName: "exec-server-mcp-bridge",
      logger,
    });
    await using _telemetry = measured?.telemetry;
    const http = await serveMcpBridgeHttp(spec, {
      ...where,
      metrics: measured?.metrics ?? null,
      port: flags.http === "0" ? 0 : parsePositiveInt("http", flags.http),
      ...(flags.host !== undefined ? { hostname: flags.host } : {}),
      ...(flags["idle-timeout"] !== undefined
        ? { idleTimeoutMs: parseDuration("idle-timeout", flags["idle-timeout"]) }
        : {}),
      ...(flags["max-sessions"] !== undefined
        ? { maxSessions: parsePositiveInt("max-sessions", flags["max-sessions"]) }
        : {}),
    });
    // Listen for the signal before saying we are up (a prompt SIGTERM exits 0).
    const signalled = terminationSignal();
    console.error(`mcp-bridge listening on ${http.url}`);
    await signalled;
    await http.close();
    return 0;
  } finally {
    await client?.close();
  }
}
