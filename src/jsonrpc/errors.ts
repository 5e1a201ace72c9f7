/**
 * The one error type that crosses the JSON-RPC boundary.
 *
 * Handlers throw {@linkcode RpcError}; the peer turns it into an error
 * response. Anything else thrown becomes `-32603` with the stack logged.
 * On the calling side, an error response rejects the call with an
 * `RpcError` carrying the remote code and message.
 *
 * @module
 */

/** Standard JSON-RPC error codes. */
export const JsonRpcCode = {
  /** The JSON sent is not a valid request object (also parse errors here). */
  InvalidRequest: -32600,
  /** The method does not exist or is not available. */
  MethodNotFound: -32601,
  /** Invalid method parameters. */
  InvalidParams: -32602,
  /** Internal error. */
  InternalError: -32603,
} as const;

/** An error with a JSON-RPC code, thrown by handlers and by failed calls. */
export class RpcError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** Optional structured detail sent as the error's `data`. */
  readonly data: unknown;
  /**
   * Detail for the server's log only (a path, a program): the wire message
   * stays the reference's exact text, which clients copy verbatim.
   */
  readonly logDetail: string | undefined;

  /** Creates an error with `code` and `message`. */
  constructor(
    code: number,
    message: string,
    options?: { data?: unknown; cause?: unknown; logDetail?: string },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "RpcError";
    this.code = code;
    this.data = options?.data;
    this.logDetail = options?.logDetail;
  }
}

/**
 * The connection a call depended on is gone. Every in-flight call and every
 * later call on a closed peer rejects with this error, carrying the first
 * close reason.
 */
export class ConnectionClosedError extends Error {
  /** Creates the error with the connection's close reason. */
  constructor(reason: string, options?: { cause?: unknown }) {
    super(reason, options);
    this.name = "ConnectionClosedError";
  }
}

/**
 * A call got no answer within its deadline (the peer gave up waiting; a
 * late answer is dropped). Not an error the server sent: branch on the
 * class, not on `-32603`.
 */
export class CallTimeoutError extends Error {
  /** The method called. */
  readonly method: string;
  /** The deadline. */
  readonly timeoutMs: number;
  /** `method` got no answer within `timeoutMs`. */
  constructor(method: string, timeoutMs: number) {
    super(`${method} timed out after ${timeoutMs} ms`);
    this.name = "CallTimeoutError";
    this.method = method;
    this.timeoutMs = timeoutMs;
  }
}
