/**
 * MCP integration: the MCP runtime a harness needs around its MCP servers
 * (Codex's `mcp_servers` configuration, placement here or inside any
 * environment, stdio and Streamable HTTP, concurrent starts, a tool cache,
 * `mcp__SERVER__TOOL` names, the connector-metadata trust boundary); an
 * exec-server environment as MCP tools; and MCP stdio servers launched here
 * or inside an environment, bridged to MCP clients.
 *
 * @example Run the MCP servers of a Codex configuration
 * ```ts ignore
 * import { loadMcpServerConfigs, McpConnectionManager } from "jsr:@org/exec-server/mcp";
 *
 * await using manager = McpConnectionManager.start({
 *   servers: await loadMcpServerConfigs(),
 *   environments: { box: { url: "ws://10.0.0.5:7000" } },
 *   codexHome: `${Deno.env.get("HOME")}/.codex`,
 * });
 * await manager.startupComplete;
 * for (const tool of manager.listTools()) console.log(tool.qualifiedName);
 * ```
 *
 * @example Log in to an OAuth server once; the runtime then uses and refreshes its tokens
 * ```ts ignore
 * import {
 *   credentialStoreFor,
 *   loadMcpRuntimeConfig,
 *   loginMcpServer,
 *   McpConnectionManager,
 * } from "jsr:@org/exec-server/mcp";
 *
 * const codexHome = `${Deno.env.get("HOME")}/.codex`;
 * const { servers, oauth } = await loadMcpRuntimeConfig({ codexHome });
 * const store = credentialStoreFor(codexHome, oauth);
 * await loginMcpServer({
 *   server: servers.find((s) => s.name === "linear")!,
 *   settings: oauth,
 *   store,
 *   openUrl: (url) => console.log(`Open ${url} to sign in`),
 * });
 * await using manager = McpConnectionManager.start({ servers, codexHome, oauth: { settings: oauth } });
 * await manager.startupComplete;
 * ```
 *
 * @example Model-visible tool names
 * ```ts
 * import { qualifyToolNames } from "jsr:@org/exec-server/mcp";
 *
 * const [tool] = qualifyToolNames([{ server: "my-files", tool: "read.file" }]);
 * console.log(tool!.qualifiedName); // mcp__my_files__read_file
 * ```
 *
 * @example Serve an environment's tools over MCP stdio
 * ```ts ignore
 * import { connect } from "jsr:@org/exec-server/client";
 * import { serveExecToolsStdio } from "jsr:@org/exec-server/mcp";
 *
 * const client = await connect({ url: "ws://127.0.0.1:4500" });
 * await serveExecToolsStdio(client);
 * ```
 *
 * @module
 */

export type { McpMessage, McpTransport } from "./src/mcp/transport.ts";
export { type LaunchMcpOptions, launchMcpServer } from "./src/mcp/launcher.ts";
export {
  MCP_SERVER_NAME,
  type McpEnvVar,
  type McpServerSpec,
  validateMcpServerName,
} from "./src/mcp/server_spec.ts";
export {
  type McpBridgeHttpOptions,
  type McpBridgeOptions,
  serveMcpBridgeHttp,
  serveMcpBridgeStdio,
} from "./src/mcp/bridge_server.ts";
export type { McpHttpServer } from "./src/mcp/http_sessions.ts";
export {
  createExecToolServer,
  type ExecToolServer,
  type ExecToolServerOptions,
} from "./src/mcp/tool_server.ts";
export { serveExecToolsHttp, serveExecToolsStdio } from "./src/mcp/tool_serve.ts";
export {
  type ExecReport,
  ExecSessions,
  type ExecStart,
  type ExecToolLimits,
} from "./src/mcp/tools/exec_sessions.ts";
export {
  DEFAULT_STARTUP_TIMEOUT_MS,
  DEFAULT_TOOL_TIMEOUT_MS,
  LOCAL_ENVIRONMENT_ID,
  McpConfigError,
  type McpCredentialsStoreMode,
  type McpOAuthSettings,
  type McpServerConfig,
  type McpServerOAuthConfig,
  type McpTransportConfig,
  parseMcpOAuthSettings,
  parseMcpServerConfig,
  parseMcpServers,
  toolAllowed,
} from "./src/mcp/runtime/config.ts";
export {
  loadMcpRuntimeConfig,
  loadMcpServerConfigs,
  type LoadMcpServersOptions,
  type McpRuntimeConfig,
} from "./src/mcp/runtime/load.ts";
export {
  McpCredentialsFileError,
  mcpCredentialsKey,
  McpCredentialStore,
  type StoredMcpCredentials,
} from "./src/mcp/oauth/store.ts";
export {
  loginCommand,
  type McpClientRegistration,
  McpLoginRequiredError,
  REFRESH_MARGIN_MS,
} from "./src/mcp/oauth/provider.ts";
export {
  credentialStoreFor,
  DEFAULT_LOGIN_TIMEOUT_MS,
  type McpAuthorizationRequest,
  type McpAuthState,
  type McpOAuthOptions,
} from "./src/mcp/oauth/session.ts";
export { loginMcpServer, logoutMcpServer, type McpLoginOptions } from "./src/mcp/oauth/login.ts";
export {
  type McpAuthStatus,
  mcpAuthStatus,
  type McpAuthStatusOptions,
} from "./src/mcp/oauth/status.ts";
export {
  OAuthAuthorizationDenied,
  oauthCallbackId,
  OAuthCallbackListener,
  type OAuthCallbackOptions,
} from "./src/mcp/oauth/callback.ts";
export {
  type McpEnvironmentTarget,
  type McpPlacement,
  type McpRuntimeContext,
  resolvePlacement,
} from "./src/mcp/runtime/placement.ts";
export {
  McpConnectionManager,
  type McpManagerOptions,
  type McpServerState,
  type McpServerStatus,
  type McpStartupSummary,
  type McpStatusEvent,
  type McpToolInfo,
} from "./src/mcp/runtime/manager.ts";
export {
  type JsonObject,
  type McpClientInfo,
  type McpHarnessCallbacks,
  type McpServerRequest,
  McpTimeoutError,
} from "./src/mcp/runtime/server_connection.ts";
export {
  MAX_TOOL_NAME_LENGTH,
  type QualifiedToolName,
  qualifyToolNames,
  type RawToolName,
  sanitizeToolName,
} from "./src/mcp/runtime/tool_names.ts";
export {
  CONNECTOR_META_KEYS,
  isConnectorMetaKey,
  stripConnectorMeta,
  TRUSTED_CONNECTOR_SERVER,
} from "./src/mcp/runtime/connector_meta.ts";
export { ToolCache, type ToolSnapshot } from "./src/mcp/runtime/tool_cache.ts";
export type { TomlTable, TomlValue } from "./src/codex_config/toml_write.ts";
export {
  McpRuntimeMetrics,
  type StartupResult,
  type ToolCallResult,
} from "./src/mcp/runtime/metrics.ts";
export { McpSessionMetrics, type SessionCloseReason } from "./src/mcp/session_metrics.ts";
