/**
 * Filesystem errors as the protocol reports them (§9.1): not found →
 * `-32004`; permission denied and invalid input → `-32600`; anything else →
 * `-32603`. Messages are the OS error text exactly as the reference sends
 * it (Codex copies it into its model's context); the path goes to the log
 * ({@linkcode RpcError.logDetail}).
 *
 * @module
 */

import { RpcError } from "../jsonrpc/errors.ts";
import { ErrorCode } from "../protocol/errors.ts";
import { errnoOf, formatErrno, osErrorText } from "../util/os_error.ts";

const INVALID_INPUT_ERRNOS = new Set([22]);
const PERMISSION_ERRNOS = new Set([1, 13]);

/** The protocol code for an OS error number. */
export function codeForErrno(errno: number | undefined): number {
  if (errno === 2) return ErrorCode.NotFound;
  if (errno !== undefined && (PERMISSION_ERRNOS.has(errno) || INVALID_INPUT_ERRNOS.has(errno))) {
    return ErrorCode.InvalidRequest;
  }
  return ErrorCode.InternalError;
}

/** Maps a thrown filesystem error to an {@linkcode RpcError} naming `path`. */
export function fsError(error: unknown, path: string): RpcError {
  if (error instanceof RpcError) return error;
  const errno = errnoOf(error);
  return new RpcError(codeForErrno(errno), osErrorText(error), { cause: error, logDetail: path });
}

/** An error for a given errno, as if the OS had raised it for `path`. */
export function errnoError(errno: number, path: string): RpcError {
  return new RpcError(codeForErrno(errno), formatErrno(errno), { logDetail: path });
}

/** `-32600 path \`<p>\` is not a file`. */
export function notAFile(path: string): RpcError {
  return new RpcError(ErrorCode.InvalidRequest, `path \`${path}\` is not a file`);
}

/** Runs `op`, mapping OS errors to protocol errors naming `path`. */
export async function withFsErrors<T>(path: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    throw fsError(error, path);
  }
}

/**
 * For `followSymlinks: false`: fails when a component of `path` is a
 * symlink — an intermediate one as `ENOTDIR` (20), the final one as
 * `onFinal` (or returns "final" when `onFinal` is null).
 */
export async function checkNoSymlinks(
  path: string,
  onFinal: RpcError | null,
): Promise<"final" | "none"> {
  // The common case in one system call: a path that is already its own
  // canonical form has no symlink (nor `.`, `..`, `//`) anywhere. Otherwise
  // the walk below finds which component is one, with the exact error.
  if (await Deno.realPath(path).then((real) => real === path, () => false)) return "none";
  const parts = path.split("/").filter(Boolean);
  let prefix = "";
  for (let i = 0; i < parts.length; i++) {
    prefix += "/" + parts[i];
    let info: Deno.FileInfo;
    try {
      info = await Deno.lstat(prefix);
    } catch (error) {
      throw fsError(error, path);
    }
    if (info.isSymlink) {
      if (i < parts.length - 1) throw errnoError(20, path);
      if (onFinal) throw onFinal;
      return "final";
    }
  }
  return "none";
}
