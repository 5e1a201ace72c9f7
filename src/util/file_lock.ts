/**
 * Advisory `flock` locks on lock files, shared by the processes of one user
 * (Deno's own `FsFile.lock` cannot be tried without blocking). A lock file is
 * created 0600 when missing and never opened through a symlink. Locks are
 * per open file: two holders in one process conflict as two processes do.
 *
 * @module
 */

import { C, loadLibc } from "./libc.ts";

/** A lock file opened for locking (see {@linkcode LockFile.open}). */
export class LockFile {
  #fd: number;

  private constructor(fd: number, readonly path: string) {
    this.#fd = fd;
  }

  /**
   * Opens `path` (created 0600 when missing); null without FFI (no lock can
   * be taken). Throws when it is a symlink or cannot be opened.
   */
  static open(path: string): LockFile | null {
    const libc = loadLibc();
    if (libc === null) return null;
    // One call, no error objects: a sandbox start opens a dozen.
    const fd = libc.open_mode(
      new TextEncoder().encode(path + "\0"),
      C.O_RDWR | C.O_CREAT | C.O_NOFOLLOW | C.O_CLOEXEC,
      0o600,
    );
    if (fd < 0) throw new Error(`cannot open lock file ${path} (a symlink is refused)`);
    return new LockFile(fd, path);
  }

  /**
   * Takes (or converts to) a shared or exclusive lock without blocking:
   * false when another holder's lock conflicts (a failed conversion may
   * leave no lock held).
   */
  tryLock(exclusive: boolean): boolean {
    if (this.#fd < 0) throw new Error(`lock file ${this.path} is closed`);
    return loadLibc()!.flock(this.#fd, (exclusive ? C.LOCK_EX : C.LOCK_SH) | C.LOCK_NB) === 0;
  }

  /**
   * True while `path` is still this file (not removed, or replaced, by a
   * holder that took the lock before): a lock taken on a removed lock file
   * excludes nobody — open it again.
   */
  isCurrent(): boolean {
    try {
      return Deno.statSync(`/proc/self/fd/${this.#fd}`).ino === Deno.statSync(this.path).ino;
    } catch {
      return false;
    }
  }

  /** Its size (what {@linkcode append} wrote to it). */
  size(): number {
    try {
      return Deno.statSync(`/proc/self/fd/${this.#fd}`).size;
    } catch {
      return 0;
    }
  }

  /** Appends `text` to its contents (a note for the next holder). */
  append(text: string): void {
    const bytes = new TextEncoder().encode(text);
    loadLibc()!.write(this.#fd, bytes, BigInt(bytes.length));
  }

  /** Unlocks and closes it (once). */
  close(): void {
    if (this.#fd < 0) return;
    const libc = loadLibc()!;
    libc.flock(this.#fd, C.LOCK_UN);
    libc.close(this.#fd);
    this.#fd = -1;
  }
}

/** A held lock; release to unlock. */
export interface HeldLock {
  /** Releases the lock. */
  release(): void;
}

/**
 * Takes an advisory lock on `path` (created 0600 if missing): shared or
 * exclusive; `wait: false` returns `null` instead of waiting (it retries
 * every 10 ms, for up to 2 s, then throws). Without FFI, returns `null` for
 * `wait: false` and a no-op lock otherwise.
 */
export async function lockFile(
  path: string,
  exclusive: boolean,
  wait: boolean,
): Promise<HeldLock | null> {
  const file = LockFile.open(path);
  if (file === null) return wait ? { release() {} } : null;
  for (let attempt = 0;; attempt++) {
    if (file.tryLock(exclusive)) break;
    if (!wait || attempt > 200) {
      file.close();
      if (!wait) return null;
      throw new Error(`timed out waiting for lock ${path}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return { release: () => file.close() };
}
