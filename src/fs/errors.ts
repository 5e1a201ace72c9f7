/**
 * Filesystem errors, in three kinds the server maps to protocol codes
 * (`server/handlers/fs.ts`): `not_found` (`-32004`), `invalid` — also permission denied —
 * (`-32600`) and `internal` (`-32603`). Messages are the OS error text
 * exactly as the reference sends it (Codex copies it into its model's
 * context); the path is `detail`, for the log only.
 *
 * @module
 */

import { quickLstat, quickRealPath } from "./quick_meta.ts";
import { errnoOf, formatErrno, osErrorText } from "../util/os_error.ts";

const INVALID_INPUT_ERRNOS = new Set([22]);
const PERMISSION_ERRNOS = new Set([1, 13]);

/** What kind of failure a filesystem operation met. */
export type FsErrorKind = "not_found" | "invalid" | "internal";

/** A filesystem operation failed; `message` is what the client sees. */
export class FsError extends Error {
  /** Creates the error; `detail` (the path, usually) goes to the log only. */
  constructor(
    readonly kind: FsErrorKind,
    message: string,
    options: { cause?: unknown; detail?: string } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "FsError";
    this.detail = options.detail;
  }

  /** For the log (the path the error concerns). */
  readonly detail: string | undefined;
}

/** The kind of an OS error number. */
export function kindForErrno(errno: number | undefined): FsErrorKind {
  if (errno === 2) return "not_found";
  if (errno !== undefined && (PERMISSION_ERRNOS.has(errno) || INVALID_INPUT_ERRNOS.has(errno))) {
    return "invalid";
  }
  return "internal";
}

/** Maps a thrown filesystem error to an {@linkcode FsError} naming `path`. */
export function fsError(error: unknown, path: string): FsError {
  if (error instanceof FsError) return error;
  const errno = errnoOf(error);
  return new FsError(kindForErrno(errno), osErrorText(error), { cause: error, detail: path });
}

/** An error for a given errno, as if the OS had raised it for `path`. */
export function errnoError(errno: number, path: string): FsError {
  return new FsError(kindForErrno(errno), formatErrno(errno), { detail: path });
}

/** `path \`<p>\` is not a file` (invalid). */
export function notAFile(path: string): FsError {
  return new FsError("invalid", `path \`${path}\` is not a file`);
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
  onFinal: FsError | null,
): Promise<"final" | "none"> {
  // The common case in one system call: a path that is already its own
  // canonical form has no symlink (nor `.`, `..`, `//`) anywhere. Otherwise
  // the walk below finds which component is one, with the exact error.
  if (await quickRealPath(path).then((real) => real === path, () => false)) return "none";
  const parts = path.split("/").filter(Boolean);
  let prefix = "";
  for (let i = 0; i < parts.length; i++) {
    prefix += "/" + parts[i];
    let info: Deno.FileInfo;
    try {
      info = await quickLstat(prefix);
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
