/**
 * exec-server: execution and integration sidecar servers for coding agents.
 *
 * A harness drives an execution environment over JSON-RPC 2.0 (stdio or
 * WebSocket), wire-compatible with the Codex exec-server protocol: start
 * processes and stream their output, write stdin, signal and kill process
 * trees, read and write files, make HTTP requests from inside the
 * environment.
 *
 * Serve over stdio:
 *
 * ```ts ignore
 * import { ExecServer, serveStdio } from "jsr:@org/exec-server";
 *
 * await using server = new ExecServer();
 * await serveStdio(server);
 * ```
 *
 * Serve over WebSocket:
 *
 * ```ts ignore
 * import { ExecServer, listenWebSocket } from "jsr:@org/exec-server";
 *
 * const server = new ExecServer();
 * const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
 * console.log(listener.url);
 * ```
 *
 * Run as a program, this module is the `exec-server` command line:
 * `deno run -A jsr:@org/exec-server serve --listen stdio` (JSR's default
 * entry), `deno install -g -A -n exec-server jsr:@org/exec-server`.
 *
 * @module
 */

export { VERSION } from "./src/version.ts";

// Server
export {
  ExecServer,
  type ExecServerOptions,
  type ResolvedExecServerOptions,
} from "./src/server/exec_server.ts";
export { serveStdio, type StdioServeOptions } from "./src/server/listen_stdio.ts";
export {
  listenWebSocket,
  type WebSocketListener,
  type WebSocketListenOptions,
} from "./src/server/listen_ws.ts";
export {
  type CapabilityTokenAuth,
  type NoAuth,
  type SignedBearerTokenAuth,
  signJwt,
  type WebSocketAuth,
} from "./src/server/ws_auth.ts";
export type { DisconnectPolicy } from "./src/server/connection.ts";

// Client
export {
  connect,
  connectLazy,
  type ConnectOptions,
  ExecServerClient,
  type ReconnectOptions,
  type SpawnOptions,
} from "./src/client/client.ts";
export { RemoteProcess, type RemoteProcessEvent, type RemoteStatus } from "./src/client/process.ts";
export {
  RemoteCommand,
  type RemoteCommandOptions,
  type RemoteCommandOutput,
} from "./src/client/command.ts";
export {
  asDenoError,
  isRemoteFailure,
  RemoteAlreadyExists,
  type RemoteDirEntry,
  type RemoteFile,
  type RemoteFileInfo,
  RemoteFs,
  type RemoteFsFailure,
  RemoteIsADirectory,
  RemoteNotADirectory,
  RemoteNotFound,
  type RemotePath,
  RemotePermissionDenied,
} from "./src/client/fs.ts";
export type { CommandTarget, OpenedTransport, StopTimings } from "./src/client/transports.ts";
export { type InProcessServer, inProcessTransport } from "./src/client/in_process.ts";
export { codexSandbox, type SandboxMode } from "./src/client/sandbox_presets.ts";

// Egress proxy
export {
  NetworkProxy,
  type NetworkProxyAddresses,
  type NetworkProxyOptions,
} from "./src/proxy/network_proxy.ts";
export { type ProxyFileOptions, startNetworkProxyFromFile } from "./src/proxy/start.ts";
export {
  defaultNetworkProxyConfig,
  type InjectHeaderConfig,
  type MitmHookConfig,
  NetworkConfigError,
  type NetworkMode,
  type NetworkProxyConfig,
  parseNetworkProxyConfig,
  type Socks5AuthConfig,
} from "./src/proxy/config.ts";
export {
  fileConfigSource,
  loadNetworkProxyConfigFile,
  loadNetworkRequirementsFile,
  parseNetworkProxyConfigText,
  requiredConfigSource,
} from "./src/proxy/config_file.ts";
export {
  applyNetworkRequirements,
  type ManagedNetworkConfig,
  NetworkConstraintError,
  type NetworkProxyConstraints,
  type NetworkRequirements,
  parseNetworkRequirements,
  patternCovers,
  validatePolicyAgainstConstraints,
} from "./src/proxy/constraints.ts";
export {
  ask,
  type AuditMetadata,
  type BlockedRequest,
  type BlockReason,
  type DecisionSource,
  deny,
  type NetworkDecider,
  type NetworkDecision,
  type NetworkPolicyRequest,
  type PolicyDecisionEvent,
  type PolicyDecisionInput,
  type PolicyProtocol,
} from "./src/proxy/decision.ts";
export {
  type ConfigSource,
  NetworkProxyState,
  type NetworkProxyStateOptions,
} from "./src/proxy/state.ts";
export type { ConfigState, HostResolver } from "./src/proxy/policy.ts";
export type { DomainMatcher } from "./src/proxy/domain_pattern.ts";
export type { HookActions, HookOutcome, HookRequest, MitmHooks } from "./src/proxy/mitm_hooks.ts";
export {
  applyProxyEnv,
  CUSTOM_CA_ENV_KEYS,
  type ManagedNetworkContext,
  PROXY_ENV_KEYS,
  type ProxyEnvTarget,
  stripManagedProxyEnv,
} from "./src/proxy/env.ts";
export { createMitm, type Mitm, type MitmOptions } from "./src/proxy/mitm/interceptor.ts";
export type { ListenerContext, TunnelInterceptor } from "./src/proxy/http_proxy.ts";
export type { UpstreamProxies } from "./src/proxy/connector.ts";
export { type PooledConnection, UpstreamPool } from "./src/proxy/upstream_pool.ts";
export { ByteSource, type ChunkReader, connReader } from "./src/util/http1_body.ts";
export type { MessageHead } from "./src/util/http1.ts";
export type { ManagedNetworkEnv } from "./src/server/server_state.ts";

