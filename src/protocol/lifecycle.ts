/**
 * The lifecycle and environment family: `initialize`, `environment/*`,
 * `environmentConfig/read` and capability discovery — wire types,
 * decoders and its rows of the method table (see `table.ts`).
 *
 * @module
 */

import {
  array,
  type DecodedOf,
  DecodeError,
  type Decoder,
  nullable,
  string,
  struct,
  structOf,
  u64,
  unit,
} from "./decode.ts";
import type { EmptyResult, RequestTable, Row } from "./table.ts";
import { pathUri } from "./path_uri.ts";
import {
  type FileSystemSandboxContext,
  optionalSandbox,
  type SandboxAvailability,
  type Sandboxed,
} from "./sandbox.ts";

/** Params of `initialize`. */
export interface InitializeParams {
  /** Free-form client name (may be empty). */
  clientName: string;
  /** Resume this detached session instead of creating one. */
  resumeSessionId?: string | null;
  /**
   * Extension: the largest message (bytes) this client accepts. Without it,
   * WebSocket clients are assumed to accept 64 MiB and stdio clients any
   * size; larger `fs/readFile` answers fail at once with `-32600`.
   */
  maxMessageBytes?: number | null;
}

/** Result of `initialize`. */
export interface InitializeResult {
  /** The session (new, or the resumed one). */
  sessionId: string;
  /** Same object as `environment/info` returns. */
  environmentInfo: EnvironmentInfo;
}

/** The server user's shell. */
export interface ShellInfo {
  /** `bash`, `zsh`, `sh`, … */
  name: string;
  /** Absolute path of the shell. */
  path: string;
}

/**
 * Feature flags. Reference flags keep their meaning; flags this server adds
 * are extensions a reference client ignores. Missing means false.
 */
export interface Capabilities {
  /** Reference: executor-local managed network proxy launch. */
  networkProxyLaunch: boolean;
  /** Reference: managed-network review domains. */
  networkProxyReviewDomains: boolean;
  /** Reference: credential masking in shell snapshots. */
  credentialMasking: boolean;
  /** Reference: custom credential masking providers. */
  credentialMaskingCustomProviders: boolean;
  /** Reference: sandbox honoured by capability discovery. */
  capabilityDiscoverySandbox: boolean;
  /** `fs/watchMissing` and `fs/missingChanged`. */
  fsWatchMissing: boolean;
  /** Reference: `capabilities/discoverV2`. */
  capabilityDiscoveryV2: boolean;
  /** Reference: `environmentConfig/read`. */
  environmentConfigRead: boolean;
  /** `valueEnvVar` in `http/request` headers. */
  httpHeaderEnvVars: boolean;
  /** Reference: fs handle methods honour `sandbox`. */
  sandboxedFileStreaming: boolean;
  /** `fs/open` with `mode: "replace"` and `fs/writeBlock`. */
  fileWriteStreaming: boolean;
  /** Reference: `process/start` field `shellSnapshot`. */
  shellSnapshotV2: boolean;
  /** Reference: Windows MXC sandbox. */
  windowsMxc: boolean;
  /** Reference (omitted when false): a writable root keeps a minimal `/dev`. */
  linuxRootWritePreservesDevices?: boolean;
  /** Reference (omitted when false): deny entries hold under a writable root. */
  linuxApprovedRootWritePreservesRestrictions?: boolean;
  /** Extension: `sandbox` on process/start and fs/* is enforced (bubblewrap); see `environment/info.sandbox`. */
  linuxSandbox: boolean;
  /** Extension: `tty: true` runs the child on a real pseudo-terminal. */
  tty: boolean;
  /** Extension: `process/resize` and initial `rows`/`cols` for terminals. */
  ptyResize: boolean;
  /** Extension: `process/signal` accepts terminate, kill, hangup, quit, user1, user2. */
  extendedSignals: boolean;
  /** Extension: `process/terminate` accepts `graceMs` (SIGTERM, then SIGKILL). */
  terminateGrace: boolean;
  /** Extension: `process/closeStdin` gives a piped child EOF. */
  closeStdin: boolean;
  /**
   * Extension: `process/pauseOutput` / `process/resumeOutput` hold one
   * process's notifications (its child blocks once 1 MiB waits) while the
   * connection keeps flowing for everything else.
   */
  outputFlowControl: boolean;
  /**
   * Extension: output not yet delivered is never dropped; a child whose
   * output nobody takes is paused instead, and a resumed session receives
   * the output produced while it was detached.
   */
  losslessOutput: boolean;
  /** Reference (0.171): raw TCP of sandboxed children captured into the proxy's policy. */
  networkProxyTransparentTcp?: boolean;
  /** Extension: buffered `http/request` bodies are capped with a clear error. */
  httpBodyLimit: boolean;
  /**
   * Extension: `http/request/pauseBody` / `resumeBody` / `cancelBody` hold
   * or stop one streamed response body (its upstream is read no further)
   * while the connection keeps flowing for everything else.
   */
  httpBodyFlowControl?: boolean;
  /**
   * Extension: writes respect what is on disk (devices and hard-linked or
   * attributed files are written in place, FIFOs refused), and a replace
   * handle whose write failed is never committed.
   */
  safeFileWrites: boolean;
  /**
   * Extension: stdin bytes a child has not read are bounded per process; a
   * write past the bound waits, then fails with a clear error.
   */
  boundedStdin: boolean;
  /**
   * Extension: this server runs an egress proxy and applies it to processes
   * started with `enforceManagedNetwork: true`.
   */
  managedNetworkProxy: boolean;
}

