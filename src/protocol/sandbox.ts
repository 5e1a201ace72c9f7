/**
 * The `sandbox` member Codex puts on commands and file operations
 * (`FileSystemSandboxContext`): wire types and decoders.
 *
 * @module
 */

import {
  array,
  boolean,
  DecodeError,
  type Decoder,
  join,
  optional,
  string,
  struct,
  tagged,
  variant,
} from "./decode.ts";
import { pathUri } from "./path_uri.ts";

/** Extension of `environment/info`: the Linux sandbox (bubblewrap). */
export interface SandboxAvailability {
  /** Sandboxed requests are served (otherwise they get `-32603` with `reason`). */
  available: boolean;
  /** The enforcement mechanism. */
  mechanism: "bubblewrap";
  /** Why not, and how to fix it (empty when available). */
  reason: string;
}

/** What a sandbox entry grants on its path. `deny` and `none` hide it. */
export type SandboxAccess = "read" | "write" | "deny" | "none";

/** Paths a policy names symbolically, resolved by the server. */
export type SandboxSpecialKind =
  | "root"
  | "minimal"
  | "current_working_directory"
  | "project_roots"
  | "tmpdir"
  | "slash_tmp"
  | "unknown";

/** A symbolic path, optionally narrowed to a relative `subpath`. */
export interface SandboxSpecialPath {
  /** Which path. */
  kind: SandboxSpecialKind;
  /** Relative path below it (an escaping subpath is ignored). */
  subpath?: string | null;
  /** For `unknown`: the path as the client spelled it (ignored). */
  path?: string;
}

/** The path of a sandbox entry. */
export type SandboxPath =
  | { type: "path"; path: string }
  | { type: "glob_pattern"; pattern: string }
  | { type: "special"; value: SandboxSpecialPath };

/** One entry of a restricted filesystem policy. */
export interface SandboxEntry {
  /** The path (`path` is a `file:` URI). */
  path: SandboxPath;
  /** What is granted. */
  access: SandboxAccess;
  /** `skip`: a missing path is ignored (otherwise a placeholder hides it). */
  missing_path_behavior?: "skip" | null;
}

/** Filesystem side of a managed policy. */
export type SandboxFileSystem =
  | { type: "restricted"; entries: SandboxEntry[] }
  | { type: "unrestricted" };

/** Network side of a policy. */
export type SandboxNetwork = "restricted" | "enabled";

/** What the sandboxed code may do. */
export type SandboxPermissions =
  | { type: "managed"; file_system: SandboxFileSystem; network: SandboxNetwork }
  | { type: "disabled" }
  | { type: "external"; network: SandboxNetwork };

/** Windows-only sandbox level (ignored on Linux, but required on the wire). */
export type WindowsSandboxLevel = "disabled" | "restricted-token" | "elevated" | "mxc";

/** Where a policy's relative paths and roots come from (fs methods). */
export interface SandboxPolicyContext {
  /** Working directory (`file:` URI). */
  cwd?: string | null;
  /** Workspace roots (`file:` URIs). */
  workspaceRoots?: string[] | null;
}

/** The `sandbox` member of `process/start` and `fs/*` (Codex's `FileSystemSandboxContext`). */
export interface FileSystemSandboxContext {
  /** The policy. */
  permissions: SandboxPermissions;
  /** Base of relative glob patterns (`file:` URI). */
  cwd?: string | null;
  /** What `project_roots` and `current_working_directory` mean (`file:` URIs). */
  workspaceRoots?: string[] | null;
  /** Windows only. */
  windowsSandboxLevel: WindowsSandboxLevel;
  /** Windows only. */
  windowsSandboxProxySettingsMode?: "reconcile" | "preserve" | null;
  /** Ignored: bubblewrap is always used. */
  useLegacyLandlock?: boolean | null;
  /** Fallback `cwd`/`workspaceRoots`. */
  policyContext?: SandboxPolicyContext | null;
  /** The user's home directory (`file:` URI). */
  userHomeDir?: string | null;
}

