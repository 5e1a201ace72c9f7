/**
 * Changing the tree: `fs/createDirectory`, `fs/remove`, `fs/copy`.
 *
 * Copies never leave a half-written destination: files are copied to a
 * temporary sibling and renamed; a directory copied to a new destination is
 * built under a temporary name and renamed into place at the end. Merging
 * into an existing directory copies each file that way.
 *
 * @module
 */

import { replaceAtomically, statOrNull, tempSibling } from "./atomic.ts";
import { checkNoSymlinks, errnoError, FsError, fsError, withFsErrors } from "./errors.ts";

/** `fs/createDirectory`: recursive mode accepts an existing directory. */
export async function createDirectory(
  path: string,
  recursive: boolean,
  followSymlinks: boolean,
): Promise<void> {
  if (!followSymlinks) await checkNoSymlinks(path, errnoError(17, path));
  await withFsErrors(path, async () => {
    if (recursive) {
      const existing = await statOrNull(path);
      if (existing && !existing.isDirectory) throw errnoError(17, path);
    }
    await Deno.mkdir(path, { recursive });
  });
}

/** `fs/remove`: a symlink is removed as a link, never followed. */
export async function removePath(
  path: string,
  options: { recursive: boolean; force: boolean; followSymlinks: boolean },
): Promise<void> {
  if (!options.followSymlinks) {
    if (options.recursive) {
      throw new FsError("internal", "recursive no-follow removal is unsupported");
    }
    await checkNoSymlinks(path, null).catch((error) => {
      if (options.force && error instanceof FsError && error.kind === "not_found") return;
      throw error;
    });
  }
  try {
    const info = await Deno.lstat(path);
    // Never recurse through a link: remove the link itself.
    await Deno.remove(path, { recursive: options.recursive && info.isDirectory });
  } catch (error) {
    if (options.force && error instanceof Deno.errors.NotFound) return;
    throw fsError(error, path);
  }
}

function unsupportedType(path: string): FsError {
  return new FsError(
    "invalid",
    `fs/copy only supports regular files, directories, and symlinks: ${path}`,
  );
}

async function copyFileAtomic(source: string, destination: string): Promise<void> {
  await replaceAtomically(destination, (temp) => Deno.copyFile(source, temp));
}

async function copySymlink(source: string, destination: string): Promise<void> {
  const target = await Deno.readLink(source);
  const temp = tempSibling(destination);
  try {
    await Deno.symlink(target, temp);
    await Deno.rename(temp, destination);
  } catch (error) {
    await Deno.remove(temp).catch(() => {});
    throw error;
  }
}

/** Copies the contents of `source` (a directory) into `destination` (existing). */
async function copyTreeInto(source: string, destination: string): Promise<void> {
  for await (const entry of Deno.readDir(source)) {
    const from = `${source}/${entry.name}`;
    const to = `${destination}/${entry.name}`;
    const info = await Deno.lstat(from);
    if (info.isSymlink) {
      await copySymlink(from, to);
    } else if (info.isFile) {
      await copyFileAtomic(from, to);
    } else if (info.isDirectory) {
      const existing = await statOrNull(to);
      if (!existing) await Deno.mkdir(to, { mode: info.mode ?? 0o755 });
      else if (!existing.isDirectory) throw errnoError(17, to);
      await copyTreeInto(from, to);
    } else {
      throw unsupportedType(from);
    }
  }
}

async function resolveDestination(destination: string): Promise<string> {
  try {
    return await Deno.realPath(destination);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    const slash = destination.lastIndexOf("/");
    const parent = await Deno.realPath(destination.slice(0, slash) || "/");
    return `${parent === "/" ? "" : parent}/${destination.slice(slash + 1)}`;
  }
}

/** `fs/copy` (see the module documentation). */
export async function copyPath(
  source: string,
  destination: string,
  recursive: boolean,
): Promise<void> {
  const info = await withFsErrors(source, () => Deno.lstat(source));
  if (info.isSymlink) {
    await withFsErrors(destination, () => copySymlink(source, destination));
    return;
  }
  if (info.isFile) {
    await withFsErrors(destination, () => copyFileAtomic(source, destination));
    return;
  }
  if (!info.isDirectory) throw unsupportedType(source);
  if (!recursive) {
    throw new FsError("invalid", "fs/copy requires recursive: true when sourcePath is a directory");
  }
  const realSource = await withFsErrors(source, () => Deno.realPath(source));
  const realDestination = await withFsErrors(destination, () => resolveDestination(destination));
  if (realDestination === realSource || realDestination.startsWith(realSource + "/")) {
    throw new FsError(
      "invalid",
      "fs/copy cannot copy a directory to itself or one of its descendants",
    );
  }
  await withFsErrors(destination, async () => {
    const existing = await statOrNull(destination);
    if (existing) {
      if (!existing.isDirectory) throw errnoError(17, destination);
      await copyTreeInto(source, destination);
      return;
    }
    const temp = tempSibling(destination);
    try {
      await Deno.mkdir(temp, { mode: info.mode ?? 0o755 });
      await copyTreeInto(source, temp);
      await Deno.rename(temp, destination);
    } catch (error) {
      await Deno.remove(temp, { recursive: true }).catch(() => {});
      throw error;
    }
  });
}
