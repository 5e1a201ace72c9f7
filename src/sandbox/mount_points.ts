/**
 * Mount points bubblewrap creates on the host for placeholders (a missing
 * path mounted read-only inside a writable bind exists on the host while a
 * sandbox runs). They are counted per path across every sandbox of this
 * server and removed, if still empty, when the last one using them ends.
 *
 * While held, such a path is "missing" to new plans
 * ({@linkcode isHeldMountPoint}): a plan that took it for a real directory
 * would bind it, and it could vanish under that sandbox.
 *
 * @module
 */

const users = new Map<string, number>();

/** True while `path` is a placeholder mount point some sandbox of this server holds. */
export function isHeldMountPoint(path: string): boolean {
  return users.has(path);
}

/**
 * Holds `paths` while `running` is pending, then removes those no other
 * sandbox still uses, if they are still empty (a directory or a file with
 * nothing in it: what bwrap made).
 */
export function holdMountPoints(paths: readonly string[], running: Promise<unknown>): void {
  if (paths.length === 0) return;
  for (const path of paths) users.set(path, (users.get(path) ?? 0) + 1);
  const release = () => {
    for (const path of paths) {
      const left = (users.get(path) ?? 1) - 1;
      if (left > 0) {
        users.set(path, left);
        continue;
      }
      users.delete(path);
      try {
        const info = Deno.lstatSync(path);
        if (info.isDirectory || (info.isFile && info.size === 0)) Deno.removeSync(path);
      } catch { /* gone, or not empty: leave it */ }
    }
  };
  running.then(release, release);
}
