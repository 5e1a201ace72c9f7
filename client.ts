/**
 * The exec-server client: connect to any exec-server (this one, the Codex
 * reference, over stdio, WebSocket or the encrypted relay) and drive it with
 * a Deno-shaped API — `spawn`, `command(...).output()`, `fs.readFile`, …
 * Loads no server, proxy or MCP code.
 *
 * @example Run a command on a server started over stdio
 * ```ts ignore
 * import { connect } from "jsr:@org/exec-server/client";
 *
 * await using client = await connect({
 *   command: { program: "exec-server", args: ["serve", "--listen", "stdio"] },
 * });
 * const out = await client.command("echo", { args: ["hi"] }).output();
 * console.log(new TextDecoder().decode(out.stdout));
 * ```
 *
 * @module
 */

export {
  connect,
  connectLazy,
  type ConnectOptions,
  ExecServerClient,
  type ReconnectEvent,
  type ReconnectOptions,
  type SpawnOptions,
} from "./src/client/client.ts";
export {
  CallTimeoutError,
  ClientClosedError,
  ConnectionClosedError,
  ConnectTimeoutError,
  DisconnectedError,
  EnvironmentNotReadyError,
  InitializeTimeoutError,
  RpcError,
  SessionLostError,
} from "./src/client/errors.ts";
export {
  type RendezvousBundle,
  RendezvousError,
  type RendezvousMinter,
  type RendezvousProvider,
  type RendezvousSource,
} from "./src/client/rendezvous.ts";
export {
  ProcessDetachedError,
  RemoteProcess,
  type RemoteProcessEvent,
  type RemoteStatus,
} from "./src/client/process.ts";
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
export {
  type ClientTransport,
  type CommandTarget,
  commandTransport,
  type OpenedTransport,
  type StopTimings,
  type WebSocketTarget,
  webSocketTransport,
} from "./src/client/transports.ts";
export { type InProcessServer, inProcessTransport } from "./src/client/in_process.ts";
export { codexSandbox, type SandboxMode } from "./src/client/sandbox_presets.ts";
export { ExecClientMetrics } from "./src/telemetry/client_metrics.ts";
