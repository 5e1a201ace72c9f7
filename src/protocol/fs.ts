/**
 * The filesystem family (`fs/*`): wire types, decoders, its rows of the
 * method table and its notification (see `table.ts`).
 *
 * @module
 */

import {
  array,
  base64Text,
  boolean,
  bytes,
  type DecodedOf,
  type Decoder,
  exactU64,
  optionalOr,
  string,
  struct,
  structOf,
  u64,
  unitEnum,
  usize,
  withDefault,
} from "./decode.ts";
import type { EmptyResult, RequestTable, Row } from "./table.ts";
import { pathUri } from "./path_uri.ts";
import { type FileSystemSandboxContext, optionalSandbox } from "./sandbox.ts";

/** Params of `fs/readFile`. */
export interface FsReadFileParams {
  /** File (`file:` URI). */
  path: string;
  /** Follow a final symlink (default true). */
  followSymlinks?: boolean;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Result of `fs/readFile`. */
export interface FsReadFileResult {
  /** Contents (base64). */
  dataBase64: string;
}

/** Params of `fs/writeFile`. */
export interface FsWriteFileParams {
  /** File (`file:` URI). */
  path: string;
  /** Contents (base64). */
  dataBase64: string;
  /** Follow a final symlink (default true). */
  followSymlinks?: boolean;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Params of `fs/createDirectory`. */
export interface FsCreateDirectoryParams {
  /** Directory (`file:` URI). */
  path: string;
  /** Create parents; an existing directory is fine (default true). */
  recursive?: boolean;
  /** Follow symlinks (default true). */
  followSymlinks?: boolean;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Params of `fs/getMetadata`. */
export interface FsGetMetadataParams {
  /** Path (`file:` URI). */
  path: string;
  /** Describe the target of a symlink (default true). */
  followSymlinks?: boolean;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Result of `fs/getMetadata`. */
export interface FsMetadata {
  /** Is a directory. */
  isDirectory: boolean;
  /** Is a regular file. */
  isFile: boolean;
  /** The path itself is a symlink. */
  isSymlink: boolean;
  /** Size in bytes. */
  size: number;
  /** Birth time (ms since epoch; 0 when unknown). */
  createdAtMs: number;
  /** Modification time (ms since epoch). */
  modifiedAtMs: number;
}

/** Params of `fs/canonicalize`. */
export interface FsCanonicalizeParams {
  /** Path (`file:` URI). */
  path: string;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Result of `fs/canonicalize`. */
export interface FsCanonicalizeResult {
  /** Resolved path (`file:` URI). */
  path: string;
}

/** Params of `fs/readDirectory`. */
export interface FsReadDirectoryParams {
  /** Directory (`file:` URI). */
  path: string;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** One directory entry. */
export interface FsDirectoryEntry {
  /** Entry name. */
  fileName: string;
  /** Is (or links to) a directory. */
  isDirectory: boolean;
  /** Is (or links to) a regular file. */
  isFile: boolean;
}

/** Result of `fs/readDirectory`. */
export interface FsReadDirectoryResult {
  /** Entries in directory order. */
  entries: FsDirectoryEntry[];
}

/** Params of `fs/remove`. */
export interface FsRemoveParams {
  /** Path (`file:` URI). */
  path: string;
  /** Remove directories with their contents (default true). */
  recursive?: boolean;
  /** A missing path is not an error (default true). */
  force?: boolean;
  /** Follow symlinks in the path (default true). */
  followSymlinks?: boolean;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Params of `fs/copy`. */
export interface FsCopyParams {
  /** Source (`file:` URI). */
  sourcePath: string;
  /** Destination (`file:` URI). */
  destinationPath: string;
  /** Required for directories. */
  recursive: boolean;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Mode of a file handle. */
export type FsOpenMode = "read" | "replace";

/** Params of `fs/open`. */
export interface FsOpenParams {
  /** Client-chosen id (≤ 32 bytes). */
  handleId: string;
  /** File (`file:` URI). */
  path: string;
  /** `read` (default) or `replace` (create or truncate for writing). */
  mode?: FsOpenMode;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Result of `fs/open`. */
export interface FsOpenResult {
  /** The id. */
  handleId: string;
}

/** Params of `fs/readBlock`. */
export interface FsReadBlockParams {
  /** Handle. */
  handleId: string;
  /** Byte offset. */
  offset: number;
  /** Bytes to read (1 to 1 MiB). */
  len: number;
}

/** Result of `fs/readBlock`. */
export interface FsReadBlockResult {
  /** Bytes read (base64). */
  chunk: string;
  /** Fewer than `len` bytes were available. */
  eof: boolean;
}

/** Params of `fs/writeBlock`. */
export interface FsWriteBlockParams {
  /** Handle opened with `mode: "replace"`. */
  handleId: string;
  /** Byte offset. */
  offset: number;
  /** Bytes (base64, 1 byte to 1 MiB decoded). */
  chunk: string;
}

/** Params of `fs/close`. */
export interface FsCloseParams {
  /** Handle. */
  handleId: string;
}

/** Limits of `fs/walk`. */
export interface FsWalkOptions {
  /** Deepest level listed (≤ 64). */
  maxDepth: number;
  /** Directories descended (≤ 10 000). */
  maxDirectories: number;
  /** Entries listed (≤ 50 000). */
  maxEntries: number;
  /** List and descend symlinks to directories. */
  followDirectorySymlinks: boolean;
  /** List hidden directories without descending. */
  pruneHiddenDirectories: boolean;
}

/** Params of `fs/walk`. */
export interface FsWalkParams {
  /** Root (`file:` URI). */
  path: string;
  /** Limits. */
  options: FsWalkOptions;
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** One `fs/walk` entry. */
export interface FsWalkEntry {
  /** Path (`file:` URI). */
  path: string;
  /** Kind. */
  kind: "directory" | "file";
}

/** A directory `fs/walk` could not read. */
export interface FsWalkError {
  /** Path (`file:` URI). */
  path: string;
  /** Why. */
  message: string;
}

/** Result of `fs/walk`. */
export interface FsWalkResult {
  /** Entries, breadth-first, sorted by name within a directory. */
  entries: FsWalkEntry[];
  /** Unreadable directories. */
  errors: FsWalkError[];
  /** A limit stopped the walk. */
  truncated: boolean;
}

/** Params of `fs/watchMissing`. */
export interface FsWatchMissingParams {
  /** Strictly increasing per connection. */
  watchId: number;
  /** Paths (`file:` URIs) expected to appear. */
  missing: string[];
  /** Run the operation inside this sandbox (null or absent: none). */
  sandbox?: FileSystemSandboxContext | null;
}

/** Result of `fs/watchMissing`. */
export interface FsWatchMissingResult {
  /** A watch is now active. */
  watching: boolean;
}

/** `fs/missingChanged` notification. */
export interface FsMissingChangedNotification {
  /** The watch that fired. */
  watchId: number;
}

const followSymlinks: Decoder<boolean> = optionalOr(boolean, true);

/** `fs/readFile`. */
const fsReadFileParams = structOf(
  "ReadFileParams",
  { path: pathUri, followSymlinks, sandbox: optionalSandbox },
);

/** `fs/writeFile`. */
const fsWriteFileParams = structOf("WriteFileParams", {
  path: pathUri,
  dataBase64: base64Text,
  followSymlinks,
  sandbox: optionalSandbox,
});

/** Decoded `fs/writeFile` params (data still base64: validated by the handler). */
export type DecodedFsWriteFile = DecodedOf<typeof fsWriteFileParams>;

/** `fs/createDirectory`. */
const fsCreateDirectoryParams = structOf(
  "CreateDirectoryParams",
  {
    path: pathUri,
    recursive: optionalOr(boolean, true),
    followSymlinks,
    sandbox: optionalSandbox,
  },
);

/** `fs/getMetadata`. */
const fsGetMetadataParams = structOf("GetMetadataParams", {
  path: pathUri,
  followSymlinks,
  sandbox: optionalSandbox,
});

/** `fs/canonicalize`. */
const fsCanonicalizeParams = struct<FsCanonicalizeParams>("CanonicalizeParams", {
  path: pathUri,
  sandbox: optionalSandbox,
});

/** `fs/readDirectory`. */
const fsReadDirectoryParams = struct<FsReadDirectoryParams>("ReadDirectoryParams", {
  path: pathUri,
  sandbox: optionalSandbox,
});

/** `fs/remove`. */
const fsRemoveParams = structOf(
  "RemoveParams",
  {
    path: pathUri,
    recursive: optionalOr(boolean, true),
    force: optionalOr(boolean, true),
    followSymlinks,
    sandbox: optionalSandbox,
  },
);

/** `fs/copy`. */
const fsCopyParams = struct<FsCopyParams>("CopyParams", {
  sourcePath: pathUri,
  destinationPath: pathUri,
  recursive: boolean,
  sandbox: optionalSandbox,
});

/** `fs/open`. */
const fsOpenParams = structOf(
  "OpenParams",
  {
    handleId: string,
    path: pathUri,
    mode: withDefault(unitEnum(["read", "replace"]), "read"),
    sandbox: optionalSandbox,
  },
);

/** `fs/readBlock`. */
const fsReadBlockParams = structOf("ReadBlockParams", {
  handleId: string,
  offset: exactU64,
  len: usize,
});

/** Decoded `fs/readBlock` params (the offset exact over the whole u64 range). */
export type DecodedFsReadBlock = DecodedOf<typeof fsReadBlockParams>;

/** `fs/writeBlock`. */
const fsWriteBlockParams = structOf("WriteBlockParams", {
  handleId: string,
  offset: exactU64,
  chunk: bytes,
});

/** Decoded `fs/writeBlock` params (the offset exact over the whole u64 range). */
export type DecodedFsWriteBlock = DecodedOf<typeof fsWriteBlockParams>;

/** `fs/close`. */
const fsCloseParams = struct<FsCloseParams>("CloseParams", { handleId: string });

const walkOptions = struct<FsWalkOptions>("WalkOptions", {
  maxDepth: usize,
  maxDirectories: usize,
  maxEntries: usize,
  followDirectorySymlinks: boolean,
  pruneHiddenDirectories: boolean,
});

/** `fs/walk`. */
const fsWalkParams = struct<FsWalkParams>("WalkParams", {
  path: pathUri,
  options: walkOptions,
  sandbox: optionalSandbox,
});

/** `fs/watchMissing`. */
const fsWatchMissingParams = struct<FsWatchMissingParams>("WatchMissingParams", {
  watchId: u64,
  missing: array(pathUri),
  sandbox: optionalSandbox,
});

/** The family's request names. */
export const FsMethod = {
  FsReadFile: "fs/readFile",
  FsWriteFile: "fs/writeFile",
  FsCreateDirectory: "fs/createDirectory",
  FsGetMetadata: "fs/getMetadata",
  FsCanonicalize: "fs/canonicalize",
  FsReadDirectory: "fs/readDirectory",
  FsRemove: "fs/remove",
  FsCopy: "fs/copy",
  FsOpen: "fs/open",
  FsReadBlock: "fs/readBlock",
  FsWriteBlock: "fs/writeBlock",
  FsClose: "fs/close",
  FsWalk: "fs/walk",
  FsWatchMissing: "fs/watchMissing",
} as const;

/** The family's notification names (server → client). */
export const FsNotification = {
  FsMissingChanged: "fs/missingChanged",
} as const;

/** The family's rows of the method table. */
export interface FsMethods {
  /** `fs/readFile`. */
  [FsMethod.FsReadFile]: Row<FsReadFileParams, FsReadFileResult>;
  /** `fs/writeFile`. */
  [FsMethod.FsWriteFile]: Row<FsWriteFileParams, EmptyResult>;
  /** `fs/createDirectory`. */
  [FsMethod.FsCreateDirectory]: Row<FsCreateDirectoryParams, EmptyResult>;
  /** `fs/getMetadata`. */
  [FsMethod.FsGetMetadata]: Row<FsGetMetadataParams, FsMetadata>;
  /** `fs/canonicalize`. */
  [FsMethod.FsCanonicalize]: Row<FsCanonicalizeParams, FsCanonicalizeResult>;
  /** `fs/readDirectory`. */
  [FsMethod.FsReadDirectory]: Row<FsReadDirectoryParams, FsReadDirectoryResult>;
  /** `fs/remove`. */
  [FsMethod.FsRemove]: Row<FsRemoveParams, EmptyResult>;
  /** `fs/copy`. */
  [FsMethod.FsCopy]: Row<FsCopyParams, EmptyResult>;
  /** `fs/open`. */
  [FsMethod.FsOpen]: Row<FsOpenParams, FsOpenResult>;
  /** `fs/readBlock`. */
  [FsMethod.FsReadBlock]: Row<FsReadBlockParams, FsReadBlockResult>;
  /** `fs/writeBlock`. */
  [FsMethod.FsWriteBlock]: Row<FsWriteBlockParams, EmptyResult>;
  /** `fs/close`. */
  [FsMethod.FsClose]: Row<FsCloseParams, EmptyResult>;
  /** `fs/walk`. */
  [FsMethod.FsWalk]: Row<FsWalkParams, FsWalkResult>;
  /** `fs/watchMissing`. */
  [FsMethod.FsWatchMissing]: Row<FsWatchMissingParams, FsWatchMissingResult>;
}

/** The family's notification payloads. */
export interface FsNotifications {
  /** `fs/missingChanged`. */
  [FsNotification.FsMissingChanged]: FsMissingChangedNotification;
}

/** What the family's decoders give its handlers, where more than the params as sent. */
export interface FsDecoded {
  [FsMethod.FsReadFile]: DecodedOf<typeof fsReadFileParams>;
  [FsMethod.FsWriteFile]: DecodedFsWriteFile;
  [FsMethod.FsCreateDirectory]: DecodedOf<typeof fsCreateDirectoryParams>;
  [FsMethod.FsGetMetadata]: DecodedOf<typeof fsGetMetadataParams>;
  [FsMethod.FsRemove]: DecodedOf<typeof fsRemoveParams>;
  [FsMethod.FsOpen]: DecodedOf<typeof fsOpenParams>;
  [FsMethod.FsReadBlock]: DecodedFsReadBlock;
  [FsMethod.FsWriteBlock]: DecodedFsWriteBlock;
}

/** How the server decodes and dispatches the family's requests. */
export const fsRequests: RequestTable<FsMethods, FsDecoded> = {
  [FsMethod.FsReadFile]: { decode: fsReadFileParams },
  [FsMethod.FsWriteFile]: { decode: fsWriteFileParams, base64: "dataBase64" },
  [FsMethod.FsCreateDirectory]: { decode: fsCreateDirectoryParams },
  [FsMethod.FsGetMetadata]: { decode: fsGetMetadataParams },
  [FsMethod.FsCanonicalize]: { decode: fsCanonicalizeParams },
  [FsMethod.FsReadDirectory]: { decode: fsReadDirectoryParams },
  [FsMethod.FsRemove]: { decode: fsRemoveParams },
  [FsMethod.FsCopy]: { decode: fsCopyParams },
  [FsMethod.FsOpen]: { decode: fsOpenParams, orderedBy: "handleId" },
  [FsMethod.FsReadBlock]: { decode: fsReadBlockParams, orderedBy: "handleId" },
  [FsMethod.FsWriteBlock]: { decode: fsWriteBlockParams, orderedBy: "handleId", base64: "chunk" },
  [FsMethod.FsClose]: { decode: fsCloseParams, lane: "control", orderedBy: "handleId" },
  [FsMethod.FsWalk]: { decode: fsWalkParams },
  [FsMethod.FsWatchMissing]: { decode: fsWatchMissingParams },
};
