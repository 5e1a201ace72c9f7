/**
 * Writing without half-written destinations: data goes to a temporary
 * sibling (same directory, so the rename cannot cross filesystems) and is
 * renamed over the target only once complete. A failure removes the
 * temporary file and leaves the destination as it was. The target's
 * permission bits (and owner, when running as root) are preserved.
 *
 * @module
 */

/** A fresh, unlikely-to-collide temporary sibling path of `path`. */
export function tempSibling(path: string): string {
  const slash = path.lastIndexOf("/");
  const dir = path.slice(0, slash + 1);
  const name = path.slice(slash + 1);
  const tag = crypto.getRandomValues(new Uint8Array(6)).toHex();
  return `${dir}.${name}.exec-server-${tag}.tmp`;
}

/** Stat of `path` if it exists (following symlinks), else null. */
export async function statOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.stat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/** Copies permission bits (and ownership when root) from `from` to `to`. */
export async function copyAttributes(from: Deno.FileInfo, to: string): Promise<void> {
  if (from.mode !== null) await Deno.chmod(to, from.mode & 0o7777);
  if (Deno.uid() === 0 && from.uid !== null && from.gid !== null) {
    await Deno.chown(to, from.uid, from.gid).catch(() => {});
  }
}

/**
 * Resolves where a write to `path` lands: the target of a final symlink
 * (so the link itself is kept), or `path`.
 */
export async function writeTarget(path: string): Promise<string> {
  try {
    const info = await Deno.lstat(path);
    if (!info.isSymlink) return path;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return path;
    throw error;
  }
  try {
    return await Deno.realPath(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    // A dangling link: write where it points.
    const link = await Deno.readLink(path);
    return link.startsWith("/") ? link : path.slice(0, path.lastIndexOf("/") + 1) + link;
  }
}

/**
 * Runs `fill(tempPath)` to produce the new content, then renames it over
 * `target`. The temp file is removed on any failure.
 */
export async function replaceAtomically(
  target: string,
  fill: (tempPath: string) => Promise<void>,
): Promise<void> {
  const existing = await statOrNull(target);
  if (existing?.isDirectory) {
    throw new Deno.errors.IsADirectory(`Is a directory (os error 21)`);
  }
  const temp = tempSibling(target);
  try {
    await fill(temp);
    if (existing) await copyAttributes(existing, temp);
    await Deno.rename(temp, target);
  } catch (error) {
    await Deno.remove(temp).catch(() => {});
    throw error;
  }
}

/** Writes `data` to `path` atomically (see the module documentation). */
export async function writeFileAtomic(path: string, data: Uint8Array): Promise<void> {
  await replaceAtomically(
    await writeTarget(path),
    (temp) => Deno.writeFile(temp, data, { createNew: true }),
  );
}
