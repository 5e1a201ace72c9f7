/**
 * Param decoders for every method, in the reference's field order (which is
 * also the order fields are validated in and the order of positional
 * params).
 *
 * @module
 */

import {
  array,
  boolean,
  buffered,
  bytes,
  DecodeError,
  type Decoder,
  type ExactU64,
  exactU64,
  join,
  nonEmptyString,
  nullable,
  optional,
  optionalOr,
  record,
  string,
  struct,
  tagged,
  typeError,
  u16,
  u64,
  unit,
  unknownValue,
  usize,
  variant,
  withDefault,
} from "./decode.ts";
import { cwdUri, pathUri } from "./path_uri.ts";
import type {
  CapabilitiesDiscoverParams,
  CapabilityRootParam,
  CapabilityRootsDiscoverParams,
  CredentialProviderConfig,
  EnvironmentConfigReadParams,
  EnvPolicy,
  FileSystemSandboxContext,
  FsCanonicalizeParams,
  FsCloseParams,
  FsCopyParams,
  FsCreateDirectoryParams,
  FsGetMetadataParams,
  FsOpenParams,
  FsReadDirectoryParams,
  FsReadFileParams,
  FsRemoveParams,
  FsWalkOptions,
  FsWalkParams,
  FsWatchMissingParams,
  HttpBodyFlowParams,
  HttpHeaderParam,
  HttpRequestParams,
  InitializeParams,
  NetworkProxyAuditMetadata,
  NetworkProxyLaunch,
  ProcessCloseStdinParams,
  ProcessFlowParams,
  ProcessMetadata,
  ProcessReadParams,
  ProcessResizeParams,
  ProcessSignalName,
  ProcessSignalParams,
  ProcessTerminateParams,
  RemoteNetworkProxyConfig,
  SandboxAccess,
  SandboxEntry,
  SandboxFileSystem,
  SandboxNetwork,
  SandboxPath,
  SandboxPermissions,
  SandboxPolicyContext,
  SandboxSpecialKind,
  SandboxSpecialPath,
  ShellSnapshotParams,
  ShellSpec,
  WindowsSandboxLevel,
} from "./types.ts";

/** Params with defaults applied and the sandbox decoded (absent when null). */
export type Sandboxed<T> = Required<Omit<T, "sandbox">> & { sandbox?: FileSystemSandboxContext };

/** Decoded `process/start` params (paths resolved, bytes decoded). */
export interface DecodedProcessStart {
  processId: string;
  metadata?: ProcessMetadata | null;
  argv: string[];
  /** Native absolute path. */
  cwd: string;
  envPolicy?: EnvPolicy | null;
  shellSnapshot?: ShellSnapshotParams | null;
  env: Record<string, string>;
  tty: boolean;
  pipeStdin: boolean;
  arg0?: string | null;
  sandbox?: FileSystemSandboxContext;
  enforceManagedNetwork: boolean;
  managedNetwork?: unknown;
  networkProxy?: NetworkProxyLaunch | null;
  rows?: number;
  cols?: number;
}

/** Decoded `process/write` params. */
export interface DecodedProcessWrite {
  processId: string;
  chunk: Uint8Array;
  writeId: string;
}

/** Decoded `fs/writeFile` params (data still base64: validated by the handler). */
export type DecodedFsWriteFile = {
  path: string;
  dataBase64: string;
  followSymlinks: boolean;
  sandbox?: FileSystemSandboxContext;
};

/** Decoded `fs/readBlock` params (the offset exact over the whole u64 range). */
export interface DecodedFsReadBlock {
  handleId: string;
  offset: ExactU64;
  len: number;
}

/** Decoded `fs/writeBlock` params (the offset exact over the whole u64 range). */
export interface DecodedFsWriteBlock {
  handleId: string;
  offset: ExactU64;
  chunk: Uint8Array;
}

