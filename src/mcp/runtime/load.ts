/**
 * MCP server configurations from Codex's configuration files: the layers
 * that apply to a directory, merged, with `-c key=value` overrides, then
 * `mcp_servers` parsed strictly.
 *
 * @module
 */

import { defaultConfigLocations } from "../../codex_config/layers.ts";
import { loadEffectiveConfig } from "../../codex_config/effective.ts";
import {
  type McpOAuthSettings,
  type McpServerConfig,
  parseMcpOAuthSettings,
  parseMcpServers,
} from "./config.ts";

/** Options of {@linkcode loadMcpServerConfigs}. */
export interface LoadMcpServersOptions {
  /** Codex home (default `$CODEX_HOME`, else `~/.codex`). */
  readonly codexHome?: string;
  /** Directory project layers are looked up from (default: this process's cwd). */
  readonly cwd?: string;
  /** `-c key=value` overrides, in order. */
  readonly overrides?: readonly string[];
  /** The system configuration directory (default `/etc/codex`). */
  readonly systemDir?: string;
}

/** What the MCP runtime reads of a configuration. */
export interface McpRuntimeConfig {
  /** Every `[mcp_servers.NAME]`, in order (a server that does not parse has its `problem`). */
  readonly servers: McpServerConfig[];
  /** The `mcp_oauth_*` settings. */
  readonly oauth: McpOAuthSettings;
}

/** Every `[mcp_servers.NAME]` of the effective configuration. */
export async function loadMcpServerConfigs(
  options: LoadMcpServersOptions = {},
): Promise<McpServerConfig[]> {
  return (await loadMcpRuntimeConfig(options)).servers;
}

/** The servers and the OAuth settings of the effective configuration. */
export async function loadMcpRuntimeConfig(
  options: LoadMcpServersOptions = {},
): Promise<McpRuntimeConfig> {
  const defaults = defaultConfigLocations();
  const config = await loadEffectiveConfig({
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.overrides ? { overrides: options.overrides } : {}),
    locations: {
      ...defaults,
      ...(options.codexHome !== undefined ? { codexHome: options.codexHome } : {}),
      ...(options.systemDir !== undefined ? { systemDir: options.systemDir } : {}),
    },
  });
  return { servers: parseMcpServers(config), oauth: parseMcpOAuthSettings(config) };
}
