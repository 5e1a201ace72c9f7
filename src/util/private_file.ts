/**
 * Small private files (caches, credentials): read whole up to a bound, and
 * written atomically with mode 0600 — a temporary sibling created anew
 * (never following a planted file), then renamed over the destination, so
 * a reader sees the old content or the new, never half of it.
 *
 * @module
 */

/**
 * The bytes of `path`, or null when it is missing. Throws
 * {@linkcode PrivateFileTooLarge} past `maxBytes` and when it is not a
 * regular file; other errors as the file system reports them.
 */
export async function readBoundedFile(path: string, maxBytes: number): Promise<Uint8Array | null> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  try {
    const info = await file.stat();
    if (!info.isFile) throw new PrivateFileTooLarge(path, "is not a regular file");
    if (info.size > maxBytes) {
      throw new PrivateFileTooLarge(path, `is larger than ${maxBytes} bytes`);
    }
    const bytes = new Uint8Array(info.size);
    let at = 0;
    while (at < bytes.length) {
      const n = await file.read(bytes.subarray(at));
      if (n === null) break;
      at += n;
    }
    return bytes.subarray(0, at);
  } finally {
    file.close();
  }
}

/** A file that is not a regular file or is over its bound. */
export class PrivateFileTooLarge extends Error {
  /** `path` `problem` (`is larger than N bytes`). */
  constructor(path: string, problem: string) {
    super(`${path} ${problem}`);
    this.name = "PrivateFileTooLarge";
  }
}

/** Replaces `path` with `text` (mode 0600), creating its directory (0700) when missing. */
export async function writePrivateFileAtomic(path: string, text: string): Promise<void> {
  const dir = path.slice(0, path.lastIndexOf("/")) || "/";
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(tmp, text, { mode: 0o600, createNew: true });
    await Deno.rename(tmp, path);
  } catch (error) {
    await Deno.remove(tmp).catch(() => {});
    throw error;
  }
}
