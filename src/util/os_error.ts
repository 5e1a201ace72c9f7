/**
 * OS errors as clients of the reference see them: `<strerror> (os error N)`
 * with musl's wording (the reference binary is musl-linked), whatever libc
 * Deno was built against.
 *
 * @module
 */

/** errno → musl `strerror` text, for the errors file and process calls produce. */
const STRERROR: Readonly<Record<number, string>> = {
  1: "Operation not permitted",
  2: "No such file or directory",
  3: "No such process",
  4: "Interrupted system call",
  5: "I/O error",
  9: "Bad file descriptor",
  11: "Resource temporarily unavailable",
  12: "Out of memory",
  13: "Permission denied",
  16: "Resource busy",
  17: "File exists",
  18: "Cross-device link",
  20: "Not a directory",
  21: "Is a directory",
  22: "Invalid argument",
  23: "Too many open files in system",
  24: "No file descriptors available",
  26: "Text file busy",
  27: "File too large",
  28: "No space left on device",
  30: "Read-only file system",
  31: "Too many links",
  32: "Broken pipe",
  36: "Filename too long",
  39: "Directory not empty",
  40: "Symbolic link loop",
  95: "Not supported",
  122: "Quota exceeded",
};

/** errno for each Deno error class (when the message carries no number). */
const CLASS_ERRNO: ReadonlyArray<[new (...args: never[]) => Error, number]> = [
  [Deno.errors.NotFound, 2],
  [Deno.errors.PermissionDenied, 13],
  [Deno.errors.AlreadyExists, 17],
  [Deno.errors.NotADirectory, 20],
  [Deno.errors.IsADirectory, 21],
  [Deno.errors.InvalidData, 22],
  [Deno.errors.FilesystemLoop, 40],
  [Deno.errors.BrokenPipe, 32],
  [Deno.errors.Interrupted, 4],
  [Deno.errors.WouldBlock, 11],
];

/** The errno behind `error`, when one can be determined. */
export function errnoOf(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const m = /\(os error (\d+)\)/.exec(error.message);
  if (m) return Number(m[1]);
  for (const [cls, errno] of CLASS_ERRNO) if (error instanceof cls) return errno;
  return undefined;
}

/** Formats an errno as `<strerror> (os error N)`. */
export function formatErrno(errno: number): string {
  return `${STRERROR[errno] ?? `Unknown error ${errno}`} (os error ${errno})`;
}

/** `<strerror> (os error N)` for an OS error, else the error's message. */
export function osErrorText(error: unknown): string {
  const errno = errnoOf(error);
  if (errno !== undefined) return formatErrno(errno);
  return error instanceof Error ? error.message : String(error);
}
