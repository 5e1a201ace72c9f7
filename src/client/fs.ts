/**
 * Files on the server, in the shapes of `Deno`'s file APIs: `stat` and
 * `lstat` give `Deno.FileInfo`-like objects, `readDir` an async iterable of
 * `Deno.DirEntry`-like entries, and failures are `Deno.errors` classes
 * (`NotFound`, `PermissionDenied`, `AlreadyExists`, …) that carry the
 * JSON-RPC error (`rpcCode`, `cause`). The protocol's own shapes stay
 * available (`metadata`, `readDirectory`). Paths are strings or `URL`s
 * (converted to `file:` URIs). Files of any size: above a threshold, reads
 * and writes stream through handles (`fs/open`, `fs/readBlock`,
 * `fs/writeBlock`) instead of one message.
 *
 * @module
 */

import type { MethodParams, MethodResult, RequestFn } from "../protocol/spec.ts";
import { Method, type MethodName } from "../protocol/methods.ts";
import { RpcError } from "../jsonrpc/errors.ts";
import { toPathUri } from "../protocol/path_uri.ts";
import type {
  FileSystemSandboxContext,
  FsDirectoryEntry,
  FsMetadata,
  FsWalkOptions,
  FsWalkResult,
} from "../protocol/types.ts";

/** What the file API needs from the client. */
export interface FsLink {
  /** Sends a request. */
  readonly request: RequestFn;
  /** True when the server advertises a capability. */
  supports(capability: string): boolean;
}

/** A path on the server. */
export type RemotePath = string | URL;

/** `Deno.FileInfo`'s common part, for a path on the server. */
export interface RemoteFileInfo {
  /** A regular file. */
  readonly isFile: boolean;
  /** A directory. */
  readonly isDirectory: boolean;
  /** A symbolic link (`lstat`; `stat` describes the target). */
  readonly isSymlink: boolean;
  /** Size in bytes. */
  readonly size: number;
  /** Last modification, when known. */
  readonly mtime: Date | null;
  /** Creation, when the server knows it. */
  readonly birthtime: Date | null;
}

/** `Deno.DirEntry`, for an entry of a directory on the server. */
export interface RemoteDirEntry {
  /** The entry's name. */
  readonly name: string;
  /** A regular file. */
  readonly isFile: boolean;
  /** A directory. */
  readonly isDirectory: boolean;
  /** A symbolic link (then `isFile` and `isDirectory` are false, as with `Deno.readDir`). */
  readonly isSymlink: boolean;
}

/** A failed file operation: the JSON-RPC error behind a `Deno.errors` class. */
export interface RemoteFsFailure {
  /** The JSON-RPC error code (`-32004` not found, `-32600`, `-32603`). */
  readonly rpcCode: number;
}

/** Not found on the server (`-32004`). */
export class RemoteNotFound extends Deno.errors.NotFound implements RemoteFsFailure {
  /** The JSON-RPC code. */
  readonly rpcCode: number;
  /** Wraps the server's answer. */
  constructor(error: RpcError) {
    super(error.message, { cause: error });
    this.rpcCode = error.code;
  }
}

/** Refused by the server's OS (`Permission denied`, `Operation not permitted`). */
export class RemotePermissionDenied extends Deno.errors.PermissionDenied
  implements RemoteFsFailure {
  /** The JSON-RPC code. */
  readonly rpcCode: number;
  /** Wraps the server's answer. */
  constructor(error: RpcError) {
    super(error.message, { cause: error });
    this.rpcCode = error.code;
  }
}

/** The path exists already (`File exists`). */
export class RemoteAlreadyExists extends Deno.errors.AlreadyExists implements RemoteFsFailure {
  /** The JSON-RPC code. */
  readonly rpcCode: number;
  /** Wraps the server's answer. */
  constructor(error: RpcError) {
    super(error.message, { cause: error });
    this.rpcCode = error.code;
  }
}

/** A directory where a file was expected (`Is a directory`). */
export class RemoteIsADirectory extends Deno.errors.IsADirectory implements RemoteFsFailure {
  /** The JSON-RPC code. */
  readonly rpcCode: number;
  /** Wraps the server's answer. */
  constructor(error: RpcError) {
    super(error.message, { cause: error });
    this.rpcCode = error.code;
  }
}

