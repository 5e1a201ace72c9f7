/**
 * Client-named file handles (`fs/open`, `fs/readBlock`, `fs/writeBlock`,
 * `fs/close`), owned by one connection and released with it.
 *
 * Operations on one handle run in arrival order. A `replace` handle writes
 * to a temporary sibling that becomes the file only at `fs/close` (by
 * rename, or copied in place where a rename would lose what the file is:
 * see `atomic.ts`), so a dropped connection or a failed write never leaves a
 * half-written file. After a failed `fs/writeBlock` the handle is poisoned:
 * later writes fail with the first failure, and `fs/close` reports it and
 * discards the temporary file, leaving the destination untouched.
 *
 * Offsets are exact over the whole u64 range: beyond 2^63 - 1 (`off_t`) a
 * read or write fails with `Invalid argument (os error 22)`.
 *
 * @module
 */

import type { ExactU64 } from "../protocol/decode.ts";
import type { FsOpenMode } from "../protocol/types.ts";
import { commitReplacement, statOrNull, tempSibling } from "./atomic.ts";
import { writeAll } from "../util/conn_io.ts";
import { errnoOf } from "../util/os_error.ts";
import { errnoError, FsError, fsError, notAFile } from "./errors.ts";

/** Handles open at once per connection. */
export const MAX_HANDLES = 128;
/** Longest handle id, in UTF-8 bytes. */
export const MAX_HANDLE_ID_BYTES = 32;
/** Largest block read or written at once. */
export const MAX_BLOCK = 1024 * 1024;

interface Handle {
  readonly mode: FsOpenMode;
  readonly path: string;
  readonly file: Deno.FsFile;
  /** Temporary file of a replace handle. */
  readonly temp?: string;
  /** The first failed write of a replace handle (it is then never committed). */
  failure?: FsError;
  chain: Promise<unknown>;
}

/** The largest offset `lseek` accepts (`off_t` is signed 64-bit). */
const MAX_OFFSET = 0x7fff_ffff_ffff_ffffn;

const encoder = new TextEncoder();

function checkId(id: string): void {
  if (encoder.encode(id).length > MAX_HANDLE_ID_BYTES) {
    throw new FsError("invalid", `file handle ID must not exceed ${MAX_HANDLE_ID_BYTES} bytes`);
  }
}

/** A replace handle after a failed write: nothing of it will be committed. */
function poisoned(id: string, failure: FsError): FsError {
  return new FsError(
    failure.kind,
    `${failure.message}: an earlier fs/writeBlock on file handle \`${id}\` failed; ` +
      "the file was left unchanged",
    { cause: failure, detail: failure.detail },
  );
}

/**
 * Positions `file` at `offset` (at most `off_t`'s maximum); false when the
 * offset lies past the largest file the filesystem can hold (`lseek` says
 * `EINVAL` there, where `pread` reads nothing and `pwrite` says `EFBIG`).
 */
async function seek(file: Deno.FsFile, offset: ExactU64): Promise<boolean> {
  try {
    await file.seek(offset, Deno.SeekMode.Start);
    return true;
  } catch (error) {
    if (errnoOf(error) === 22) return false;
    throw error;
  }
}

function unknownHandle(id: string): FsError {
  return new FsError("not_found", `unknown file handle \`${id}\``);
}

/** The handles of one connection. */
export class FileHandleTable {
  /** Open handles, and handles being opened (settling to the handle, or undefined). */
  #handles = new Map<string, Handle | Promise<Handle | undefined>>();
  #disposed = false;

  /** True when `id` is open (or opening). */
  has(id: string): boolean {
    return this.#handles.has(id);
  }

  /** Number of open handles. */
  get size(): number {
    return this.#handles.size;
  }

