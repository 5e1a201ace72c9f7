/**
 * Domain errors become protocol errors here, once, for every method: the
 * filesystem layer throws {@linkcode FsError} kinds and knows nothing of
 * JSON-RPC codes.
 *
 * @module
 */

import { RpcError } from "../jsonrpc/errors.ts";
import { FsError, type FsErrorKind } from "../fs/errors.ts";
import { ErrorCode } from "../protocol/errors.ts";

const FS_CODES: Record<FsErrorKind, number> = {
  not_found: ErrorCode.NotFound,
  invalid: ErrorCode.InvalidRequest,
  internal: ErrorCode.InternalError,
};

/** `error` as the protocol reports it (other errors unchanged). */
export function protocolError(error: unknown): unknown {
  if (!(error instanceof FsError)) return error;
  return new RpcError(FS_CODES[error.kind], error.message, {
    cause: error,
    ...(error.detail !== undefined ? { logDetail: error.detail } : {}),
  });
}

/** Runs a handler, mapping what it throws (synchronously or not) with {@linkcode protocolError}. */
export function withProtocolErrors(run: () => unknown): unknown {
  let result: unknown;
  try {
    result = run();
  } catch (error) {
    throw protocolError(error);
  }
  if (result instanceof Promise) {
    return result.catch((error) => {
      throw protocolError(error);
    });
  }
  return result;
}
