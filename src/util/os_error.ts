/**
 * OS errors as clients of the reference see them: `<strerror> (os error N)`
 * with musl's wording (the reference binary is musl-linked), whatever libc
 * Deno was built against.
 *
 * @module
 */

/**
 * errno → musl's `strerror` text: its whole table, in errno order (read from
 * the strings of the musl-linked reference binary; Linux numbering, the same
 * on x86-64 and aarch64). An errno musl does not know reads
 * `No error information`.
 */
const STRERROR: Readonly<Record<number, string>> = {
  1: "Operation not permitted",
  2: "No such file or directory",
  3: "No such process",
  4: "Interrupted system call",
  5: "I/O error",
  6: "No such device or address",
  7: "Argument list too long",
  8: "Exec format error",
  9: "Bad file descriptor",
  10: "No child process",
  11: "Resource temporarily unavailable",
  12: "Out of memory",
  13: "Permission denied",
  14: "Bad address",
  15: "Block device required",
  16: "Resource busy",
  17: "File exists",
  18: "Cross-device link",
  19: "No such device",
  20: "Not a directory",
  21: "Is a directory",
  22: "Invalid argument",
  23: "Too many open files in system",
  24: "No file descriptors available",
  25: "Not a tty",
  26: "Text file busy",
  27: "File too large",
  28: "No space left on device",
  29: "Invalid seek",
  30: "Read-only file system",
  31: "Too many links",
  32: "Broken pipe",
  33: "Domain error",
  34: "Result not representable",
  35: "Resource deadlock would occur",
  36: "Filename too long",
  37: "No locks available",
  38: "Function not implemented",
  39: "Directory not empty",
  40: "Symbolic link loop",
  42: "No message of desired type",
  43: "Identifier removed",
  60: "Device not a stream",
  61: "No data available",
  62: "Device timeout",
  63: "Out of streams resources",
  67: "Link has been severed",
  71: "Protocol error",
  72: "Multihop attempted",
  74: "Bad message",
  75: "Value too large for data type",
  77: "File descriptor in bad state",
  84: "Illegal byte sequence",
  88: "Not a socket",
  89: "Destination address required",
  90: "Message too large",
  91: "Protocol wrong type for socket",
  92: "Protocol not available",
  93: "Protocol not supported",
  94: "Socket type not supported",
  95: "Not supported",
  96: "Protocol family not supported",
  97: "Address family not supported by protocol",
  98: "Address in use",
  99: "Address not available",
  100: "Network is down",
  101: "Network unreachable",
  102: "Connection reset by network",
  103: "Connection aborted",
  104: "Connection reset by peer",
  105: "No buffer space available",
  106: "Socket is connected",
  107: "Socket not connected",
  108: "Cannot send after socket shutdown",
  110: "Operation timed out",
  111: "Connection refused",
  112: "Host is down",
  113: "Host is unreachable",
  114: "Operation already in progress",
  115: "Operation in progress",
  116: "Stale file handle",
  121: "Remote I/O error",
  122: "Quota exceeded",
  123: "No medium found",
  124: "Wrong medium type",
  125: "Operation canceled",
  126: "Required key not available",
  127: "Key has expired",
  128: "Key has been revoked",
  129: "Key was rejected by service",
  130: "Previous owner died",
  131: "State not recoverable",
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

/** musl's text for an errno it has no message for. */
const UNKNOWN_ERRNO = "No error information";

/** Formats an errno as `<strerror> (os error N)`. */
export function formatErrno(errno: number): string {
  return `${STRERROR[errno] ?? UNKNOWN_ERRNO} (os error ${errno})`;
}

/** `<strerror> (os error N)` for an OS error, else the error's message. */
export function osErrorText(error: unknown): string {
  const errno = errnoOf(error);
  if (errno !== undefined) return formatErrno(errno);
  return error instanceof Error ? error.message : String(error);
}
