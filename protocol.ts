/**
 * The exec-server wire protocol: method and notification names, error
 * codes, every params/result type, `file:` URI helpers, and the JSON-RPC
 * core (connections, peer, framing) the server, client and relay share.
 *
 * @example Name a method and build its params
 * ```ts
 * import { Method, type ProcessStartParams, toPathUri } from "./protocol.ts";
 *
 * const params: ProcessStartParams = {
 *   processId: "p1",
 *   argv: ["echo", "hi"],
 *   cwd: toPathUri("/tmp"),
 *   env: {},
 *   tty: false,
 * };
 * console.log(Method.ProcessStart, params.argv);
 * ```
 *
 * @module
 */

export {
  ClientNotification,
  Method,
  type MethodName,
  ServerNotification,
  ServerRequest,
} from "./src/protocol/methods.ts";
export type {
  EmptyResult,
  MethodMap,
  MethodParams,
  MethodResult,
  NotificationMap,
  NotificationName,
  NotificationParams,
  RequestFn,
} from "./src/protocol/spec.ts";
// The table by family: names, and rows (params and result of each method).
export type { Row } from "./src/protocol/table.ts";
export { LifecycleMethod, type LifecycleMethods } from "./src/protocol/lifecycle.ts";
export {
  ProcessMethod,
  type ProcessMethods,
  ProcessNotification,
  type ProcessNotifications,
} from "./src/protocol/process.ts";
export {
  FsMethod,
  type FsMethods,
  FsNotification,
  type FsNotifications,
} from "./src/protocol/fs.ts";
export {
  HttpMethod,
  type HttpMethods,
  HttpNotification,
  type HttpNotifications,
} from "./src/protocol/http.ts";
export { NetworkNotification, type NetworkNotifications } from "./src/protocol/network.ts";
export { ErrorCode } from "./src/protocol/errors.ts";
export { pathToUri, toPathUri } from "./src/protocol/path_uri.ts";
export type * from "./src/protocol/types.ts";

export {
  type CloseInfo,
  type Connection,
  type ConnectionParts,
  messageConnection,
  type MessageSource,
} from "./src/jsonrpc/connection.ts";
export {
  createOutputSink,
  type Framing,
  type MessageSink,
  ndjsonFraming,
  type OutputSink,
  type OutputSinkOptions,
} from "./src/jsonrpc/output_sink.ts";
export { ndjsonConnection, type NdjsonOptions } from "./src/jsonrpc/ndjson.ts";
export type { ByteReader } from "./src/util/conn_io.ts";
export {
  webSocketConnection,
  type WebSocketConnectionOptions,
} from "./src/jsonrpc/websocket_adapter.ts";
export {
  connectWebSocket,
  type ConnectWebSocketOptions,
  WebSocketHandshakeError,
  type WebSocketLimits,
} from "./src/websocket/handshake.ts";
export {
  type AssembledMessage,
  RawText,
  type WebSocketChannel,
  type WebSocketChannelOptions,
  type WebSocketCloseInfo,
  type WebSocketMessage,
} from "./src/websocket/channel.ts";
export {
  type CallOptions,
  type NotificationHandler,
  type RequestContext,
  type RequestHandler,
  type RequestObserver,
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