/** Decoded `http/request` params. */
export interface DecodedHttpRequest {
  method: string;
  url: string;
  headers: HttpHeaderParam[];
  /** Decoded body bytes. */
  bodyBase64?: Uint8Array;
  timeoutMs?: number;
  redirectPolicy: "follow" | "stop";
  requestId: string;
  streamResponse: boolean;
}

const uuidChars = /^[0-9a-fA-F-]$/;

/** A UUID string, checked like the reference (`uuid` crate wording). */
const uuid: Decoder<string> = (v, path) => {
  const s = string(v, path);
  const body = s.startsWith("urn:uuid:") ? s.slice(9) : s;
  const offset = s.length - body.length;
  for (let i = 0; i < body.length; i++) {
    if (!uuidChars.test(body[i]!)) {
      throw new DecodeError(
        `invalid character: expected an optional prefix of \`urn:uuid:\` followed by [0-9a-fA-F-], found \`${
          body[i]
        }\` at ${offset + i + 1}`,
        path,
      );
    }
  }
  if (
    !/^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32})$/
      .test(body)
  ) {
    throw new DecodeError(`invalid length: expected a UUID, found ${body.length} characters`, path);
  }
  return s;
};

const metadata = struct<ProcessMetadata>("ExecMetadata", {
  threadId: nullable(uuid),
  toolCallId: nullable(string),
});

const envPolicy = struct<EnvPolicy>("ExecEnvPolicy", {
  inherit: variant(["core", "all", "none"]),
  ignoreDefaultExcludes: boolean,
  exclude: array(string),
  set: record(string),
  includeOnly: array(string),
});

const argv: Decoder<string[]> = (v, path) => {
  const list = array(string)(v, path);
  if (list.length === 0) throw new DecodeError("argv must not be empty", "");
  return list;
};

/** `initialize`. */
export const initializeParams = struct<InitializeParams>("InitializeParams", {
  clientName: string,
  resumeSessionId: nullable(string),
  maxMessageBytes: nullable(u64),
});

/** Methods without params. */
export const noParams = unit;

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