/** What `environment/info` (and `initialize`) report. */
export interface EnvironmentInfo {
  /** The server user's login shell. */
  shell: ShellInfo;
  /** Version of this server. */
  executorVersion: string;
  /**
   * Directories a harness puts first on a child's `PATH` for the server's
   * own helper programs (`file:` URIs; Codex 0.171 lists its bundled `rg`).
   * Empty here: this server ships no helper programs. Absent from older
   * servers.
   */
  prependPathDirs?: string[];
  /** The server's working directory (`file:` URI). */
  cwd: string;
  /** The server user's home directory (`file:` URI). */
  userHomeDir: string;
  /** `linux`, `macos` or `windows`. */
  platformOs: string;
  /** Directories from `TMPDIR` (`file:` URIs). */
  temporaryDirectories: string[];
  /** The OS temp directory (`file:` URI). */
  tempDir: string;
  /** Feature flags. */
  capabilities: Capabilities;
  /** Extension: whether `sandbox` requests can be honoured here, and if not, why. */
  sandbox?: SandboxAvailability;
}

/** Result of `environment/status`. */
export interface EnvironmentStatusResult {
  /** Always `ready`. */
  status: "ready";
}

/** A file returned by capability discovery. */
export interface CapabilityFile {
  /** `file:` URI. */
  path: string;
  /** Its text. */
  contents: string;
}

/** One skill's files. */
export interface CapabilitySkillFiles {
  /** `SKILL.md`. */
  instructions: CapabilityFile;
  /** `agents/openai.yaml` beside it, when present. */
  metadata: CapabilityFile | null;
}

/** A plugin root's files. */
export interface CapabilityPluginFiles {
  /** `.codex-plugin/plugin.json`. */
  manifest: CapabilityFile;
  /** `.mcp.json`, when present. */
  mcpConfig: CapabilityFile | null;
  /** `.app.json`, when present. */
  appsConfig: CapabilityFile | null;
}

/** A root to scan. */
export interface CapabilityRootParam {
  /** The caller's name for it. */
  id: string;
  /** Absolute path (a `file:` URI on the wire). */
  path: string;
  /** Scan inside this sandbox. */
  sandbox?: FileSystemSandboxContext;
}

/** Params of `capabilityRoots/discoverV1`. */
export interface CapabilityRootsDiscoverParams {
  /** The roots. */
  roots: CapabilityRootParam[];
}

/** What one root holds. */
export interface CapabilityRootResult {
  /** The root's id. */
  id: string;
  /** The root (`file:` URI). */
  path: string;
  /** The root's own plugin. */
  plugin: CapabilityPluginFiles | null;
  /** Every skill in its tree. */
  skills: CapabilitySkillFiles[];
  /** Every plugin manifest in its tree. */
  namespaceManifests: CapabilityFile[];
  /** What was skipped and why. */
  warnings: string[];
  /** Why the root itself could not be scanned. */
  error: string | null;
}