// Encrypted remote mode (Noise hybrid IK through a registry + rendezvous relay)
export {
  RendezvousError,
  type RendezvousProvider,
  rendezvousTransport,
} from "./src/relay/harness.ts";
export { RemoteExecutor, type RemoteExecutorOptions } from "./src/relay/executor.ts";
export {
  type RelayServer,
  type RelayServerOptions,
  startRelayServer,
} from "./src/relay/server/relay_server.ts";
export {
  type AuthorizationRecord,
  type RegistrationRecord,
  RelayStore,
  type SocketRecord,
  type TokenRecord,
  type TokenRole,
} from "./src/relay/server/store.ts";
export {
  type ConnectBundle,
  type Registration,
  type RegistryEndpoint,
  RegistryError,
  type ValidationResult,
} from "./src/relay/registry_client.ts";
export {
  decodePublicKey,
  encodePublicKey,
  generateIdentity,
  NOISE_PROTOCOL_NAME,
  NOISE_SUITE,
  type NoiseIdentity,
  type NoisePublicKey,
  SECURITY_PROFILE,
} from "./src/noise/hybrid_ik.ts";
export type { LocalKey, RemoteKey } from "./src/noise/handshake.ts";
export { type DhKeyPair, type KemKeyPair, loadNoiseCrypto } from "./src/noise/primitives.ts";
export {
  bridgeConnections,
  forwardingServer,
  type ForwardOptions,
  type StreamServer,
} from "./src/relay/forward.ts";

// MCP
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

// Sidecars
export {
  DEFAULT_RESPONSES_UPSTREAM,
  type ResponsesProxy,
  type ResponsesProxyOptions,
  startResponsesProxy,
} from "./src/sidecars/responses_proxy.ts";
export {
  API_KEY_ERRORS,
  ApiKeyError,
  type KeySource,
  readApiKeyHeader,
} from "./src/sidecars/api_key.ts";
export {
  relayStdioToUnixSocket,
  StdioRelayError,
  type StdioRelayOptions,
} from "./src/sidecars/stdio_to_uds.ts";

// JSON-RPC core
export type { CloseInfo, Connection } from "./src/jsonrpc/connection.ts";
export { ndjsonConnection, type NdjsonOptions } from "./src/jsonrpc/ndjson.ts";
export {
  webSocketConnection,
  type WebSocketConnectionOptions,
} from "./src/jsonrpc/websocket/adapter.ts";
export {
  connectWebSocket,
  type ConnectWebSocketOptions,
  WebSocketHandshakeError,
  type WebSocketLimits,
} from "./src/jsonrpc/websocket/handshake.ts";
export {
  type WebSocketChannel,
  type WebSocketChannelOptions,
  type WebSocketCloseInfo,
  type WebSocketMessage,
} from "./src/jsonrpc/websocket/channel.ts";
export {
  type CallOptions,
  type NotificationHandler,
  type RequestContext,
  type RequestHandler,
  RpcPeer,
  type RpcPeerOptions,
} from "./src/jsonrpc/peer.ts";
export { ConnectionClosedError, JsonRpcCode, RpcError } from "./src/jsonrpc/errors.ts";
export type {
  IncomingMessage,
  JsonRpcErrorObject,
  JsonRpcFailure,
  JsonRpcMessage,
  JsonRpcNotification,
  JsonRpcRequest,
  JsonRpcSuccess,
  MalformedMessage,
  RequestId,
  TraceContext,
} from "./src/jsonrpc/message.ts";
export type { StrictJsonLimits } from "./src/jsonrpc/strict_json.ts";
export type { Framing } from "./src/jsonrpc/output_sink.ts";

// Protocol
export { ClientNotification, Method, ServerNotification } from "./src/protocol/methods.ts";
export { ErrorCode } from "./src/protocol/errors.ts";
export { pathToUri, toPathUri } from "./src/protocol/path_uri.ts";
export type * from "./src/protocol/types.ts";

// Logging
export {
  createLogger,
  type LogFields,
  type Logger,
  type LoggerOptions,
  type LogLevel,
  nullLogger,
} from "./src/log/logger.ts";
export { otelEnabled, otelRequestTracer, type RequestTracer } from "./src/log/otel.ts";

// Run as a program (`deno run -A jsr:@org/exec-server …`): the command line.
// Loaded only then, so a library import does not load the CLI's modules.
if (import.meta.main) {
  const { main } = await import("./src/cli/main.ts");
  Deno.exit(await main(Deno.args));
}
