/**
 * Client-named file handles (`fs/open`, `fs/readBlock`, `fs/writeBlock`,
 * `fs/close`), owned by one connection and released with it.
 *
 * Operations on one handle run in arrival order. A `replace` handle writes
 * to a temporary sibling that becomes the file only at `fs/close`, so a
 * dropped connection or a failed write never leaves a half-written file.
 *
 * @module
 */

import type { FsOpenMode } from "../protocol/types.ts";
import { copyAttributes, statOrNull, tempSibling } from "./atomic.ts";
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
  /** The target existed (its attributes are copied on commit). */
  readonly previous?: Deno.FileInfo | null;
  chain: Promise<unknown>;
}

const encoder = new TextEncoder();

function checkId(id: string): void {
  if (encoder.encode(id).length > MAX_HANDLE_ID_BYTES) {
    throw new FsError("invalid", `file handle ID must not exceed ${MAX_HANDLE_ID_BYTES} bytes`);
  }
}

function unknownHandle(id: string): FsError {
  return new FsError("not_found", `unknown file handle \`${id}\``);
}

/** The handles of one connection. */
export class FileHandleTable {
  #handles = new Map<string, Handle | "opening">();
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
    this.#handles.set(id, "opening");
    try {
      const handle = mode === "read" ? await this.#openRead(path) : await this.#openReplace(path);
      if (this.#disposed) {
        await this.#release(handle);
        throw new FsError("internal", "connection closed");
      }
      this.#handles.set(id, handle);
    } catch (error) {
      this.#handles.delete(id);
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
    const temp = tempSibling(path);
    try {
      const file = await Deno.open(temp, { write: true, createNew: true });
      return { mode: "replace", path, file, temp, previous, chain: Promise.resolve() };
    } catch (error) {
      throw fsError(error, path);
    }
  }

  #get(id: string): Handle {
    const handle = this.#handles.get(id);
    if (handle === undefined || handle === "opening") throw unknownHandle(id);
    return handle;
  }

  #enqueue<T>(handle: Handle, op: () => Promise<T>): Promise<T> {
    const run = handle.chain.then(op);
    handle.chain = run.catch(() => {});
    return run;
  }

  /** Reads up to `len` bytes at `offset`; `eof` when fewer were available. */
  readBlock(id: string, offset: number, len: number): Promise<{ bytes: Uint8Array; eof: boolean }> {
    checkId(id);
    if (len < 1 || len > MAX_BLOCK) {
      throw new FsError("invalid", `file read block length must be between 1 and ${MAX_BLOCK}`);
    }
    const handle = this.#get(id);
    if (handle.mode !== "read") throw errnoError(9, handle.path);
    return this.#enqueue(handle, async () => {
      try {
        await handle.file.seek(offset, Deno.SeekMode.Start);
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

  /** Writes `bytes` at `offset` of a replace handle (holes read as zeros). */
  writeBlock(id: string, offset: number, bytes: Uint8Array): Promise<void> {
    checkId(id);
    if (bytes.length < 1 || bytes.length > MAX_BLOCK) {
      throw new FsError("invalid", `file write block length must be between 1 and ${MAX_BLOCK}`);
    }
    const handle = this.#handles.get(id);
    // A read handle's id is unknown to writes (as in the reference).
    if (handle === undefined || handle === "opening" || handle.mode !== "replace") {
      throw unknownHandle(id);
    }
    return this.#enqueue(handle, async () => {
      try {
        await handle.file.seek(offset, Deno.SeekMode.Start);
        let written = 0;
        while (written < bytes.length) written += await handle.file.write(bytes.subarray(written));
      } catch (error) {
        throw fsError(error, handle.path);
      }
    });
  }

  /**
   * Closes a handle; a replace handle's file replaces its target now.
   * Closing an unknown id succeeds.
   */
  async close(id: string): Promise<void> {
    checkId(id);
    const handle = this.#handles.get(id);
    if (handle === undefined || handle === "opening") return;
    this.#handles.delete(id);
    await handle.chain;
    if (handle.mode === "read") {
      handle.file.close();
      return;
    }
    try {
      handle.file.close();
      if (handle.previous) await copyAttributes(handle.previous, handle.temp!);
      await Deno.rename(handle.temp!, handle.path);
    } catch (error) {
      await Deno.remove(handle.temp!).catch(() => {});
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
    const handles = [...this.#handles.values()].filter((h): h is Handle => h !== "opening");
    this.#handles.clear();
    await Promise.all(handles.map((h) => this.#release(h)));
  }
}
