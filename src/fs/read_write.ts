/**
 * Whole-file reads and writes (`fs/readFile`, `fs/writeFile`).
 *
 * @module
 */

import { quickStat } from "./quick_meta.ts";
import { writeFileAtomic } from "./atomic.ts";
import { SpareBuffer } from "../util/spare_buffer.ts";
import { checkNoSymlinks, errnoError, FsError, fsError, notAFile, withFsErrors } from "./errors.ts";

/** The largest file `fs/readFile` returns (512 MiB). */
export const READ_FILE_LIMIT = 512 * 1024 * 1024;

/** Bytes of base64 for `n` bytes of data. */
export function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}

/** Options of {@linkcode readFileChecked}. */
export interface ReadFileOptions {
  /** Follow a final symlink. */
  readonly followSymlinks: boolean;
  /** Largest file accepted. */
  readonly limit?: number;
  /**
   * Largest base64 payload the transport can carry in one message; larger
   * files fail at once, pointing to handle-based reads.
   */
  readonly maxPayloadBytes?: number;
}

/** Reads a regular file whole, enforcing the protocol's rules and limits. */
export async function readFileChecked(path: string, options: ReadFileOptions): Promise<Uint8Array> {
  if (!options.followSymlinks) await checkNoSymlinks(path, errnoError(40, path));
  const info = await withFsErrors(path, () => quickStat(path));
  if (!info.isFile) throw notAFile(path);
  const limit = options.limit ?? READ_FILE_LIMIT;
  if (info.size > limit) {
    throw new FsError("invalid", `file is too large to read: limit is ${limit} bytes`);
  }
  if (options.maxPayloadBytes !== undefined && base64Length(info.size) > options.maxPayloadBytes) {
    throw new FsError(
      "invalid",
      `file ${path} is ${info.size} bytes; its base64 would exceed this connection's ${options.maxPayloadBytes}-byte message limit: ` +
        "read it in blocks with fs/open and fs/readBlock",
    );
  }
  try {
    return await readWhole(path, info.size, limit);
  } catch (error) {
    if (error instanceof FsError) throw error;
    throw fsError(error, path);
  }
}

/**
 * The buffer of the last large read given back, for the next one: at most
 * twice the size asked for (it is held until the reply is encoded).
 */
const readSpare = new SpareBuffer({ maxWaste: 2 });

/**
 * A buffer for reading `size` bytes (and one more): a fresh 64 MiB buffer is
 * 16 384 page faults when the read fills it — most of the CPU of a large
 * `fs/readFile` on a virtual machine; a reused one is already in memory.
 */
function readBuffer(size: number): Uint8Array {
  return readSpare.take(size + 1);
}

/**
 * Gives back the buffer of bytes {@linkcode readFileChecked} returned, once
 * nothing reads them any more (the reply that carried them is encoded): the
 * next large read may fill it. Bytes that did not come from a read, or were
 * given back already, are ignored.
 */
export function releaseReadBuffer(bytes: Uint8Array): void {
  readSpare.give(bytes);
}

/**
 * The file's bytes, read into one buffer sized from `size` (grown if the
 * file grew meanwhile, up to `limit`). `Deno.readFile` reads into memory of
 * its own and copies that into the buffer it returns: twice the memory, and
 * for a large file tens of thousands more page faults.
 */
async function readWhole(path: string, size: number, limit: number): Promise<Uint8Array> {
  using file = await Deno.open(path, { read: true });
  // One byte more than expected: a read that fills it means the file grew.
  let buffer = readBuffer(size);
  let length = 0;
  try {
    for (;;) {
      if (length === buffer.length) {
        if (length > limit) {
          throw new FsError("invalid", `file is too large to read: limit is ${limit} bytes`);
        }
        const grown = new Uint8Array(Math.min(limit + 1, buffer.length * 2));
        grown.set(buffer);
        releaseReadBuffer(buffer);
        buffer = grown;
      }
      const n = await file.read(buffer.subarray(length));
      if (n === null) break;
      length += n;
    }
  } catch (error) {
    releaseReadBuffer(buffer);
    throw error;
  }
  return buffer.subarray(0, length);
}

/** Writes a file atomically (temporary sibling, then rename). */
export async function writeFileChecked(
  path: string,
  data: Uint8Array,
  followSymlinks: boolean,
): Promise<void> {
  if (!followSymlinks) await checkNoSymlinks(path, errnoError(40, path));
  await withFsErrors(path, () => writeFileAtomic(path, data));
}
