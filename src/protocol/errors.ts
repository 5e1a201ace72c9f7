/**
 * Error codes of the exec-server protocol and constructors for the errors
 * handlers raise.
 *
 * @module
 */

import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";

/** Every error code the protocol uses. */
export const ErrorCode = {
  ...JsonRpcCode,
  /** A file, directory or file handle does not exist. */
  NotFound: -32004,
  /** The session is attached to another live connection. */
  SessionAttached: -32010,
} as const;

/** `-32600`: the request is not acceptable in this state. */
export function invalidRequest(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidRequest, message);
}

/** `-32602`: the params are wrong. */
export function invalidParams(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidParams, message);
}

/** `-32603`: the operation failed. */
export function internalError(message: string, cause?: unknown): RpcError {
  return new RpcError(ErrorCode.InternalError, message, { cause });
}

/** How the answer to a resume of an unknown (or expired) session begins. */
const UNKNOWN_SESSION = "unknown session id";

/** `-32600`: `initialize.resumeSessionId` names no session here (any more). */
export function unknownSession(id: string): RpcError {
  return invalidRequest(`${UNKNOWN_SESSION} ${id}`);
}

/**
 * Whether `error` is {@linkcode unknownSession}'s answer (the reference's
 * carries no code of its own: its code and opening words tell).
 */
export function isUnknownSession(error: unknown): boolean {
  return error instanceof RpcError && error.code === ErrorCode.InvalidRequest &&
    error.message.startsWith(UNKNOWN_SESSION);
}

/** `-32004`: something does not exist. */
export function notFound(message: string): RpcError {
  return new RpcError(ErrorCode.NotFound, message);
}

/** `-32601`: the method is not implemented. */
export function methodNotFound(method: string): RpcError {
  return new RpcError(
    ErrorCode.MethodNotFound,
    `exec-server stub does not implement \`${method}\` yet`,
  );
}