/** Result of `capabilityRoots/discoverV1`. */
export interface CapabilityRootsDiscoverResult {
  /** One entry per requested root, in order. */
  roots: CapabilityRootResult[];
}

/** Params of `capabilities/discoverV2`. */
export interface CapabilitiesDiscoverParams {
  /** The harness's working directory (absolute; a `file:` URI on the wire). */
  cwd: string;
  /** Discover inside this sandbox. */
  sandbox?: FileSystemSandboxContext;
}

/** A tool a skill depends on (`agents/openai.yaml`). */
export interface SkillToolDependency {
  /** Kind, e.g. `env_var` or `mcp`. */
  type: string;
  /** What is needed. */
  value: string;
  /** Why. */
  description: string | null;
  /** For MCP servers. */
  transport: string | null;
  /** For MCP servers. */
  command: string | null;
  /** For MCP servers. */
  url: string | null;
  /** For MCP servers with OAuth. */
  oauthCallbackPort: number | null;
}

/** A skill's dependencies. */
export interface SkillDependencies {
  /** Tools. */
  tools: SkillToolDependency[];
}

/** A skill's invocation policy. */
export interface SkillPolicy {
  /** May the model use it without being asked. */
  allowImplicitInvocation: boolean | null;
  /** Products it is for. */
  products: string[];
}

/** A parsed skill. */
export interface DiscoveredSkill {
  /** From the front matter. */
  name: string;
  /** From the front matter. */
  description: string;
  /** `metadata.short-description`. */
  shortDescription: string | null;
  /** Its `SKILL.md` (`file:` URI). */
  path: string;
  /** Where it was found. */
  discoveryRoot?: { id: string; path: string };
  /** From `agents/openai.yaml`. */
  dependencies: SkillDependencies | null;
  /** From `agents/openai.yaml`. */
  policy: SkillPolicy | null;
}

/** An installed, enabled plugin. */
export interface DiscoveredPlugin {
  /** `NAME@MARKETPLACE`. */
  id: string;
  /** Its name. */
  displayName: string;
  /** Always null here. */
  remotePluginId: string | null;
  /** Installed version. */
  version: string;
  /** Its directory (`file:` URI). */
  root: string;
  /** Manifest and configuration files. */
  files: CapabilityPluginFiles;
  /** Its skills (`NAME:SKILL`). */
  skills: DiscoveredSkill[];
}

/** Result of `capabilities/discoverV2`. */
export interface CapabilitiesDiscoverResult {
  /** Enabled plugins. */
  plugins: DiscoveredPlugin[];
  /** Skills in the Codex home. */
  skills: DiscoveredSkill[];
  /** What could not be loaded. */
  warnings: string[];
}

/** Params of `environmentConfig/read`. */
export interface EnvironmentConfigReadParams {
  /** Where project layers are looked for (absolute path; a `file:` URI on the wire). */
  cwd: string;
  /** TOML key paths wanted from the configuration layers. */
  configPaths: string[][];
  /** TOML key paths wanted from the requirements layers. */
  requirementsPaths: string[][];
}

/** One configuration file, cut down to the requested paths. */
export interface ConfigLayer {
  /** Which file, e.g. `user (/home/me/.codex/config.toml)`. */
  source: string;
  /** The directory relative paths in it resolve against (`file:` URI). */
  baseDir: string;
  /** The selected part, as TOML text. */
  toml: string;
}

/** Layers in precedence order (lowest first). */
export interface ConfigLayerStack {
  /** The layers holding any requested path. */
  layers: ConfigLayer[];
  /** Where the harness inserts cloud-managed layers (after the system ones). */
  cloudInsertionIndex: number;
}

/** Result of `environmentConfig/read`. */
export interface EnvironmentConfigReadResult {
  /** The user's home directory (`file:` URI). */
  userHomeDir: string;
  /** Codex home on the executor (`file:` URI). */
  codexHomeDir: string;
  /** The executor's host name. */
  hostname: string;
  /** Configuration layers. */
  config: ConfigLayerStack;
  /** Requirements layers. */
  requirements: ConfigLayerStack;
}