  /** Opens `path` for reading, or (replace) prepares to write it. */
  async open(id: string, path: string, mode: FsOpenMode): Promise<void> {
    checkId(id);
    if (this.#handles.has(id)) {
      throw new FsError("invalid", `file handle \`${id}\` already exists`);
    }
    if (this.#handles.size >= MAX_HANDLES) {
      throw new FsError(
        "invalid",
        `at most ${MAX_HANDLES} file handles may be open per connection`,
      );
    }
    // Requests for this id that arrive while it opens wait for the outcome
    // (a client may pipeline fs/open and fs/readBlock).
    const opening = mode === "read" ? this.#openRead(path) : this.#openReplace(path);
    const settled = opening.then((handle) => handle, () => undefined);
    this.#handles.set(id, settled);
    try {
      const handle = await opening;
      if (this.#disposed) {
        await this.#release(handle);
        throw new FsError("internal", "connection closed");
      }
      this.#handles.set(id, handle);
    } catch (error) {
      if (this.#handles.get(id) === settled) this.#handles.delete(id);
      throw error;
    }
  }

  async #openRead(path: string): Promise<Handle> {
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(path);
    } catch (error) {
      throw fsError(error, path);
    }
    if (!info.isFile) throw notAFile(path);
    try {
      const file = await Deno.open(path, { read: true });
      return { mode: "read", path, file, chain: Promise.resolve() };
    } catch (error) {
      throw fsError(error, path);
    }
  }

  async #openReplace(path: string): Promise<Handle> {
    let previous: Deno.FileInfo | null;
    try {
      previous = await statOrNull(path);
    } catch (error) {
      throw fsError(error, path);
    }
    if (previous?.isDirectory) throw errnoError(21, path);
    // As the reference: a FIFO or socket cannot be opened without a reader
    // (ENXIO), and devices are not files.
    if (previous?.isFifo || previous?.isSocket) throw errnoError(6, path);
    if (previous && !previous.isFile) throw notAFile(path);
    const temp = tempSibling(path);
    try {
      const file = await Deno.open(temp, { write: true, createNew: true });
      return { mode: "replace", path, file, temp, chain: Promise.resolve() };
    } catch (error) {
      throw fsError(error, path);
    }
  }

  /** The handle `id`, once open; undefined when there is none. */
  async #find(id: string): Promise<Handle | undefined> {
    const entry = this.#handles.get(id);
    if (!(entry instanceof Promise)) return entry;
    await entry;
    // Settled: the open stored the handle (or removed the id on failure).
    const now = this.#handles.get(id);
    return now instanceof Promise ? undefined : now;
  }

  #enqueue<T>(handle: Handle, op: () => Promise<T>): Promise<T> {
    const run = handle.chain.then(op);
    handle.chain = run.catch(() => {});
    return run;
  }

  /**
   * Reads up to `len` bytes at `offset`; `eof` when fewer were available.
   * Like `pread`: an offset past what the filesystem can hold reads nothing.
   */
  async readBlock(
    id: string,
    offset: ExactU64,
    len: number,
  ): Promise<{ bytes: Uint8Array; eof: boolean }> {
    checkId(id);
    if (len < 1 || len > MAX_BLOCK) {
      throw new FsError("invalid", `file read block length must be between 1 and ${MAX_BLOCK}`);
    }
    const handle = await this.#find(id);
    if (handle === undefined) throw unknownHandle(id);
    if (handle.mode !== "read") throw errnoError(9, handle.path);
    // As `pread`: a range ending past `off_t`'s maximum is invalid.
    if (BigInt(offset) + BigInt(len) > MAX_OFFSET) throw errnoError(22, handle.path);
    return this.#enqueue(handle, async () => {
      try {
        if (!await seek(handle.file, offset)) return { bytes: new Uint8Array(0), eof: true };
        const buffer = new Uint8Array(len);
        let filled = 0;
        while (filled < len) {
          const n = await handle.file.read(buffer.subarray(filled));
          if (n === null || n === 0) break;
          filled += n;
        }
        return { bytes: filled === len ? buffer : buffer.slice(0, filled), eof: filled < len };
      } catch (error) {
        throw fsError(error, handle.path);
      }
    });
  }

  /**
   * Writes `bytes` at `offset` of a replace handle (holes read as zeros).
   * A failure poisons the handle (see the module documentation).
   */
  async writeBlock(id: string, offset: ExactU64, bytes: Uint8Array): Promise<void> {
    checkId(id);
    if (bytes.length < 1 || bytes.length > MAX_BLOCK) {
      throw new FsError("invalid", `file write block length must be between 1 and ${MAX_BLOCK}`);
    }
    const handle = await this.#find(id);
    // A read handle's id is unknown to writes (as in the reference).
    if (handle === undefined || handle.mode !== "replace") throw unknownHandle(id);
    if (BigInt(offset) + BigInt(bytes.length) > MAX_OFFSET) {
      throw new FsError("invalid", "file write range exceeds the signed 64-bit file offset limit");
    }
    return this.#enqueue(handle, async () => {
      if (handle.failure) throw poisoned(id, handle.failure);
      try {
        // Past what the filesystem can hold, as `pwrite` says it.
        if (!await seek(handle.file, offset)) throw errnoError(27, handle.path);
        await writeAll(handle.file, bytes);
      } catch (error) {
        handle.failure = fsError(error, handle.path);
        throw handle.failure;
      }
    });
  }

  /**
   * Closes a handle; a replace handle's file replaces its target now.
   * Closing an unknown id succeeds.
   */
  async close(id: string): Promise<void> {
    checkId(id);
    const handle = await this.#find(id);
    if (handle === undefined) return;
    this.#handles.delete(id);
    await handle.chain;
    if (handle.mode === "read") {
      handle.file.close();
      return;
    }
    handle.file.close();
    if (handle.failure) {
      await Deno.remove(handle.temp!).catch(() => {});
      throw poisoned(id, handle.failure);
    }
    try {
      await commitReplacement(handle.temp!, handle.path);
    } catch (error) {
      throw fsError(error, handle.path);
    }
  }

  async #release(handle: Handle): Promise<void> {
    await handle.chain;
    try {
      handle.file.close();
    } catch { /* already closed */ }
    // Uncommitted replacement: the target stays as it was.
    if (handle.temp) await Deno.remove(handle.temp).catch(() => {});
  }

  /** Closes everything; uncommitted replacements are discarded. */
  async dispose(): Promise<void> {
    this.#disposed = true;
    // Handles still opening are released by their open, which sees #disposed.
    const handles = [...this.#handles.values()].filter((h): h is Handle => !(h instanceof Promise));
    this.#handles.clear();
    await Promise.all(handles.map((h) => this.#release(h)));
  }
}
