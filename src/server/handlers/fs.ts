/**
 * `fs/*` methods: decode, call into `src/fs` (or, with a `sandbox`, forward
 * into a worker confined by it: `src/sandbox/fs_gateway.ts`), encode.
 *
 * @module
 */

import { RpcError } from "../../jsonrpc/errors.ts";
import { releaseDecoded } from "../../jsonrpc/large_message.ts";
import { FileHandleTable } from "../../fs/handles.ts";
import { canonicalize, getMetadata, readDirectory } from "../../fs/metadata.ts";
import { readFileChecked, releaseReadBuffer, writeFileChecked } from "../../fs/read_write.ts";
import { copyPath, createDirectory, removePath } from "../../fs/tree.ts";
import { walk } from "../../fs/walk.ts";
import { MissingPathWatch } from "../../fs/watch_missing.ts";
import { decodeStrictBase64 } from "../../protocol/decode.ts";
import { ErrorCode, internalError, invalidRequest } from "../../protocol/errors.ts";
import { Method, ServerNotification } from "../../protocol/methods.ts";
import type { MethodName, MethodResult } from "../../protocol/spec.ts";
import { pathToUri } from "../../protocol/path_uri.ts";
import type {
  FileSystemSandboxContext,
  FsCanonicalizeResult,
  FsMetadata,
  FsMissingChangedNotification,
  FsOpenResult,
  FsReadBlockResult,
  FsReadDirectoryResult,
  FsWalkResult,
  FsWatchMissingResult,
} from "../../protocol/types.ts";
import { defineMethods, type HandlerContext, type MethodTable } from "../handler.ts";
import type { SandboxFsGateway } from "../../sandbox/fs_gateway.ts";
import type { SandboxPlan } from "../../sandbox/policy.ts";
import { planFor, plannerFor } from "./sandbox_plan.ts";
import { ResourceKey } from "../resource_scope.ts";
import { Base64Part, RawJson } from "../../jsonrpc/message.ts";

/** Room left in a message for the envelope around a file's base64. */
const ENVELOPE_BYTES = 256;

const HANDLES = new ResourceKey("fs.handles", () => new FileHandleTable());
const WATCH = new ResourceKey("fs.watchMissing", (connection) =>
  new MissingPathWatch((watchId) => {
    const params: FsMissingChangedNotification = { watchId };
    connection.notify(ServerNotification.FsMissingChanged, params);
  }));

/**
 * Runs `method` inside `sandbox` when it needs one (see
 * {@linkcode planFor}); undefined when it runs here.
 */
function inSandbox<M extends MethodName>(
  ctx: HandlerContext,
  sandbox: FileSystemSandboxContext | null | undefined,
  access: "read" | "write",
  method: M,
  params: () => Record<string, unknown>,
): Promise<MethodResult<M>> | undefined {
  const plan = plannerFor(sandbox, access);
  return plan ? ctx.server.sandboxFs.call<MethodResult<M>>(plan, method, params()) : undefined;
}

let remoteHandles = 0;

/** A connection's handles opened inside sandboxes: id → the worker's handle. */
class SandboxHandles {
  readonly #open = new Map<string, SandboxedHandle>();

  get(id: string): SandboxedHandle | undefined {
    return this.#open.get(id);
  }

  has(id: string): boolean {
    return this.#open.has(id);
  }

  async open(
    gateway: SandboxFsGateway,
    plan: () => SandboxPlan,
    id: string,
    params: Record<string, unknown>,
  ): Promise<void> {
    if (this.#open.size >= MAX_SANDBOXED_HANDLES) {
      throw invalidRequest(
        `at most ${MAX_SANDBOXED_HANDLES} sandboxed file handles may be open per connection`,
      );
    }
    // Worker handle ids are unique across connections sharing a worker.
    const remoteId = `h${++remoteHandles}`;
    const placeholder = { remoteId, call: () => Promise.reject(), release: () => {} };
    this.#open.set(id, placeholder);
    try {
      const opened = await gateway.callPinned(plan, Method.FsOpen, {
        ...params,
        handleId: remoteId,
      });
      this.#open.set(id, { remoteId, call: opened.call, release: opened.release });
    } catch (error) {
      this.#open.delete(id);
      throw error;
    }
  }