/** `initialize`. */
const initializeParams = struct<InitializeParams>("InitializeParams", {
  clientName: string,
  resumeSessionId: nullable(string),
  maxMessageBytes: nullable(u64),
});

/** Methods without params. */
const noParams = unit;

const tomlPath: Decoder<string[]> = (v, path) => {
  const segments = array(string)(v, path);
  if (segments.length === 0) {
    throw new DecodeError("TOML paths must contain at least one key segment", path);
  }
  return segments;
};

/** `capabilityRoots/discoverV1`. */
const capabilityRootsDiscoverParams = struct<CapabilityRootsDiscoverParams>(
  "DiscoverCapabilityRootsParams",
  {
    roots: array(
      struct<Sandboxed<CapabilityRootParam>>("CapabilityRoot", {
        id: string,
        path: pathUri,
        sandbox: optionalSandbox,
      }),
    ),
  },
);

/** `capabilities/discoverV2`. */
const capabilitiesDiscoverParams = structOf(
  "DiscoverCapabilitiesParams",
  { cwd: pathUri, sandbox: optionalSandbox },
);

/** `environmentConfig/read`. */
const environmentConfigReadParams: Decoder<EnvironmentConfigReadParams> = (v, path) => {
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

/** The family's request names. */
export const LifecycleMethod = {
  Initialize: "initialize",
  EnvironmentInfo: "environment/info",
  EnvironmentStatus: "environment/status",
  EnvironmentConfigRead: "environmentConfig/read",
  CapabilityRootsDiscoverV1: "capabilityRoots/discoverV1",
  CapabilitiesDiscoverV2: "capabilities/discoverV2",
} as const;

/** Client → server notifications. */
export const ClientNotification = {
  Initialized: "initialized",
} as const;

/** The family's rows of the method table. */
export interface LifecycleMethods {
  /** `initialize`. */
  [LifecycleMethod.Initialize]: Row<InitializeParams, InitializeResult>;
  /** `environment/info`. */
  [LifecycleMethod.EnvironmentInfo]: Row<EmptyResult | undefined, EnvironmentInfo>;
  /** `environment/status`. */
  [LifecycleMethod.EnvironmentStatus]: Row<EmptyResult | undefined, EnvironmentStatusResult>;
  /** `environmentConfig/read`. */
  [LifecycleMethod.EnvironmentConfigRead]: Row<
    EnvironmentConfigReadParams,
    EnvironmentConfigReadResult
  >;
  /** `capabilityRoots/discoverV1`. */
  [LifecycleMethod.CapabilityRootsDiscoverV1]: Row<
    CapabilityRootsDiscoverParams,
    CapabilityRootsDiscoverResult
  >;
  /** `capabilities/discoverV2`. */
  [LifecycleMethod.CapabilitiesDiscoverV2]: Row<
    CapabilitiesDiscoverParams,
    CapabilitiesDiscoverResult
  >;
}

/** What the family's decoders give its handlers, where more than the params as sent. */
export interface LifecycleDecoded {
  [LifecycleMethod.EnvironmentInfo]: EmptyResult;
  [LifecycleMethod.EnvironmentStatus]: EmptyResult;
  [LifecycleMethod.CapabilitiesDiscoverV2]: DecodedOf<typeof capabilitiesDiscoverParams>;
}

/** How the server decodes and dispatches the family's requests. */
export const lifecycleRequests: RequestTable<LifecycleMethods, LifecycleDecoded> = {
  [LifecycleMethod.Initialize]: { decode: initializeParams },
  [LifecycleMethod.EnvironmentInfo]: { decode: noParams, lane: "control" },
  [LifecycleMethod.EnvironmentStatus]: { decode: noParams, lane: "control" },
  [LifecycleMethod.EnvironmentConfigRead]: { decode: environmentConfigReadParams },
  [LifecycleMethod.CapabilityRootsDiscoverV1]: { decode: capabilityRootsDiscoverParams },
  [LifecycleMethod.CapabilitiesDiscoverV2]: { decode: capabilitiesDiscoverParams },
};
