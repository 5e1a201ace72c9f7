/**
 * `mcp-bridge`: exposes one MCP stdio server (started here or through an
 * exec-server) to MCP clients — on this process's stdio, or over Streamable
 * HTTP with a separate server process per session.
 *
 * @module
 */

import type { McpSessionMetrics } from "./session_metrics.ts";
import type { ExecServerClient } from "../client/client.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import { bridgeMcp } from "./bridge.ts";
import { type McpHttpServer, serveMcpHttp } from "./http_sessions.ts";
import { launchMcpServer } from "./launcher.ts";
import { type McpServerSpec, validateMcpServerName } from "./server_spec.ts";
import { stdioMcpTransport } from "./stdio_transport.ts";

/** Where and how the bridged server runs. */
export interface McpBridgeOptions {
  /** Run the server through this exec-server (default: here). */
  readonly client?: ExecServerClient;
  /** Working directory when the spec has none. */
  readonly fallbackCwd?: string;
  /** Diagnostics (never on stdout). */
  readonly logger?: Logger;
}

/** Options of {@linkcode serveMcpBridgeHttp}. */
export interface McpBridgeHttpOptions extends McpBridgeOptions {
  /** Interface. Default `127.0.0.1`. */
  readonly hostname?: string;
  /** Port (`0`: any free one). */
  readonly port: number;
  /** Close a session (and its server) idle this long. Default 600 000 ms. */
  readonly idleTimeoutMs?: number;
  /** Sessions (each its own server process) open at once; more get 503. Default 16. */
  readonly maxSessions?: number;
  /** Where sessions opened, refused at the cap, failed and closed are counted. */
  readonly metrics?: McpSessionMetrics | null;
}

function launchOptions(options: McpBridgeOptions) {
  return {
    ...(options.client ? { client: options.client } : {}),
    ...(options.fallbackCwd !== undefined ? { fallbackCwd: options.fallbackCwd } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  };
}

/**
 * Bridges `spec` to MCP over `input`/`output` (default: this process's
 * stdio); resolves when either side has gone.
 */
export async function serveMcpBridgeStdio(
  spec: McpServerSpec,
  options: McpBridgeOptions & {
    input?: ReadableStream<Uint8Array>;
    output?: WritableStream<Uint8Array>;
  } = {},
): Promise<void> {
  const logger = options.logger ?? nullLogger;
  const back = await launchMcpServer(spec, launchOptions(options));
  const front = await stdioMcpTransport({
    label: "stdio client",
    input: options.input ?? Deno.stdin.readable,
    output: options.output ?? Deno.stdout.writable,
    keepOutputOpen: options.output === undefined,
    logger,
  });
  const bridge = await bridgeMcp(front, back, { label: spec.name, logger });
  await bridge.closed;
}

/** Serves `spec` over Streamable HTTP, one server process per session. */
export async function serveMcpBridgeHttp(
  spec: McpServerSpec,
  options: McpBridgeHttpOptions,
): Promise<McpHttpServer> {
  validateMcpServerName(spec.name);
  const logger = options.logger ?? nullLogger;
  return await serveMcpHttp({
    port: options.port,
    ...(options.hostname !== undefined ? { hostname: options.hostname } : {}),
    ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMs: options.idleTimeoutMs } : {}),
    ...(options.maxSessions !== undefined ? { maxSessions: options.maxSessions } : {}),
    metrics: options.metrics ?? null,
    logger,
    openSession: async (transport) => {
      const back = await launchMcpServer(spec, launchOptions(options));
      const bridge = await bridgeMcp(transport, back, { label: spec.name, logger });
      return { busy: () => bridge.openRequests > 0, closed: bridge.closed, close: bridge.close };
    },
  });
}
