/**
 * Descriptors this process inherited from whatever started it never reach
 * its children.
 *
 * Deno opens every descriptor of its own with `O_CLOEXEC`, and so does this
 * package (terminals included); but one inherited from a launcher — a
 * directory, a socket, a key file left open — is passed on to every child,
 * and through bubblewrap into every sandbox, where a directory descriptor is
 * a way out of the sandbox's mount namespace (`openat` relative to it). The
 * reference closes everything above 2 in each child. Here each inherited
 * descriptor above 2 that lacks close-on-exec gets it once, when the server
 * starts (`ioctl(FIOCLEX)`): the server keeps using them if it wants, no
 * child ever receives one, and spawning costs nothing more.
 *
 * Which descriptors lack the flag is read from `/proc/self/fdinfo` (no FFI
 * needed); setting it needs libc through FFI. Without FFI the descriptors
 * are named in a warning, never silently passed on.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import { loadLibc } from "../util/libc.ts";

/** `ioctl` request that sets close-on-exec (Linux, every architecture). */
const FIOCLEX = 0x5451n;
/** `O_CLOEXEC` as `/proc/self/fdinfo` reports it (octal flags). */
const O_CLOEXEC = 0o2000000;

/** Descriptors above 2 that a child would inherit now. */
export function inheritableDescriptors(): number[] {
  const found: number[] = [];
  let entries: Iterable<Deno.DirEntry>;
  try {
    entries = Deno.readDirSync("/proc/self/fdinfo");
  } catch {
    return found; // not Linux, or no /proc
  }
  for (const entry of entries) {
    const fd = Number(entry.name);
    if (!Number.isInteger(fd) || fd <= 2) continue;
    try {
      const info = Deno.readTextFileSync(`/proc/self/fdinfo/${fd}`);
      const flags = /^flags:\s+([0-7]+)$/m.exec(info);
      if (flags && (parseInt(flags[1]!, 8) & O_CLOEXEC) === 0) found.push(fd);
    } catch { /* closed meanwhile (the directory's own descriptor) */ }
  }
  return found;
}

let sealed = false;

/**
 * Marks every inherited descriptor above 2 close-on-exec (once per
 * process; see the module documentation). Returns those it could not mark.
 */
export function sealInheritedDescriptors(logger: Logger): number[] {
  if (sealed) return [];
  sealed = true;
  const open = inheritableDescriptors();
  if (open.length === 0) return [];
  const libc = loadLibc();
  const left = libc ? open.filter((fd) => libc.ioctl(fd, FIOCLEX, null) !== 0) : open;
  if (left.length > 0) {
    logger.warn("process.inherited_descriptors", {
      message: `descriptors ${left.join(", ")} were inherited without close-on-exec and ` +
        "cannot be marked (run with --allow-ffi): every child receives them",
    });
  }
  return left;
}
