/**
 * `fs/walk`: a bounded breadth-first listing (README, "Codex's executor-side features").
 *
 * Within a directory entries are sorted by name; the root is not listed.
 * Symlinks to files and dangling links are omitted; a link to a directory is
 * listed (and descended) only with `followDirectorySymlinks`, and a
 * directory reached twice is not descended again. Hidden directories are
 * listed but not descended with `pruneHiddenDirectories`. Unreadable
 * directories are reported in `errors`.
 *
 * @module
 */

import type { FsWalkOptions } from "../protocol/types.ts";
import { osErrorText } from "../util/os_error.ts";
import { FsError, withFsErrors } from "./errors.ts";

/** Hard limits of the options. */
export const WALK_LIMITS = { depth: 64, directories: 10_000, entries: 50_000 } as const;

/** One result entry (native path). */
export interface WalkEntry {
  /** Absolute path. */
  readonly path: string;
  /** Kind. */
  readonly kind: "directory" | "file";
}

/** A directory that could not be read. */
export interface WalkError {
  /** Absolute path. */
  readonly path: string;
  /** The OS error. */
  readonly message: string;
}

/** Result of {@linkcode walk}. */
export interface WalkResult {
  /** Entries, breadth-first. */
  readonly entries: WalkEntry[];
  /** Unreadable directories. */
  readonly errors: WalkError[];
  /** A limit stopped the walk. */
  readonly truncated: boolean;
}

/** Validates the limits with the reference's messages. */
export function checkWalkOptions(options: FsWalkOptions): void {
  if (options.maxDepth === 0 || options.maxDirectories === 0 || options.maxEntries === 0) {
    throw new FsError("invalid", "filesystem walk limits must be greater than zero");
  }
  if (
    options.maxDepth > WALK_LIMITS.depth || options.maxDirectories > WALK_LIMITS.directories ||
    options.maxEntries > WALK_LIMITS.entries
  ) {
    throw new FsError(
      "invalid",
      `filesystem walk limits exceed maximums: depth=${WALK_LIMITS.depth}, directories=${WALK_LIMITS.directories}, entries=${WALK_LIMITS.entries}`,
    );
  }
}

const FILE = 0x66; // "f"
const DIRECTORY = 0x64; // "d"
const SYMLINK = 0x6c; // "l"

/**
 * The entries of `dir` that may be listed, sorted by name, each as
 * `name + "\0" + type` (NUL cannot occur in a name and sorts first, so these
 * sort as the names do). Only the first `keep` are needed when no symlink
 * is among them (a symlink may still be dropped once followed): the list is
 * cut to them, plus one to show that the limit was reached, as it grows,
 * so a huge directory costs memory for `keep` names, not for all of its
 * entries.
 */
async function readSorted(dir: string, keep: number, followSymlinks: boolean): Promise<string[]> {
  const items: string[] = [];
  let symlinks = false;
  const compact = () => {
    items.sort();
    if (!symlinks && items.length > keep + 1) items.length = keep + 1;
  };
  for await (const entry of Deno.readDir(dir)) {
    let type: number;
    if (entry.isDirectory) type = DIRECTORY;
    else if (entry.isFile) type = FILE;
    else if (entry.isSymlink && followSymlinks) type = SYMLINK;
    else continue; // sockets, FIFOs, devices; symlinks when not followed
    if (type === SYMLINK) symlinks = true;
    items.push(`${entry.name}\0${String.fromCharCode(type)}`);
    if (!symlinks && items.length >= 2 * keep + 1024) compact();
  }
  compact();
  return items;
}

function key(info: Deno.FileInfo): string {
  return `${info.dev}:${info.ino}`;
}

/** Walks `root` (see the module documentation). */
export async function walk(root: string, options: FsWalkOptions): Promise<WalkResult> {
  checkWalkOptions(options);
  const rootInfo = await withFsErrors(root, () => Deno.stat(root));
  if (!rootInfo.isDirectory) {
    return {
      entries: [],
      errors: [{ path: root, message: "Not a directory (os error 20)" }],
      truncated: false,
    };
  }
  const entries: WalkEntry[] = [];
  const errors: WalkError[] = [];
  const visited = new Set<string>([key(rootInfo)]);
  let queue: Array<{ path: string; depth: number }> = [{ path: root, depth: 0 }];
  let descended = 0;
  while (queue.length > 0) {
    const next: typeof queue = [];
    for (const dir of queue) {
      if (descended >= options.maxDirectories) {
        return { entries, errors, truncated: true };
      }
      descended++;
      const remaining = options.maxEntries - entries.length;
      let listing: string[];
      try {
        listing = await readSorted(dir.path, remaining, options.followDirectorySymlinks);
      } catch (error) {
        errors.push({ path: dir.path, message: osErrorText(error) });
        continue;
      }
      const base = dir.path === "/" ? "" : dir.path;
      for (const item of listing) {
        const cut = item.length - 2;
        const name = item.slice(0, cut);
        const type = item.charCodeAt(cut + 1);
        const path = `${base}/${name}`;
        let isDirectory = type === DIRECTORY;
        let isFile = type === FILE;
        let info: Deno.FileInfo | null = null;
        if (type === SYMLINK) {
          try {
            info = await Deno.stat(path);
          } catch {
            continue; // dangling
          }
          if (!info.isDirectory) continue; // links to files are omitted
          isDirectory = true;
          isFile = false;
        }
        if (!isDirectory && !isFile) continue;
        if (entries.length >= options.maxEntries) return { entries, errors, truncated: true };
        entries.push({ path, kind: isDirectory ? "directory" : "file" });
        if (!isDirectory || dir.depth + 1 >= options.maxDepth) continue;
        if (options.pruneHiddenDirectories && name.startsWith(".")) continue;
        try {
          info ??= await Deno.stat(path);
        } catch (error) {
          errors.push({ path, message: osErrorText(error) });
          continue;
        }
        if (visited.has(key(info))) continue;
        visited.add(key(info));
        next.push({ path, depth: dir.depth + 1 });
      }
    }
    queue = next;
  }
  return { entries, errors, truncated: false };
}