/** A file where a directory was expected (`Not a directory`). */
export class RemoteNotADirectory extends Deno.errors.NotADirectory implements RemoteFsFailure {
  /** The JSON-RPC code. */
  readonly rpcCode: number;
  /** Wraps the server's answer. */
  constructor(error: RpcError) {
    super(error.message, { cause: error });
    this.rpcCode = error.code;
  }
}

const ERROR_CLASSES: Array<[RegExp | number, new (error: RpcError) => Error]> = [
  [-32004, RemoteNotFound],
  [/^Permission denied|^Operation not permitted/, RemotePermissionDenied],
  [/^File exists/, RemoteAlreadyExists],
  [/^Is a directory/, RemoteIsADirectory],
  [/^Not a directory/, RemoteNotADirectory],
];

/** True for an error the server answered (an `RpcError`, or one mapped to `Deno.errors`). */
export function isRemoteFailure(error: unknown): error is Error {
  return error instanceof RpcError ||
    (error instanceof Error && typeof (error as Partial<RemoteFsFailure>).rpcCode === "number");
}

/** `error` as a `Deno.errors` class when one fits; otherwise unchanged. */
export function asDenoError(error: unknown): unknown {
  if (!(error instanceof RpcError)) return error;
  for (const [match, Class] of ERROR_CLASSES) {
    if (typeof match === "number" ? error.code === match : match.test(error.message)) {
      return new Class(error);
    }
  }
  return error;
}

function fileInfo(meta: FsMetadata, link: boolean): RemoteFileInfo {
  const symlink = link && meta.isSymlink;
  return {
    isFile: !symlink && meta.isFile,
    isDirectory: !symlink && meta.isDirectory,
    isSymlink: symlink,
    size: meta.size,
    mtime: meta.modifiedAtMs > 0 ? new Date(meta.modifiedAtMs) : null,
    birthtime: meta.createdAtMs > 0 ? new Date(meta.createdAtMs) : null,
  };
}

/** Files larger than this move in blocks rather than in one message. */
export const WHOLE_FILE_LIMIT = 32 * 1024 * 1024;
const BLOCK = 1024 * 1024;
const READ_AHEAD = 4;

/** An open remote file. */
export interface RemoteFile extends AsyncDisposable {
  /** The file's bytes from the start (read handles). */
  readonly readable: ReadableStream<Uint8Array>;
  /** Bytes written in order; the file is replaced when the stream closes (write handles). */
  readonly writable: WritableStream<Uint8Array>;
  /** Closes the handle (a write handle commits its file). */
  close(): Promise<void>;
}

let handleCounter = 0;

function newHandleId(): string {
  // ≤ 32 bytes: the protocol's limit.
  return `h${(++handleCounter).toString(36)}-${crypto.randomUUID().slice(0, 18)}`;
}

/** See the module documentation. */
export class RemoteFs {
  #link: FsLink;
  #sandbox: FileSystemSandboxContext | null;

  /** Use `client.fs`. */
  constructor(link: FsLink, sandbox: FileSystemSandboxContext | null = null) {
    this.#link = link;
    this.#sandbox = sandbox;
  }

  /**
   * The same files seen through `sandbox`: every request carries it, so the
   * server performs each operation inside that sandbox (what it refuses
   * fails with the OS error, e.g. `Read-only file system (os error 30)`).
   *
   * @example Writes confined to one directory
   * ```ts ignore
   * const confined = client.fs.confined({
   *   permissions: {
   *     type: "managed",
   *     file_system: {
   *       type: "restricted",
   *       entries: [{ path: { type: "path", path: "file:///work" }, access: "write" }],
   *     },
   *     network: "restricted",
   *   },
   *   windowsSandboxLevel: "disabled",
   * });
   * await confined.writeFile("/work/a.txt", new TextEncoder().encode("ok"));
   * ```
   */
  confined(sandbox: FileSystemSandboxContext): RemoteFs {
    return new RemoteFs(this.#link, sandbox);
  }

  async #call<M extends MethodName>(
    method: M,
    params: MethodParams<M>,
  ): Promise<MethodResult<M>> {
    try {
      // A confined view adds its sandbox to every call that takes one.
      const withSandbox = this.#sandbox &&
        !(params !== undefined && "handleId" in params && method !== Method.FsOpen);
      return await this.#link.request(
        method,
        withSandbox ? { ...params, sandbox: this.#sandbox } as MethodParams<M> : params,
      );
    } catch (error) {
      throw asDenoError(error);
    }
  }

