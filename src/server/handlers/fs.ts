/**
 * `fs/*` methods: decode, refuse sandboxes (not supported here), call into
 * `src/fs`, encode.
 *
 * @module
 */

import { RpcError } from "../../jsonrpc/errors.ts";
import { FileHandleTable } from "../../fs/handles.ts";
import { canonicalize, getMetadata, readDirectory } from "../../fs/metadata.ts";
import { readFileChecked, writeFileChecked } from "../../fs/read_write.ts";
import { copyPath, createDirectory, removePath } from "../../fs/tree.ts";
import { walk } from "../../fs/walk.ts";
import { MissingPathWatch } from "../../fs/watch_missing.ts";
import { base64Problem, decodeBase64 } from "../../protocol/decode.ts";
import {
  fsCanonicalizeParams,
  fsCloseParams,
  fsCopyParams,
  fsCreateDirectoryParams,
  fsGetMetadataParams,
  fsOpenParams,
  fsReadBlockParams,
  fsReadDirectoryParams,
  fsReadFileParams,
  fsRemoveParams,
  fsWalkParams,
  fsWatchMissingParams,
  fsWriteBlockParams,
  fsWriteFileParams,
} from "../../protocol/decoders.ts";
import { ErrorCode, internalError } from "../../protocol/errors.ts";
import { Method, ServerNotification } from "../../protocol/methods.ts";
import { pathToUri } from "../../protocol/path_uri.ts";
import type {
  FsCanonicalizeResult,
  FsMetadata,
  FsMissingChangedNotification,
  FsOpenResult,
  FsReadBlockResult,
  FsReadDirectoryResult,
  FsWalkResult,
  FsWatchMissingResult,
} from "../../protocol/types.ts";
import { defineMethod, type MethodTable } from "../handler.ts";
import { ResourceKey } from "../resource_scope.ts";
import { RawJson } from "../../jsonrpc/message.ts";

/** Room left in a message for the envelope around a file's base64. */
const ENVELOPE_BYTES = 256;

const HANDLES = new ResourceKey("fs.handles", () => new FileHandleTable());
const WATCH = new ResourceKey("fs.watchMissing", (connection) =>
  new MissingPathWatch((watchId) => {
    const params: FsMissingChangedNotification = { watchId };
    connection.notify(ServerNotification.FsMissingChanged, params);
  }));

function noSandbox(sandbox: unknown): void {
  if (sandbox !== undefined && sandbox !== null) {
    throw internalError(
      "sandboxed filesystem access is not supported by this server (sandbox must be null)",
    );
  }
}

/** Every filesystem method. */
export const fsMethods: MethodTable = {
  // Answers an FsReadFileResult, pre-serialised (base64 needs no escaping
  // and can be hundreds of MiB).
  [Method.FsReadFile]: defineMethod(fsReadFileParams, async (p, ctx): Promise<RawJson> => {
    noSandbox(p.sandbox);
    const bytes = await readFileChecked(p.path, {
      followSymlinks: p.followSymlinks,
      maxPayloadBytes: ctx.connection.resources.connection.maxMessageBytes - ENVELOPE_BYTES,
    });
    return new RawJson('{"dataBase64":"', bytes.toBase64(), '"}');
  }),

  [Method.FsWriteFile]: defineMethod(fsWriteFileParams, async (p) => {
    noSandbox(p.sandbox);
    const problem = base64Problem(p.dataBase64);
    if (problem !== null) {
      throw new RpcError(
        ErrorCode.InvalidRequest,
        `fs/writeFile requires valid base64 dataBase64: ${problem}`,
      );
    }
    await writeFileChecked(p.path, decodeBase64(p.dataBase64), p.followSymlinks);
    return {};
  }),

  [Method.FsCreateDirectory]: defineMethod(fsCreateDirectoryParams, async (p) => {
    noSandbox(p.sandbox);
    await createDirectory(p.path, p.recursive, p.followSymlinks);
    return {};
  }),

  [Method.FsGetMetadata]: defineMethod(fsGetMetadataParams, (p): Promise<FsMetadata> => {
    noSandbox(p.sandbox);
    return getMetadata(p.path, p.followSymlinks);
  }),

  [Method.FsCanonicalize]: defineMethod(
    fsCanonicalizeParams,
    async (p): Promise<FsCanonicalizeResult> => {
      noSandbox(p.sandbox);
      return { path: pathToUri(await canonicalize(p.path)) };
    },
  ),

  [Method.FsReadDirectory]: defineMethod(
    fsReadDirectoryParams,
    async (p): Promise<FsReadDirectoryResult> => {
      noSandbox(p.sandbox);
      return { entries: await readDirectory(p.path) };
    },
  ),

  [Method.FsRemove]: defineMethod(fsRemoveParams, async (p) => {
    noSandbox(p.sandbox);
    await removePath(p.path, p);
    return {};
  }),

  [Method.FsCopy]: defineMethod(fsCopyParams, async (p) => {
    noSandbox(p.sandbox);
    await copyPath(p.sourcePath, p.destinationPath, p.recursive);
    return {};
  }),

  [Method.FsOpen]: defineMethod(fsOpenParams, async (p, ctx): Promise<FsOpenResult> => {
    noSandbox(p.sandbox);
    await ctx.connection.resources.use(HANDLES).open(p.handleId, p.path, p.mode);
    return { handleId: p.handleId };
  }),

  [Method.FsReadBlock]: defineMethod(
    fsReadBlockParams,
    async (p, ctx): Promise<FsReadBlockResult> => {
      const { bytes, eof } = await ctx.connection.resources.use(HANDLES).readBlock(
        p.handleId,
        p.offset,
        p.len,
      );
      return { chunk: bytes.toBase64(), eof };
    },
  ),

  [Method.FsWriteBlock]: defineMethod(fsWriteBlockParams, async (p, ctx) => {
    await ctx.connection.resources.use(HANDLES).writeBlock(p.handleId, p.offset, p.chunk);
    return {};
  }),

  [Method.FsClose]: defineMethod(fsCloseParams, async (p, ctx) => {
    await ctx.connection.resources.use(HANDLES).close(p.handleId);
    return {};
  }),

  [Method.FsWalk]: defineMethod(fsWalkParams, async (p): Promise<FsWalkResult> => {
    noSandbox(p.sandbox);
    const result = await walk(p.path, p.options);
    return {
      entries: result.entries.map((e) => ({ path: pathToUri(e.path), kind: e.kind })),
      errors: result.errors.map((e) => ({ path: pathToUri(e.path), message: e.message })),
      truncated: result.truncated,
    };
  }),

  [Method.FsWatchMissing]: defineMethod(
    fsWatchMissingParams,
    async (p, ctx): Promise<FsWatchMissingResult> => {
      noSandbox(p.sandbox);
      return { watching: await ctx.connection.resources.use(WATCH).watch(p.watchId, p.missing) };
    },
  ),
};
