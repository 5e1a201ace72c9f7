/**
 * How to start one MCP stdio server, and the server-name rule.
 *
 * @module
 */

/** A variable taken from a host environment by name. */
export interface McpEnvVar {
  /** Variable name. */
  readonly name: string;
  /**
   * `local` (default): read here and sent along. `remote`: taken from the
   * exec-server's own environment (remote launches only).
   */
  readonly source?: "local" | "remote";
}

/** An MCP server started as a child speaking MCP on its stdio. */
export interface McpServerSpec {
  /** Name (`^[a-zA-Z0-9_-]+$`), used in logs and process ids. */
  readonly name: string;
  /** Program. */
  readonly command: string;
  /** Arguments. */
  readonly args?: readonly string[];
  /** Working directory (absolute; required for remote launches without a fallback). */
  readonly cwd?: string;
  /** Literal variables; they win over everything else. */
  readonly env?: Readonly<Record<string, string>>;
  /** Variables copied by name (see {@linkcode McpEnvVar}). */
  readonly envVars?: ReadonlyArray<string | McpEnvVar>;
}

/** The runtime server-name pattern. */
export const MCP_SERVER_NAME = /^[a-zA-Z0-9_-]+$/;

/** Throws unless `name` matches {@linkcode MCP_SERVER_NAME}, with the reference's text. */
export function validateMcpServerName(name: string): void {
  if (!MCP_SERVER_NAME.test(name)) {
    throw new Error(`Invalid MCP server name '${name}': must match pattern ^[a-zA-Z0-9_-]+$`);
  }
}
