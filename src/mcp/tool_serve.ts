/**
 * Serving the exec tool server: on stdio, or over Streamable HTTP with a
 * tool server (and its command sessions) per MCP session.
 *
 * @module
 */

import type { ExecServerClient } from "../client/client.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import { type McpHttpServer, serveMcpHttp } from "./http_sessions.ts";
import { stdioMcpTransport } from "./stdio_transport.ts";
import { createExecToolServer, type ExecToolServerOptions } from "./tool_server.ts";

/** Serves the tools on `input`/`output` (default: this process's stdio) until the client goes. */
export async function serveExecToolsStdio(
  client: ExecServerClient,
  options: ExecToolServerOptions & {
    logger?: Logger;
    input?: ReadableStream<Uint8Array>;
    output?: WritableStream<Uint8Array>;
  } = {},
): Promise<void> {
  const tools = await createExecToolServer(client, options);
  const transport = await stdioMcpTransport({
    label: "stdio client",
    input: options.input ?? Deno.stdin.readable,
    output: options.output ?? Deno.stdout.writable,
    keepOutputOpen: options.output === undefined,
    logger: options.logger ?? nullLogger,
  });
  await tools.connect(transport);
  await tools.closed;
  await tools.close();
}

/** Serves the tools over Streamable HTTP, one tool server per MCP session. */
export async function serveExecToolsHttp(
  client: ExecServerClient,
  options: ExecToolServerOptions & {
    port: number;
    hostname?: string;
    idleTimeoutMs?: number;
    logger?: Logger;
  },
): Promise<McpHttpServer> {
  return await serveMcpHttp({
    port: options.port,
    ...(options.hostname !== undefined ? { hostname: options.hostname } : {}),
    ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMs: options.idleTimeoutMs } : {}),
    logger: options.logger ?? nullLogger,
    openSession: async (transport) => {
      const tools = await createExecToolServer(client, options);
      await tools.connect(transport);
      // Idle means no request in flight: a session left running by a client
      // that went away is terminated with its MCP session.
      return {
        closed: tools.closed,
        close: () => tools.close(),
      };
    },
  });
}
