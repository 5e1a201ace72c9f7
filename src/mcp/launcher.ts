/**
 * Starts an MCP stdio server — here, or through an exec-server when a
 * client is given — and returns its SDK `Transport`.
 *
 * @module
 */

import type { ExecServerClient } from "../client/client.ts";
import type { Logger } from "../log/logger.ts";
import { spawnLocalMcpChild } from "./local_child.ts";
import { spawnRemoteMcpChild } from "./remote_child.ts";
import type { McpTransport } from "./transport.ts";
import { type McpServerSpec, validateMcpServerName } from "./server_spec.ts";
import { childMcpTransport } from "./stdio_transport.ts";

/** Options of {@linkcode launchMcpServer}. */
export interface LaunchMcpOptions {
  /** Run through this exec-server instead of locally. */
  readonly client?: ExecServerClient;
  /** Working directory when the spec has none. */
  readonly fallbackCwd?: string;
  /** Where the server's stderr and transport diagnostics go. */
  readonly logger?: Logger;
  /** Longest MCP message line from the server (default 8 MiB). */
  readonly maxLineBytes?: number;
}

/** Validates the name, starts the server, and wraps it as a transport. */
export async function launchMcpServer(
  spec: McpServerSpec,
  options: LaunchMcpOptions = {},
): Promise<McpTransport> {
  validateMcpServerName(spec.name);
  const where = options.fallbackCwd !== undefined ? { fallbackCwd: options.fallbackCwd } : {};
  const child = options.client
    ? await spawnRemoteMcpChild(options.client, spec, where)
    : spawnLocalMcpChild(spec, where);
  return await childMcpTransport(child, {
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.maxLineBytes !== undefined ? { maxLineBytes: options.maxLineBytes } : {}),
  });
}
