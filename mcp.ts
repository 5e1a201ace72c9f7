/**
 * MCP integration: an exec-server environment as MCP tools, and MCP stdio
 * servers launched here or inside an environment, bridged to MCP clients.
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
