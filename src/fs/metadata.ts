/**
 * Inspecting paths: `fs/getMetadata`, `fs/canonicalize`, `fs/readDirectory`.
 *
 * @module
 */

import { lstatNow, quickLstat, quickStat } from "./quick_meta.ts";
import type { FsDirectoryEntry, FsMetadata } from "../protocol/types.ts";
import { checkNoSymlinks, FsError, fsError, withFsErrors } from "./errors.ts";

/** Most entries `fs/readDirectory` returns. */
export const READ_DIRECTORY_LIMIT = 50_000;

function describe(info: Deno.FileInfo, isSymlink: boolean): FsMetadata {
  return {
    isDirectory: info.isDirectory,
    isFile: info.isFile,
    isSymlink,
    size: info.size,
    createdAtMs: info.birthtime?.getTime() ?? 0,
    modifiedAtMs: info.mtime?.getTime() ?? 0,
  };
}

/**
 * Metadata of `path`: with `followSymlinks`, type, size and times describe
 * the target while `isSymlink` tells whether the path itself is a link.
 */
export function getMetadata(
  path: string,
  followSymlinks: boolean,
): FsMetadata | Promise<FsMetadata> {
  if (followSymlinks) {
    // The common case, answered at once: a path that is not a link, on a
    // filesystem where the call may run on the main thread.
    let link: Deno.FileInfo | undefined;
    try {
      link = lstatNow(path);
    } catch (error) {
      throw fsError(error, path);
    }
    if (link !== undefined && !link.isSymlink) return describe(link, false);
  }
  return getMetadataAsync(path, followSymlinks);
}

async function getMetadataAsync(path: string, followSymlinks: boolean): Promise<FsMetadata> {
  if (!followSymlinks) {
    await checkNoSymlinks(
      path,
      new FsError("invalid", "path contains a symbolic link"),
    );
    return describe(await withFsErrors(path, () => quickLstat(path)), false);
  }
  const link = await withFsErrors(path, () => quickLstat(path));
  const info = link.isSymlink ? await withFsErrors(path, () => quickStat(path)) : link;
  return describe(info, link.isSymlink);
}

/** The fully resolved real path. */
export function canonicalize(path: string): Promise<string> {
  return withFsErrors(path, () => Deno.realPath(path));
}

/**
 * Directory entries in OS order; symlinks report their target's type and
 * dangling ones are left out. More than the limit is an error.
 */
export async function readDirectory(
  path: string,
  limit = READ_DIRECTORY_LIMIT,
): Promise<FsDirectoryEntry[]> {
  return await withFsErrors(path, async () => {
    const entries: FsDirectoryEntry[] = [];
    let count = 0;
    for await (const entry of Deno.readDir(path)) {
      if (++count > limit) {
        throw new FsError(
          "internal",
          `fs/readDirectory returned ${count} entries; limit is ${limit}`,
        );
      }
      let { isDirectory, isFile } = entry;
      if (entry.isSymlink) {
        try {
          const target = await Deno.stat(`${path === "/" ? "" : path}/${entry.name}`);
          isDirectory = target.isDirectory;
          isFile = target.isFile;
        } catch {
          continue; // dangling (or unreadable) link: omitted
        }
      }
      entries.push({ fileName: entry.name, isDirectory, isFile });
    }
    return entries;
  });
}

/** Whether `path` exists (a final symlink counts, dangling or not). */
export async function lexists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}