  /**
   * The protocol's metadata (`fs/getMetadata`): with `followSymlinks`
   * (default) type, size and times describe the target and `isSymlink`
   * tells whether the path itself is a link.
   */
  metadata(path: RemotePath, options: { followSymlinks?: boolean } = {}): Promise<FsMetadata> {
    return this.#call("fs/getMetadata", {
      path: toPathUri(path),
      ...(options.followSymlinks === false ? { followSymlinks: false } : {}),
    });
  }

  /** Like `Deno.stat`: a symlink is followed. */
  async stat(path: RemotePath): Promise<RemoteFileInfo> {
    return fileInfo(await this.metadata(path), false);
  }

  /** Like `Deno.lstat`: a symlink is reported as a link (a dangling one too). */
  async lstat(path: RemotePath): Promise<RemoteFileInfo> {
    try {
      return fileInfo(await this.metadata(path), true);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Missing, or a link to something missing: the path itself decides.
      const dangling = await this.metadata(path, { followSymlinks: false }).then(
        () => false,
        (e) => e instanceof Error && e.message === "path contains a symbolic link",
      );
      if (!dangling) throw error;
      return {
        isFile: false,
        isDirectory: false,
        isSymlink: true,
        size: 0,
        mtime: null,
        birthtime: null,
      };
    }
  }

  /** True when the path exists (a dangling symlink counts as missing, as `Deno.stat`). */
  async exists(path: RemotePath): Promise<boolean> {
    try {
      await this.metadata(path);
      return true;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  }

  /** The whole file (streams through a handle when large). */
  async readFile(path: RemotePath): Promise<Uint8Array> {
    const meta = await this.stat(path);
    if (meta.isFile && meta.size > WHOLE_FILE_LIMIT) {
      await using file = await this.open(path);
      return new Uint8Array(await new Response(file.readable).arrayBuffer());
    }
    const { dataBase64 } = await this.#call("fs/readFile", {
      path: toPathUri(path),
    });
    return Uint8Array.fromBase64(dataBase64);
  }

  /** The whole file as UTF-8 text. */
  async readTextFile(path: RemotePath): Promise<string> {
    return new TextDecoder().decode(await this.readFile(path));
  }

  /** Creates or replaces a file (atomically on servers of this package). */
  async writeFile(path: RemotePath, data: Uint8Array | ReadableStream<Uint8Array>): Promise<void> {
    if (data instanceof ReadableStream || data.length > WHOLE_FILE_LIMIT) {
      await using file = await this.open(path, { write: true });
      const source = data instanceof ReadableStream ? data : ReadableStream.from([data]);
      await source.pipeTo(file.writable);
      return;
    }
    await this.#call("fs/writeFile", { path: toPathUri(path), dataBase64: data.toBase64() });
  }

  /** Writes UTF-8 text. */
  writeTextFile(path: RemotePath, text: string): Promise<void> {
    return this.writeFile(path, new TextEncoder().encode(text));
  }

  /**
   * The protocol's listing (`fs/readDirectory`): symlinks report their
   * target's type, dangling ones are left out.
   */
  async readDirectory(path: RemotePath): Promise<FsDirectoryEntry[]> {
    const { entries } = await this.#call("fs/readDirectory", {
      path: toPathUri(path),
    });
    return entries;
  }

  /**
   * Like `Deno.readDir`: the entries with `isSymlink` (found with one
   * metadata request per entry, 32 at a time); dangling links are left out,
   * as the protocol's listing leaves them out.
   */
  async *readDir(path: RemotePath): AsyncIterable<RemoteDirEntry> {
    const dir = toPathUri(path).replace(/\/+$/, "");
    const entries = await this.readDirectory(path);
    for (let i = 0; i < entries.length; i += 32) {
      const batch = entries.slice(i, i + 32);
      const metas = await Promise.all(
        batch.map((e) =>
          this.metadata(`${dir}/${encodeURIComponent(e.fileName)}`).catch(() => null)
        ),
      );
      for (const [j, e] of batch.entries()) {
        const link = metas[j]?.isSymlink ?? false;
        yield {
          name: e.fileName,
          isFile: !link && e.isFile,
          isDirectory: !link && e.isDirectory,
          isSymlink: link,
        };
      }
    }
  }

  /**
   * Like `Deno.rename`, as a copy then a removal (the protocol has no
   * rename): not atomic, and the source is removed only once the copy is
   * complete.
   */
  async rename(from: RemotePath, to: RemotePath): Promise<void> {
    await this.copy(from, to, { recursive: true });
    await this.remove(from, { recursive: true });
  }

  /** Creates a directory (`recursive` like `Deno.mkdir`, default false). */
  async mkdir(path: RemotePath, options: { recursive?: boolean } = {}): Promise<void> {
    await this.#call("fs/createDirectory", {
      path: toPathUri(path),
      recursive: options.recursive ?? false,
    });
  }

  /** Removes a path (like `Deno.remove`: not recursive and missing is an error by default). */
  async remove(
    path: RemotePath,
    options: { recursive?: boolean; force?: boolean } = {},
  ): Promise<void> {
    await this.#call("fs/remove", {
      path: toPathUri(path),
      recursive: options.recursive ?? false,
      force: options.force ?? false,
    });
  }

  /** Copies a file, a symlink, or (recursive) a directory. */
  async copy(
    from: RemotePath,
    to: RemotePath,
    options: { recursive?: boolean } = {},
  ): Promise<void> {
    await this.#call("fs/copy", {
      sourcePath: toPathUri(from),
      destinationPath: toPathUri(to),
      recursive: options.recursive ?? false,
    });
  }

  /** The resolved real path (a `file:` URI). */
  async realPath(path: RemotePath): Promise<string> {
    const { path: resolved } = await this.#call("fs/canonicalize", {
      path: toPathUri(path),
    });
    return resolved;
  }

  /** A bounded breadth-first listing. */
  walk(path: RemotePath, options: Partial<FsWalkOptions> = {}): Promise<FsWalkResult> {
    return this.#call("fs/walk", {
      path: toPathUri(path),
      options: {
        maxDepth: options.maxDepth ?? 64,
        maxDirectories: options.maxDirectories ?? 10_000,
        maxEntries: options.maxEntries ?? 50_000,
        followDirectorySymlinks: options.followDirectorySymlinks ?? false,
        pruneHiddenDirectories: options.pruneHiddenDirectories ?? false,
      },
    });
  }

  /** Opens a file for streaming reads, or (`write: true`) to replace it. */
  async open(path: RemotePath, options: { write?: boolean } = {}): Promise<RemoteFile> {
    const handleId = newHandleId();
    const write = options.write ?? false;
    await this.#call("fs/open", {
      handleId,
      path: toPathUri(path),
      mode: write ? "replace" : "read",
    });
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      await this.#call("fs/close", { handleId });
    };
    let offset = 0;
    let eof = false;
    const inFlight: Array<Promise<{ chunk: string; eof: boolean }>> = [];
    const readable = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (write) throw new TypeError("this handle was opened for writing");
        // Keep a few blocks in flight: the server answers in order per handle.
        while (!eof && inFlight.length < READ_AHEAD) {
          inFlight.push(this.#call("fs/readBlock", { handleId, offset, len: BLOCK }));
          offset += BLOCK;
        }
        const next = inFlight.shift();
        if (!next) {
          controller.close();
          await close();
          return;
        }
        const block = await next;
        if (block.eof) {
          eof = true;
          await Promise.allSettled(inFlight.splice(0));
        }
        if (block.chunk.length > 0) controller.enqueue(Uint8Array.fromBase64(block.chunk));
        if (eof) {
          controller.close();
          await close();
        }
      },
      cancel: () => close(),
    });
    let written = 0;
    const writable = new WritableStream<Uint8Array>({
      write: async (chunk) => {
        if (!write) throw new TypeError("this handle was opened for reading");
        for (let start = 0; start < chunk.length; start += BLOCK) {
          const block = chunk.subarray(start, start + BLOCK);
          await this.#call("fs/writeBlock", { handleId, offset: written, chunk: block.toBase64() });
          written += block.length;
        }
      },
      close: () => close(),
      abort: () => close(),
    });
    return { readable, writable, close, [Symbol.asyncDispose]: close };
  }
}
