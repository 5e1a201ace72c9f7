/**
 * The public shape of an MCP transport: structurally the MCP SDK's
 * `Transport`, so values pass both ways (`client.connect(await
 * launchMcpServer(…))`) without this package's public types depending on the
 * SDK's.
 *
 * @module
 */

/** A JSON-RPC message object (see the MCP SDK's `JSONRPCMessage`). */
export type McpMessage = object;

/** An MCP transport (see the MCP SDK's `Transport`). */
export interface McpTransport {
  /** Starts receiving. */
  start(): Promise<void>;
  /** Sends one message. */
  send(message: McpMessage, options?: object): Promise<void>;
  /** Closes the transport. */
  close(): Promise<void>;
  /** Called once closed. */
  onclose?(): void;
  /** Called on a transport error. */
  onerror?(error: Error): void;
  /** Called for each message received. */
  onmessage?(message: McpMessage, extra?: object): void;
  /** The session id, for transports that have one. */
  sessionId?: string;
}
