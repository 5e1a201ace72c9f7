/**
 * Metadata calls (`lstat`, `stat`, `realpath`) without the thread pool,
 * where that is safe.
 *
 * An async Deno filesystem call hands the work to a pool thread and back;
 * on a VM that handoff costs far more than the call (measured here: 55–60
 * µs of CPU per `Deno.lstat`, 2–4 µs per `Deno.lstatSync`), and it was most
 * of the server's CPU for small requests (`fs/getMetadata` pipelined over
 * WebSocket: 88 µs per request with async calls, about a third of that with
 * sync ones). A metadata call on a local filesystem is short — it reads
 * cached inodes or the local disk — so it runs on the main thread when
 * every mounted filesystem is a local kind (`/proc/self/mountinfo`, read
 * again every few seconds): no NFS, SMB, FUSE, 9p or automounter, where a
 * single call can wait on the network or never return and would stop every
 * connection with it. A sync call that still takes longer than 50 ms turns
 * the fast path off for the life of the process. Without `/proc` (or read
 * access to it) every call stays async.
 *
 * @module
 */

/** Filesystem kinds whose metadata calls do not wait on anything remote. */
const LOCAL_KINDS = new Set([
  "ext2",
  "ext3",
  "ext4",
  "xfs",
  "btrfs",
  "f2fs",
  "zfs",
  "bcachefs",
  "jfs",
  "reiserfs",
  "vfat",
  "exfat",
  "ntfs3",
  "squashfs",
  "erofs",
  "iso9660",
  "overlay",
  "tmpfs",
  "ramfs",
  "devtmpfs",
  "devpts",
  "proc",
  "sysfs",
  "cgroup",
  "cgroup2",
  "mqueue",
  "hugetlbfs",
  "debugfs",
  "tracefs",
  "securityfs",
  "pstore",
  "bpf",
  "configfs",
  "efivarfs",
  "binfmt_misc",
  "nsfs",
  "rpc_pipefs",
  "fusectl",
]);

/** How often the mount table is looked at again. */
const RECHECK_MS = 5_000;
/** A sync call slower than this turns the fast path off. */
const SLOW_MS = 50;

let checkedAt = -Infinity;
let allLocal = false;
let disabled = false;

/** The kinds of every mounted filesystem, or null when the table cannot be read. */
export function mountedKinds(): string[] | null {
  let table: string;
  try {
    table = Deno.readTextFileSync("/proc/self/mountinfo");
  } catch {
    return null;
  }
  const kinds: string[] = [];
  for (const line of table.split("\n")) {
    // "… - <fstype> <source> <options>": the kind follows the separator.
    const fields = line.split(" ");
    const dash = fields.indexOf("-");
    if (dash !== -1 && dash + 1 < fields.length) kinds.push(fields[dash + 1]!);
  }
  return kinds;
}

/** True when every kind in a (readable, non-empty) mount table is a local one. */
export function allLocalKinds(kinds: readonly string[] | null): boolean {
  return kinds !== null && kinds.length > 0 && kinds.every((k) => LOCAL_KINDS.has(k));
}

/** True when metadata calls may run on the main thread now. */
export function quickMetadataAllowed(now = performance.now()): boolean {
  if (disabled) return false;
  if (now - checkedAt >= RECHECK_MS) {
    checkedAt = now;
    allLocal = allLocalKinds(mountedKinds());
  }
  return allLocal;
}

/**
 * `sync(path)` when metadata calls may run on the main thread now (one that
 * takes too long turns that off for good); `undefined` when they may not.
 * Throws what the call throws. (A path and a shared function, not a
 * closure: the request path calls this for every `fs/getMetadata`.)
 */
function syncNow<T>(sync: (path: string) => T, path: string): T | undefined {
  if (!quickMetadataAllowed()) return undefined;
  const started = performance.now();
  try {
    return sync(path);
  } finally {
    if (performance.now() - started > SLOW_MS) disabled = true;
  }
}

function quick<T>(
  sync: (path: string) => T,
  async: (path: string) => Promise<T>,
  path: string,
): Promise<T> {
  let value: T | undefined;
  try {
    value = syncNow(sync, path);
  } catch (error) {
    return Promise.reject(error);
  }
  return value === undefined ? async(path) : Promise.resolve(value);
}

const lstatSync = (path: string) => Deno.lstatSync(path);
const lstat = (path: string) => Deno.lstat(path);
const statSync = (path: string) => Deno.statSync(path);
const stat = (path: string) => Deno.stat(path);
const realPathSync = (path: string) => Deno.realPathSync(path);
const realPath = (path: string) => Deno.realPath(path);

/**
 * `Deno.lstatSync(path)` when metadata calls may run on the main thread
 * now; `undefined` when they may not (use {@linkcode quickLstat}). Throws
 * what the call throws.
 */
export function lstatNow(path: string): Deno.FileInfo | undefined {
  return syncNow(lstatSync, path);
}

/** `Deno.lstat`, on the main thread where safe (see the module documentation). */
export function quickLstat(path: string): Promise<Deno.FileInfo> {
  return quick(lstatSync, lstat, path);
}

/** `Deno.stat`, on the main thread where safe. */
export function quickStat(path: string): Promise<Deno.FileInfo> {
  return quick(statSync, stat, path);
}

/** `Deno.realPath`, on the main thread where safe. */
export function quickRealPath(path: string): Promise<string> {
  return quick(realPathSync, realPath, path);
}