  async close(id: string): Promise<void> {
    const handle = this.#open.get(id)!;
    this.#open.delete(id);
    try {
      await handle.call(Method.FsClose, { handleId: handle.remoteId });
    } finally {
      handle.release();
    }
  }

  dispose(): void {
    for (const id of [...this.#open.keys()]) this.close(id).catch(() => {});
  }
}

interface SandboxedHandle {
  readonly remoteId: string;
  readonly call: <R>(method: string, params: unknown) => Promise<R>;
  readonly release: () => void;
}

const MAX_SANDBOXED_HANDLES = 1024;
const SANDBOX_HANDLES = new ResourceKey("fs.sandboxHandles", () => new SandboxHandles());

function duplicateHandle(id: string): RpcError {
  return invalidRequest(`file handle \`${id}\` already exists`);
}

/** Every filesystem method. */
export const fsMethods: MethodTable = defineMethods({
  // Answers an FsReadFileResult, pre-serialised (base64 needs no escaping
  // and can be hundreds of MiB).
  [Method.FsReadFile]: async (p, ctx) => {
    const confined = inSandbox(ctx, p.sandbox, "read", Method.FsReadFile, () => ({
      path: pathToUri(p.path),
      followSymlinks: p.followSymlinks,
    }));
    if (confined) return await confined;
    const bytes = await readFileChecked(p.path, {
      followSymlinks: p.followSymlinks,
      maxPayloadBytes: ctx.connection.resources.connection.maxMessageBytes - ENVELOPE_BYTES,
    });
    // Once its base64 is in the output, the buffer may take the next read;
    // writing a large reply is work (the memory trimmer waits for quiet).
    const encoded = () => {
      releaseReadBuffer(bytes);
      ctx.server.trimmer.note();
    };
    return new RawJson('{"dataBase64":"', new Base64Part(bytes, encoded), '"}');
  },

  [Method.FsWriteFile]: async (p, ctx) => {
    const data = typeof p.dataBase64 === "string" ? decodeStrictBase64(p.dataBase64) : p.dataBase64;
    if (!(data instanceof Uint8Array)) {
      throw new RpcError(
        ErrorCode.InvalidRequest,
        `fs/writeFile requires valid base64 dataBase64: ${data.problem}`,
      );
    }
    const confined = inSandbox(ctx, p.sandbox, "write", Method.FsWriteFile, () => ({
      path: pathToUri(p.path),
      dataBase64: typeof p.dataBase64 === "string" ? p.dataBase64 : data.toBase64(),
      followSymlinks: p.followSymlinks,
    }));
    if (confined) return await confined;
    try {
      await writeFileChecked(p.path, data, p.followSymlinks);
    } finally {
      releaseDecoded(data);
    }
    return {};
  },

  [Method.FsCreateDirectory]: async (p, ctx) => {
    const confined = inSandbox(ctx, p.sandbox, "write", Method.FsCreateDirectory, () => ({
      path: pathToUri(p.path),
      recursive: p.recursive,
      followSymlinks: p.followSymlinks,
    }));
    if (confined) return await confined;
    await createDirectory(p.path, p.recursive, p.followSymlinks);
    return {};
  },

  [Method.FsGetMetadata]: (p, ctx): FsMetadata | Promise<FsMetadata> => {
    return inSandbox(ctx, p.sandbox, "read", Method.FsGetMetadata, () => ({
      path: pathToUri(p.path),
      followSymlinks: p.followSymlinks,
    })) ?? getMetadata(p.path, p.followSymlinks);
  },

  [Method.FsCanonicalize]: async (p, ctx): Promise<FsCanonicalizeResult> => {
    const confined = inSandbox(
      ctx,
      p.sandbox,
      "read",
      Method.FsCanonicalize,
      () => ({
        path: pathToUri(p.path),
      }),
    );
    if (confined) return await confined;
    return { path: pathToUri(await canonicalize(p.path)) };
  },

  [Method.FsReadDirectory]: async (p, ctx): Promise<FsReadDirectoryResult> => {
    const confined = inSandbox(
      ctx,
      p.sandbox,
      "read",
      Method.FsReadDirectory,
      () => ({
        path: pathToUri(p.path),
      }),
    );
    if (confined) return await confined;
    return { entries: await readDirectory(p.path) };
  },

  [Method.FsRemove]: async (p, ctx) => {
    const confined = inSandbox(ctx, p.sandbox, "write", Method.FsRemove, () => ({
      path: pathToUri(p.path),
      recursive: p.recursive,
      force: p.force,
      followSymlinks: p.followSymlinks,
    }));
    if (confined) return await confined;
    await removePath(p.path, p);
    return {};
  },

  [Method.FsCopy]: async (p, ctx) => {
    const confined = inSandbox(ctx, p.sandbox, "write", Method.FsCopy, () => ({
      sourcePath: pathToUri(p.sourcePath),
      destinationPath: pathToUri(p.destinationPath),
      recursive: p.recursive,
    }));
    if (confined) return await confined;
    await copyPath(p.sourcePath, p.destinationPath, p.recursive);
    return {};
  },

  [Method.FsOpen]: async (p, ctx): Promise<FsOpenResult> => {
    const local = ctx.connection.resources.use(HANDLES);
    const confined = ctx.connection.resources.use(SANDBOX_HANDLES);
    if (local.has(p.handleId) || confined.has(p.handleId)) throw duplicateHandle(p.handleId);
    const plan = plannerFor(p.sandbox, p.mode === "replace" ? "write" : "read");
    if (plan) {
      await confined.open(ctx.server.sandboxFs, plan, p.handleId, {
        path: pathToUri(p.path),
        mode: p.mode,
      });
    } else {
      await local.open(p.handleId, p.path, p.mode);
    }
    return { handleId: p.handleId };
  },

  [Method.FsReadBlock]: async (p, ctx): Promise<FsReadBlockResult> => {
    const confined = ctx.connection.resources.use(SANDBOX_HANDLES).get(p.handleId);
    if (confined) {
      return await confined.call(Method.FsReadBlock, { ...p, handleId: confined.remoteId });
    }
    const { bytes, eof } = await ctx.connection.resources.use(HANDLES).readBlock(
      p.handleId,
      p.offset,
      p.len,
    );
    return { chunk: bytes.toBase64(), eof };
  },

  [Method.FsWriteBlock]: async (p, ctx) => {
    const confined = ctx.connection.resources.use(SANDBOX_HANDLES).get(p.handleId);
    if (confined) {
      return await confined.call(Method.FsWriteBlock, {
        handleId: confined.remoteId,
        offset: p.offset,
        chunk: p.chunk.toBase64(),
      });
    }
    try {
      await ctx.connection.resources.use(HANDLES).writeBlock(p.handleId, p.offset, p.chunk);
    } finally {
      releaseDecoded(p.chunk);
    }
    return {};
  },

  [Method.FsClose]: async (p, ctx) => {
    const confined = ctx.connection.resources.use(SANDBOX_HANDLES);
    if (confined.has(p.handleId)) {
      await confined.close(p.handleId);
      return {};
    }
    await ctx.connection.resources.use(HANDLES).close(p.handleId);
    return {};
  },

  [Method.FsWalk]: async (p, ctx): Promise<FsWalkResult> => {
    const confined = inSandbox(ctx, p.sandbox, "read", Method.FsWalk, () => ({
      path: pathToUri(p.path),
      options: p.options,
    }));
    if (confined) return await confined;
    const result = await walk(p.path, p.options);
    return {
      entries: result.entries.map((e) => ({ path: pathToUri(e.path), kind: e.kind })),
      errors: result.errors.map((e) => ({ path: pathToUri(e.path), message: e.message })),
      truncated: result.truncated,
    };
  },

  [Method.FsWatchMissing]: async (p, ctx): Promise<FsWatchMissingResult> => {
    if (planFor(p.sandbox, "read")) {
      throw internalError(
        "fs/watchMissing does not run inside a sandbox here: send it with sandbox null",
      );
    }
    return { watching: await ctx.connection.resources.use(WATCH).watch(p.watchId, p.missing) };
  },
});