/** Params with defaults applied and the sandbox decoded (absent when null). */
export type Sandboxed<T> = Required<Omit<T, "sandbox">> & { sandbox?: FileSystemSandboxContext };

const specialKinds: SandboxSpecialKind[] = [
  "root",
  "minimal",
  "current_working_directory",
  "project_roots",
  "tmpdir",
  "slash_tmp",
  "unknown",
];

const specialPath: Decoder<SandboxSpecialPath> = (v, path) => {
  const head = struct<{ kind: SandboxSpecialKind }>("SpecialPath", {
    kind: variant(specialKinds),
  })(v, path);
  const obj = v as Record<string, unknown>;
  // `unknown` carries the client's spelling; a non-string subpath is
  // ignored, as the reference ignores it.
  if (head.kind === "unknown") {
    return { kind: "unknown", path: string(obj.path ?? missing("path", path), join(path, "path")) };
  }
  return typeof obj.subpath === "string" ? { ...head, subpath: obj.subpath } : head;
};

function missing(field: string, path: string): never {
  throw new DecodeError(`missing field \`${field}\``, path);
}

const sandboxPath = tagged<SandboxPath>("SandboxPath", "type", {
  path: struct<{ type: "path"; path: string }>("Path", {
    type: variant(["path"]),
    path: pathUri,
  }),
  glob_pattern: struct<{ type: "glob_pattern"; pattern: string }>("GlobPattern", {
    type: variant(["glob_pattern"]),
    pattern: string,
  }),
  special: struct<{ type: "special"; value: SandboxSpecialPath }>("Special", {
    type: variant(["special"]),
    value: specialPath,
  }),
});

const sandboxEntry = struct<SandboxEntry>("FileSystemSandboxEntry", {
  path: sandboxPath,
  access: variant<SandboxAccess>(["read", "write", "deny", "none"]),
  missing_path_behavior: optional(variant(["skip"])),
});

const sandboxNetwork = variant<SandboxNetwork>(["restricted", "enabled"]);

const fileSystem = tagged<SandboxFileSystem>("FileSystemPermissions", "type", {
  restricted: struct<{ type: "restricted"; entries: SandboxEntry[] }>("Restricted", {
    type: variant(["restricted"]),
    entries: array(sandboxEntry),
  }),
  unrestricted: struct<{ type: "unrestricted" }>("Unrestricted", {
    type: variant(["unrestricted"]),
  }),
});

const permissions = tagged<SandboxPermissions>("SandboxPermissions", "type", {
  managed: struct<{ type: "managed"; file_system: SandboxFileSystem; network: SandboxNetwork }>(
    "Managed",
    { type: variant(["managed"]), file_system: fileSystem, network: sandboxNetwork },
  ),
  disabled: struct<{ type: "disabled" }>("Disabled", { type: variant(["disabled"]) }),
  external: struct<{ type: "external"; network: SandboxNetwork }>("External", {
    type: variant(["external"]),
    network: sandboxNetwork,
  }),
});

/**
 * The `sandbox` member of process/start and fs/* (`file:` URIs decoded to
 * native paths), in the reference's field order so that its errors match.
 */
export const sandboxContext: Decoder<FileSystemSandboxContext> = struct<
  FileSystemSandboxContext
>("WireFileSystemSandboxContext", {
  permissions,
  cwd: optional(pathUri),
  workspaceRoots: optional(array(pathUri)),
  windowsSandboxLevel: variant<WindowsSandboxLevel>([
    "disabled",
    "restricted-token",
    "elevated",
    "mxc",
  ]),
  windowsSandboxProxySettingsMode: optional(variant(["reconcile", "preserve"])),
  useLegacyLandlock: optional(boolean),
  policyContext: optional(
    struct<SandboxPolicyContext>("WireFileSystemPolicyContext", {
      cwd: optional(pathUri),
      workspaceRoots: optional(array(pathUri)),
    }),
  ),
  userHomeDir: optional(pathUri),
});

/** An optional `sandbox` member (null and absent: none). */
export const optionalSandbox: Decoder<FileSystemSandboxContext | undefined> = optional(
  sandboxContext,
);