const network = variant<SandboxNetwork>(["restricted", "enabled"]);

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
    { type: variant(["managed"]), file_system: fileSystem, network },
  ),
  disabled: struct<{ type: "disabled" }>("Disabled", { type: variant(["disabled"]) }),
  external: struct<{ type: "external"; network: SandboxNetwork }>("External", {
    type: variant(["external"]),
    network,
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

const sandbox = optional(sandboxContext);

/** Shells Codex knows; snapshots are refused for any other. */
const SNAPSHOT_SHELLS = new Set(["bash", "zsh", "sh", "powershell", "pwsh", "cmd"]);

const shellSnapshot: Decoder<ShellSnapshotParams> = (v, path) => {
  const params = struct<ShellSnapshotParams>("ShellSnapshot", {
    scopeId: string,
    shell: struct<ShellSpec>("Shell", { name: string, path: string }),
  })(v, path);
  if (!SNAPSHOT_SHELLS.has(params.shell.name.toLowerCase())) {
    throw new DecodeError(
      `shell snapshots are unsupported for shell \`${params.shell.name}\``,
      join(path, "shell.name"),
    );
  }
  return params;
};

/** Prefix of every semantic error in a launch config (the reference's wording). */
const PROXY_CONFIG_ERROR = "invalid network proxy config";

/** A serde unit-variant enum that also accepts the `{"variant": null}` map form. */
function unitEnum<const V extends string>(variants: readonly V[]): Decoder<V> {
  const name = variant(variants);
  return (v, path) => {
    if (typeof v === "string") return name(v, path);
    if (v === null || typeof v !== "object" || Array.isArray(v)) {
      typeError(v, "string or map", path);
    }
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length !== 1) {
      throw new DecodeError("invalid value: map, expected map with a single key", path);
    }
    const [key, inner] = entries[0]!;
    const chosen = name(key, path);
    if (inner !== null) typeError(inner, "unit", join(path, key));
    return chosen;
  };
}

/** Patterns a launch config may name: host names, IP literals and globs. */
const DOMAIN_PATTERN_SYNTAX = /^[A-Za-z0-9._*?:\[\]{},-]+$/;

function checkDomainPattern(pattern: string, path: string): void {
  if (pattern.trim() === "") {
    throw new DecodeError(`${PROXY_CONFIG_ERROR}: domain pattern is empty`, path);
  }
  if (!DOMAIN_PATTERN_SYNTAX.test(pattern)) {
    throw new DecodeError(
      `${PROXY_CONFIG_ERROR}: unsupported domain pattern syntax: ${pattern}`,
      path,
    );
  }
}

const credentialProvider = struct<CredentialProviderConfig>("CredentialProviderConfig", {
  env: optional(array(string)),
  patterns: optional(array(string)),
  url_prefixes: optional(array(string)),
  url_prefix_from_env: optional(string),
  auth: optional(array(unitEnum(["bearer", "token", "basic", "header"]))),
  header: optional(string),
  prefix: optional(string),
}, { denyUnknownFields: true });

const remoteProxyConfig = struct<RemoteNetworkProxyConfig>("RemoteNetworkProxyConfig", {
  enabled: boolean,
  enableSocks5: boolean,
  enableSocks5Udp: boolean,
  allowUpstreamProxy: boolean,
  dangerouslyAllowAllUnixSockets: boolean,
  mode: unitEnum(["limited", "full"]),
  allowLocalBinding: boolean,
  domains: optional(record(unitEnum(["none", "allow", "deny"]))),
  reviewDomains: optional(array(string)),
  // Read through a buffer by the reference: errors name a number's value.
  unixSockets: optional(buffered(record(unitEnum(["allow", "deny"])))),
  credentialMasking: withDefault(boolean, false),
  credentialProviders: optional(buffered(record(credentialProvider))),
  transparentTcp: withDefault(boolean, false),
});

const auditMetadata = struct<NetworkProxyAuditMetadata>("NetworkProxyAuditMetadata", {
  conversationId: nullable(string),
  appVersion: nullable(string),
  userAccountId: nullable(string),
  authMode: nullable(string),
  originator: nullable(string),
  userEmail: nullable(string),
  terminalType: nullable(string),
  model: nullable(string),
  slug: nullable(string),
});

/** `process/start.networkProxy`, with the reference's semantic checks. */
const networkProxyLaunch: Decoder<NetworkProxyLaunch> = (v, path) => {
  const launch = struct<NetworkProxyLaunch>("RemoteNetworkProxyLaunchConfig", {
    proxy: remoteProxyConfig,
    auditMetadata: optional(auditMetadata),
    policyDecisionTimeoutMs: optional(u64),
    environmentId: optional(string),
    executionId: optional(string),
  })(v, path);
  if (launch.policyDecisionTimeoutMs === 0) {
    throw new DecodeError(
      "network policy decision callback timeout must be nonzero",
      join(path, "policyDecisionTimeoutMs"),
    );
  }
  const proxyPath = join(path, "proxy");
  if (!launch.proxy.enabled) {
    throw new DecodeError(
      `${PROXY_CONFIG_ERROR}: executor-local network proxy launch requires an enabled proxy`,
      join(proxyPath, "enabled"),
    );
  }
  if (launch.proxy.transparentTcp && !launch.proxy.enableSocks5) {
    throw new DecodeError(
      `${PROXY_CONFIG_ERROR}: transparent_tcp requires an enabled managed SOCKS5 proxy`,
      join(proxyPath, "transparentTcp"),
    );
  }
  for (const pattern of Object.keys(launch.proxy.domains ?? {})) {
    checkDomainPattern(pattern, join(proxyPath, "domains"));
  }
  for (const pattern of launch.proxy.reviewDomains ?? []) {
    checkDomainPattern(pattern, join(proxyPath, "reviewDomains"));
  }
  return launch;
};

/** `process/start`. */
export const processStartParams = struct<DecodedProcessStart>("ExecParams", {
  processId: string,
  metadata: nullable(metadata),
  argv,
  cwd: cwdUri,
  envPolicy: nullable(envPolicy),
  shellSnapshot: nullable(shellSnapshot),
  env: record(string),
  tty: boolean,
  pipeStdin: withDefault(boolean, false),
  arg0: nullable(string),
  sandbox,
  enforceManagedNetwork: withDefault(boolean, false),
  managedNetwork: optional(unknownValue),
  networkProxy: nullable(networkProxyLaunch),
  rows: optional(u16),
  cols: optional(u16),
});

/** `process/read`. */
export const processReadParams = struct<ProcessReadParams>("ReadParams", {
  processId: string,
  afterSeq: optional(u64),
  maxBytes: optional(usize),
  waitMs: optional(u64),
});

/** `process/write`. */
export const processWriteParams = struct<DecodedProcessWrite>("WriteParams", {
  processId: string,
  chunk: bytes,
  writeId: nonEmptyString("writeId must not be empty"),
});

/** Every signal name; `interrupt` is the only one the reference knows. */
export const SIGNAL_NAMES: readonly ProcessSignalName[] = [
  "interrupt",
  "terminate",
  "kill",
  "hangup",
  "quit",
  "user1",
  "user2",
];

/** `process/signal`. */
export const processSignalParams = struct<ProcessSignalParams>("SignalParams", {
  processId: string,
  signal: variant(SIGNAL_NAMES),
});

/** `process/terminate`. */
export const processTerminateParams = struct<ProcessTerminateParams>("TerminateParams", {
  processId: string,
  graceMs: optional(u64),
});

/** `http/request/pauseBody`, `resumeBody` and `cancelBody`. */
export const httpBodyFlowParams = struct<HttpBodyFlowParams>("HttpBodyFlowParams", {
  requestId: string,
});

/** `process/pauseOutput` and `process/resumeOutput`. */
export const processFlowParams = struct<ProcessFlowParams>("FlowParams", { processId: string });

/** `process/closeStdin`. */
export const processCloseStdinParams = struct<ProcessCloseStdinParams>("CloseStdinParams", {
  processId: string,
});

/** `process/resize`. */
export const processResizeParams = struct<ProcessResizeParams>("ResizeParams", {
  processId: string,
  rows: u16,
  cols: u16,
});

const followSymlinks = optionalOr(boolean, true);

/** `fs/readFile`. */
export const fsReadFileParams = struct<Sandboxed<FsReadFileParams>>(
  "ReadFileParams",
  { path: pathUri, followSymlinks, sandbox },
);

/** `fs/writeFile`. */
export const fsWriteFileParams = struct<DecodedFsWriteFile>("WriteFileParams", {
  path: pathUri,
  dataBase64: string,
  followSymlinks,
  sandbox,
});

/** `fs/createDirectory`. */
export const fsCreateDirectoryParams = struct<Sandboxed<FsCreateDirectoryParams>>(
  "CreateDirectoryParams",
  {
    path: pathUri,
    recursive: optionalOr(boolean, true),
    followSymlinks,
    sandbox,
  },
);

/** `fs/getMetadata`. */
export const fsGetMetadataParams = struct<Sandboxed<FsGetMetadataParams>>("GetMetadataParams", {
  path: pathUri,
  followSymlinks,
  sandbox,
});

/** `fs/canonicalize`. */
export const fsCanonicalizeParams = struct<FsCanonicalizeParams>("CanonicalizeParams", {
  path: pathUri,
  sandbox,
});

/** `fs/readDirectory`. */
export const fsReadDirectoryParams = struct<FsReadDirectoryParams>("ReadDirectoryParams", {
  path: pathUri,
  sandbox,
});

/** `fs/remove`. */
export const fsRemoveParams = struct<Sandboxed<FsRemoveParams>>(
  "RemoveParams",
  {
    path: pathUri,
    recursive: optionalOr(boolean, true),
    force: optionalOr(boolean, true),
    followSymlinks,
    sandbox,
  },
);

/** `fs/copy`. */
export const fsCopyParams = struct<FsCopyParams>("CopyParams", {
  sourcePath: pathUri,
  destinationPath: pathUri,
  recursive: boolean,
  sandbox,
});

/** `fs/open`. */
export const fsOpenParams = struct<Sandboxed<FsOpenParams>>(
  "OpenParams",
  {
    handleId: string,
    path: pathUri,
    mode: withDefault(unitEnum(["read", "replace"]), "read"),
    sandbox,
  },
);

/** `fs/readBlock`. */
export const fsReadBlockParams = struct<DecodedFsReadBlock>("ReadBlockParams", {
  handleId: string,
  offset: exactU64,
  len: usize,
});

/** `fs/writeBlock`. */
export const fsWriteBlockParams = struct<DecodedFsWriteBlock>("WriteBlockParams", {
  handleId: string,
  offset: exactU64,
  chunk: bytes,
});

/** `fs/close`. */
export const fsCloseParams = struct<FsCloseParams>("CloseParams", { handleId: string });

const walkOptions = struct<FsWalkOptions>("WalkOptions", {
  maxDepth: usize,
  maxDirectories: usize,
  maxEntries: usize,
  followDirectorySymlinks: boolean,
  pruneHiddenDirectories: boolean,
});

/** `fs/walk`. */
export const fsWalkParams = struct<FsWalkParams>("WalkParams", {
  path: pathUri,
  options: walkOptions,
  sandbox,
});

const tomlPath: Decoder<string[]> = (v, path) => {
  const segments = array(string)(v, path);
  if (segments.length === 0) {
    throw new DecodeError("TOML paths must contain at least one key segment", path);
  }
  return segments;
};

/** `capabilityRoots/discoverV1`. */
export const capabilityRootsDiscoverParams = struct<CapabilityRootsDiscoverParams>(
  "DiscoverCapabilityRootsParams",
  {
    roots: array(
      struct<Sandboxed<CapabilityRootParam>>("CapabilityRoot", {
        id: string,
        path: pathUri,
        sandbox,
      }),
    ),
  },
);

/** `capabilities/discoverV2`. */
export const capabilitiesDiscoverParams = struct<Sandboxed<CapabilitiesDiscoverParams>>(
  "DiscoverCapabilitiesParams",
  { cwd: pathUri, sandbox },
);

/** `environmentConfig/read`. */
export const environmentConfigReadParams: Decoder<EnvironmentConfigReadParams> = (v, path) => {
  const params = struct<EnvironmentConfigReadParams>("EnvironmentConfigReadParams", {
    cwd: pathUri,
    configPaths: array(tomlPath),
    requirementsPaths: array(tomlPath),
  })(v, path);
  if (params.configPaths.length === 0 && params.requirementsPaths.length === 0) {
    throw new DecodeError("at least one config or requirements path is required", path);
  }
  return params;
};

/** `fs/watchMissing`. */
export const fsWatchMissingParams = struct<FsWatchMissingParams>("WatchMissingParams", {
  watchId: u64,
  missing: array(pathUri),
  sandbox,
});

const httpHeader = struct<HttpHeaderParam>("HttpHeader", {
  name: string,
  value: string,
  valueEnvVar: nullable(string),
});

/** `http/request`. */
export const httpRequestParams = struct<DecodedHttpRequest>("HttpRequestParams", {
  method: string,
  url: string,
  headers: withDefault(array(httpHeader), []),
  bodyBase64: optional(bytes),
  timeoutMs: optional(u64),
  redirectPolicy: withDefault(unitEnum(["follow", "stop"]), "follow"),
  requestId: string,
  streamResponse: withDefault(boolean, false),
});

export type { HttpRequestParams };
