/**
 * Mount points bubblewrap creates on the host for placeholders (a missing
 * path mounted read-only inside a writable bind exists on the host while a
 * sandbox runs), and their removal once no sandbox uses them.
 *
 * In this server they are counted per path, and while held such a path is
 * "missing" to new plans ({@linkcode isHeldMountPoint}): a plan that took it
 * for a real directory would bind it, and it could vanish under that sandbox.
 *
 * Across servers (of one user, on one machine — two sessions on one
 * workspace, or `/tmp`, writable in every workspace-write sandbox) counting
 * is not enough: a directory that is a mount point in another sandbox's
 * namespace can still be removed, which detaches that sandbox's mount — in
 * the middle of its setup, bubblewrap then fails ("Can't remount readonly").
 * So every sandbox holds a {@linkcode MountPointLease}: a shared `flock` on a
 * lock file per contested path (a placeholder's, or a path a placeholder may
 * be at), in `/tmp/exec-server-<uid>/mount-points`, taken before the plan it
 * launches is made and held until it has ended. A placeholder is removed
 * only under the exclusive lock — when nobody else holds the path — by
 * whichever holder ends last, the creator or not (the lock file's contents
 * say it is a placeholder). Without FFI or that directory, servers do not
 * coordinate and only this server's count decides.
 *
 * @module
 */

import { LockFile } from "../util/file_lock.ts";

const users = new Map<string, number>();

/** True while `path` is a placeholder mount point some sandbox of this server holds. */
export function isHeldMountPoint(path: string): boolean {
  return users.has(path);
}

let lockDirFound: { dir: string } | { problem: string } | undefined;

/**
 * `<base>/mount-points`, made 0700 (with `base`) when missing — or why it
 * cannot hold the lock files: not a directory of this user's alone (another
 * user may make `/tmp/exec-server-<uid>` first), a symlink, no `/tmp`.
 */
export function lockDirAt(base: string): { dir: string } | { problem: string } {
  const uid = Deno.uid();
  for (const path of [base, `${base}/mount-points`]) {
    try {
      Deno.mkdirSync(path, { mode: 0o700 });
    } catch { /* there already, or not possible: checked below */ }
    try {
      const info = Deno.lstatSync(path);
      if (!info.isDirectory || info.uid !== uid || ((info.mode ?? 0) & 0o077) !== 0) {
        return { problem: `${path} is not a directory of this user's alone (mode 0700)` };
      }
    } catch (error) {
      return { problem: `${path}: ${(error as Error).message}` };
    }
  }
  return { dir: `${base}/mount-points` };
}

/** This server's lock directory, or why it has none (see {@linkcode lockDirAt}); looked at once. */
function lockDir(): { dir: string } | { problem: string } {
  return lockDirFound ??= lockDirAt(`/tmp/exec-server-${Deno.uid()}`);
}

/**
 * Why this server's sandboxes cannot agree on placeholders with other
 * servers (see the module documentation), or null when they can.
 */
export function placeholderCoordination(): string | null {
  const found = lockDir();
  if ("problem" in found) return found.problem;
  let file: LockFile | null;
  try {
    file = LockFile.open(`${found.dir}/probe-${Deno.pid}.lock`);
  } catch (error) {
    return (error as Error).message;
  }
  if (file === null) return "FFI is not available (run with --allow-ffi)";
  file.close();
  try {
    Deno.removeSync(file.path);
  } catch { /* gone */ }
  return null;
}

/** A lock file's name for `path`: FNV-1a (64-bit) of its bytes (a collision only shares a lock). */
function lockName(path: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(path)) {
    hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n);
  }
  return hash.toString(16).padStart(16, "0");
}

/** Removes `path` when it is what bubblewrap made: an empty directory, or an empty file. */
function removeIfEmpty(path: string): void {
  try {
    const info = Deno.lstatSync(path);
    if (info.isDirectory || (info.isFile && info.size === 0)) Deno.removeSync(path);
  } catch { /* gone, or not empty: leave it */ }
}

/**
 * Shared locks on contested paths, held by one sandbox from before its plan
 * is made until it has ended (see the module documentation).
 */
export class MountPointLease {
  readonly #locks = new Map<string, LockFile>();
  readonly #dir: string | null;
  #released = false;

  /** A lease holding nothing yet. */
  constructor() {
    const found = lockDir();
    this.#dir = "dir" in found ? found.dir : null;
  }

  /**
   * Takes shared locks on those of `paths` not held yet; true when it took
   * one (a plan made before may be out of date). A path whose lock another
   * server holds exclusively (removing it at this moment) is tried again a
   * few times, then left unlocked.
   */
  add(paths: Iterable<string>): boolean {
    if (this.#dir === null || this.#released) return false;
    let added = false;
    for (const path of paths) {
      if (this.#locks.has(path)) continue;
      const file = this.#lock(path);
      if (file === undefined) return added;
      if (file === null) continue;
      this.#locks.set(path, file);
      added = true;
    }
    return added;
  }

  /**
   * A shared lock on `path`'s lock file; null when it could not be taken,
   * undefined without FFI. The exclusive holder only removes a placeholder
   * and the lock file (microseconds): its lock is tried again, and a lock
   * file it removed is opened again.
   */
  #lock(path: string): LockFile | null | undefined {
    for (let attempt = 0; attempt < 1000; attempt++) {
      let file: LockFile | null;
      try {
        file = LockFile.open(`${this.#dir}/${lockName(path)}.lock`);
      } catch {
        return null;
      }
      if (file === null) return undefined;
      if (file.tryLock(false) && file.isCurrent()) return file;
      file.close();
    }
    return null;
  }

  /** True when `path` is locked by this lease (its removal is the lease's to decide). */
  holds(path: string): boolean {
    return this.#locks.has(path);
  }

  /**
   * Marks `paths` (mount points this sandbox's bubblewrap creates) as
   * placeholders: their lock files are not empty.
   */
  markCreated(paths: readonly string[]): void {
    for (const path of paths) {
      const file = this.#locks.get(path);
      if (file !== undefined && file.size() === 0) file.append(path);
    }
  }

  /**
   * Ends the lease (once): each placeholder of its paths that nobody else
   * holds is removed (deepest first) with its lock file, then every lock is
   * released.
   */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    const paths = [...this.#locks.keys()].sort((a, b) => b.length - a.length);
    for (const path of paths) {
      const file = this.#locks.get(path)!;
      if (file.tryLock(true)) {
        if (file.size() > 0) removeIfEmpty(path);
        // Whoever opened it meanwhile finds it removed once it has the lock.
        try {
          Deno.removeSync(file.path);
        } catch { /* gone */ }
      }
      file.close();
    }
    this.#locks.clear();
  }
}

/**
 * Holds `paths` (this sandbox's placeholders) while `running` is pending,
 * then removes those no other sandbox still uses — through `lease` when
 * servers coordinate (its release decides, and ends it), else when no other
 * sandbox of this server uses them and they are still empty (a directory or
 * a file with nothing in it: what bwrap made).
 */
export function holdMountPoints(
  paths: readonly string[],
  running: Promise<unknown>,
  lease?: MountPointLease,
): void {
  lease?.markCreated(paths);
  for (const path of paths) users.set(path, (users.get(path) ?? 0) + 1);
  const release = () => {
    for (const path of paths) {
      const left = (users.get(path) ?? 1) - 1;
      if (left > 0) {
        users.set(path, left);
        continue;
      }
      users.delete(path);
      if (lease?.holds(path) !== true) removeIfEmpty(path);
    }
    lease?.release();
  };
  running.then(release, release);
}
