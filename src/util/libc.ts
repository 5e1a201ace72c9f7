/**
 * The few libc functions Deno does not expose (pseudo-terminals, advisory
 * file locks that can be tried without blocking, listing extended
 * attributes, a sandbox's TUN device, a pipe's buffer size), through
 * `Deno.dlopen`.
 * Loaded lazily and only on Linux; when FFI is unavailable (other OS, no
 * `--allow-ffi`), {@linkcode loadLibc} returns null and terminals are
 * reported as unsupported.
 *
 * @module
 */

const SYMBOLS = {
  posix_openpt: { parameters: ["i32"], result: "i32" },
  grantpt: { parameters: ["i32"], result: "i32" },
  unlockpt: { parameters: ["i32"], result: "i32" },
  ptsname_r: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  open: { parameters: ["buffer", "i32"], result: "i32" },
  /** `open` with a mode (for `O_CREAT`). */
  open_mode: { name: "open", parameters: ["buffer", "i32", "u32"], result: "i32" },
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  /** On a thread of its own: a TUN device's read blocks until a packet comes. */
  read: { parameters: ["i32", "buffer", "usize"], result: "isize", nonblocking: true },
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  flock: { parameters: ["i32", "i32"], result: "i32" },
  /** With an int argument (F_SETPIPE_SZ). */
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  listxattr: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  __errno_location: { parameters: [], result: "pointer" },
  strerror: { parameters: ["i32"], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The bound functions. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/** Linux constants (x86-64 and aarch64 agree on these, unless said). */
export const C = {
  O_RDWR: 0x2,
  O_NOCTTY: 0x100,
  O_CLOEXEC: 0x80000,
  O_CREAT: 0x40,
  /** Differs by architecture. */
  O_NOFOLLOW: Deno.build.arch === "aarch64" ? 0x8000 : 0x20000,
  SOCK_CLOEXEC: 0x80000,
  TIOCSWINSZ: 0x5414n,
  TIOCGWINSZ: 0x5413n,
  TIOCGPGRP: 0x540fn,
  POLLOUT: 4,
  EAGAIN: 11,
  EINTR: 4,
  LOCK_SH: 1,
  LOCK_EX: 2,
  LOCK_NB: 4,
  LOCK_UN: 8,
  F_SETPIPE_SZ: 1031,
} as const;

let library: Deno.DynamicLibrary<typeof SYMBOLS> | null | undefined;
let loadError = "";

/** Opens libc once; null (with {@linkcode libcLoadError}) when impossible. */
export function loadLibc(): Libc | null {
  if (library !== undefined) return library?.symbols ?? null;
  if (Deno.build.os !== "linux") {
    loadError = `pseudo-terminals are implemented for Linux only (this is ${Deno.build.os})`;
    library = null;
    return null;
  }
  try {
    // Never a permission prompt in the middle of serving.
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") {
      throw new Deno.errors.NotCapable("FFI access is not granted");
    }
    library = Deno.dlopen("libc.so.6", SYMBOLS);
  } catch (error) {
    loadError = `cannot load libc through FFI (run with --allow-ffi): ${(error as Error).message}`;
    library = null;
  }
  return library?.symbols ?? null;
}

/** Why {@linkcode loadLibc} returned null. */
export function libcLoadError(): string {
  return loadError;
}

/** errno of the last synchronous call on this thread. */
export function errno(libc: Libc): number {
  const pointer = libc.__errno_location();
  return pointer === null ? 0 : new Deno.UnsafePointerView(pointer).getInt32();
}

/** `strerror(n)`. */
export function strerror(libc: Libc, n: number): string {
  const pointer = libc.strerror(n);
  return pointer === null ? `errno ${n}` : new Deno.UnsafePointerView(pointer).getCString();
}
