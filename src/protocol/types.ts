/**
 * Params, results and notification payloads of the exec-server protocol.
 * Paths are `file:` URI strings on the wire; byte fields are standard
 * padded base64 strings.
 *
 * @module
 */

// ---------------------------------------------------------------------------
// Lifecycle and environment

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

/** Extension of `environment/info`: the Linux sandbox (bubblewrap). */
export interface SandboxAvailability {
  /** Sandboxed requests are served (otherwise they get `-32603` with `reason`). */
  available: boolean;
  /** The enforcement mechanism. */
  mechanism: "bubblewrap";
  /** Why not, and how to fix it (empty when available). */
  reason: string;
}

/** Result of `environment/status`. */
export interface EnvironmentStatusResult {
  /** Always `ready`. */
  status: "ready";
}

/** The shell a snapshot is taken of. */
export interface ShellSpec {
  /** `bash`, `zsh`, `sh`, `powershell` or `cmd`. */
  name: string;
  /** Its absolute path. */
  path: string;
}

/** `process/start.shellSnapshot`. */
export interface ShellSnapshotParams {
  /** Commands of one scope (a Codex thread) share one snapshot. */
  scopeId: string;
  /** The shell. */
  shell: ShellSpec;
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

// ---------------------------------------------------------------------------
// Processes

/** Output stream names. */
export type OutputStream = "stdout" | "stderr" | "pty";

/** Which of the server's variables a child starts from. */
export type EnvInherit = "all" | "core" | "none";

/** How to derive a child's environment from the server's. */
export interface EnvPolicy {
  /** Starting set. */
  inherit: EnvInherit;
  /** Skip dropping `*KEY*`, `*SECRET*`, `*TOKEN*`. */
  ignoreDefaultExcludes: boolean;
  /** Globs of names to drop (case-insensitive). */
  exclude: string[];
  /** Variables to set. */
  set: Record<string, string>;
  /** When non-empty, keep only names matching one of these globs. */
  includeOnly: string[];
}

/** Telemetry attached to a process (not interpreted). */
export interface ProcessMetadata {
  /** A UUID. */
  threadId?: string | null;
  /** Opaque id. */
  toolCallId?: string | null;
}

/** Params of `process/start`. */
export interface ProcessStartParams {
  /** Client-chosen id, unique within the session. */
  processId: string;
  /** Telemetry. */
  metadata?: ProcessMetadata | null;
  /** Program and arguments (non-empty). */
  argv: string[];
  /** Working directory (`file:` URI). */
  cwd: string;
  /** Derive the environment from the server's (else exactly `env`). */
  envPolicy?: EnvPolicy | null;
  /**
   * Codex's shell snapshot: the login shell's state is captured once per
   * scope and restored for each `SHELL -lc CMD` of that scope instead of a
   * login (capability `shellSnapshotV2`).
   */
  shellSnapshot?: ShellSnapshotParams | null;
  /** Variables for the child (overlaid last). */
  env: Record<string, string>;
  /** Run on a pseudo-terminal. */
  tty: boolean;
  /** Keep stdin open for `process/write`. */
  pipeStdin?: boolean;
  /** What the child sees as `argv[0]`. */
  arg0?: string | null;
  /** Confine the process (null or absent: unconfined). */
  sandbox?: FileSystemSandboxContext | null;
  /** Managed network enforcement (no effect without a sandbox). */
  enforceManagedNetwork?: boolean;
  /** Managed network settings. */
  managedNetwork?: unknown;
  /**
   * An executor-local egress proxy for this process alone (`networkProxyLaunch`):
   * started before the child, its address put in the child's proxy variables,
   * stopped when the process closes.
   */
  networkProxy?: NetworkProxyLaunch | null;
  /** Extension: terminal rows (default 24). */
  rows?: number;
  /** Extension: terminal columns (default 80). */
  cols?: number;
}

/** Result of `process/start`. */
export interface ProcessStartResult {
  /** The id. */
  processId: string;
  /** `linuxSeccomp` when confined (as the reference reports), `none` otherwise. */
  sandboxType: string;
}

/** Params of `process/read`. */
export interface ProcessReadParams {
  /** The process. */
  processId: string;
  /** Return chunks with a greater `seq` (default 0). */
  afterSeq?: number;
  /** Stop after this many bytes (at least one chunk is returned). */
  maxBytes?: number;
  /** Long-poll up to this many milliseconds for something new. */
  waitMs?: number;
}

/** One retained output chunk. */
export interface OutputChunk {
  /** Sequence number. */
  seq: number;
  /** Stream it came from. */
  stream: OutputStream;
  /** Bytes (base64). */
  chunk: string;
}

/** Result of `process/read`. */
export interface ProcessReadResult {
  /** Retained chunks after `afterSeq`, oldest first. */
  chunks: OutputChunk[];
  /** Where to continue reading. */
  nextSeq: number;
  /** The child has exited. */
  exited: boolean;
  /** Its exit code, once exited. */
  exitCode: number | null;
  /** Output and exit are complete. */
  closed: boolean;
  /** Backend failure (always null here). */
  failure: string | null;
  /** Sandbox denial (always false here). */
  sandboxDenied: boolean;
}

/** Params of `process/write`. */
export interface ProcessWriteParams {
  /** The process. */
  processId: string;
  /** Bytes to write (base64). */
  chunk: string;
  /** Idempotency key (non-empty). */
  writeId: string;
}

/** Outcome of a write or of closing stdin. */
export type WriteStatus = "accepted" | "unknownProcess" | "stdinClosed" | "starting";

/** Result of `process/write` and `process/closeStdin`. */
export interface ProcessWriteResult {
  /** What happened. */
  status: WriteStatus;
}

/** Signals `process/signal` accepts (`interrupt` only in the reference). */
export type ProcessSignalName =
  | "interrupt"
  | "terminate"
  | "kill"
  | "hangup"
  | "quit"
  | "user1"
  | "user2";

/** Params of `process/signal`. */
export interface ProcessSignalParams {
  /** The process. */
  processId: string;
  /** Signal to send to its process group. */
  signal: ProcessSignalName;
}

/** Params of `process/terminate`. */
export interface ProcessTerminateParams {
  /** The process. */
  processId: string;
  /** Extension: SIGTERM first, SIGKILL after this many milliseconds. */
  graceMs?: number;
}

/** Result of `process/terminate`. */
export interface ProcessTerminateResult {
  /** The process was running (and is now being killed). */
  running: boolean;
}

/**
 * Params of `http/request/pauseBody`, `http/request/resumeBody` and
 * `http/request/cancelBody` (extension): one streamed response body.
 */
export interface HttpBodyFlowParams {
  /** The `requestId` of the streamed `http/request`. */
  requestId: string;
}

/** Result of the body flow methods. */
export interface HttpBodyFlowResult {
  /** The stream was still active (false: it had already ended). */
  active: boolean;
}

/** Params of `process/pauseOutput` and `process/resumeOutput` (extension). */
export interface ProcessFlowParams {
  /** The process. */
  processId: string;
}

/** Params of `process/closeStdin` (extension). */
export interface ProcessCloseStdinParams {
  /** The process. */
  processId: string;
}

/** Params of `process/resize` (extension). */
export interface ProcessResizeParams {
  /** The process (must run on a terminal). */
  processId: string;
  /** New number of rows. */
  rows: number;
  /** New number of columns. */
  cols: number;
}

/** `process/output` notification. */
export interface ProcessOutputNotification {
  /** The process. */
  processId: string;
  /** Sequence number. */
  seq: number;
  /** Stream. */
  stream: OutputStream;
  /** Bytes (base64). */
  chunk: string;
}

/** `process/exited` notification. */
export interface ProcessExitedNotification {
  /** The process. */
  processId: string;
  /** Sequence number. */
  seq: number;
  /** Exit code (128+N for a death by signal N). */
  exitCode: number;
  /** Always false here. */
  sandboxDenied: boolean;
  /** Extension: name of the signal that killed it, when one did. */
  signal?: string;
}

/** `process/closed` notification. */
export interface ProcessClosedNotification {
  /** The process. */
  processId: string;
  /** Sequence number (the last one). */
  seq: number;
}

// ---------------------------------------------------------------------------
// Files

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

// ---------------------------------------------------------------------------
// HTTP

/** One request header. */
export interface HttpHeaderParam {
  /** Header name. */
  name: string;
  /** Value (prefix when `valueEnvVar` is set). */
  value: string;
  /** Append the value of this server environment variable. */
  valueEnvVar?: string | null;
}

/** Params of `http/request`. */
export interface HttpRequestParams {
  /** Method, sent as given. */
  method: string;
  /** Absolute `http(s)` URL. */
  url: string;
  /** Ordered headers, repeats kept. */
  headers?: HttpHeaderParam[];
  /** Body (base64). */
  bodyBase64?: string | null;
  /** Deadline for the whole exchange (milliseconds). */
  timeoutMs?: number | null;
  /** `follow` (default) or `stop`. */
  redirectPolicy?: "follow" | "stop";
  /** Stream id for body deltas. */
  requestId: string;
  /** Deliver the body as `http/request/bodyDelta` notifications. */
  streamResponse?: boolean;
}

/** One response header. */
export interface HttpHeader {
  /** Lower-case name. */
  name: string;
  /** Value. */
  value: string;
}

/** Result of `http/request`. */
export interface HttpResponseResult {
  /** Status code. */
  status: number;
  /** Headers in order. */
  headers: HttpHeader[];
  /** Body (base64; empty when streamed). */
  bodyBase64: string;
}

/** `http/request/bodyDelta` notification. */
export interface HttpBodyDeltaNotification {
  /** The stream. */
  requestId: string;
  /** From 1. */
  seq: number;
  /** Bytes (base64). */
  deltaBase64: string;
  /** Last delta. */
  done: boolean;
  /** Failure message on the last delta, else null. */
  error: string | null;
}

// ---------------------------------------------------------------------------
// Sandbox (`sandbox` on process/start and fs/*)

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

/** A domain's entry in a launched proxy's policy. */
export type NetworkDomainPermission = "none" | "allow" | "deny";

/** The policy of a per-process proxy (`process/start.networkProxy.proxy`). */
export interface RemoteNetworkProxyConfig {
  /** Must be true: a launch always runs a proxy. */
  enabled: boolean;
  /** Also listen for SOCKS5 (`ALL_PROXY`). */
  enableSocks5: boolean;
  /** Allow SOCKS5 UDP ASSOCIATE. */
  enableSocks5Udp: boolean;
  /** Chain through the server's own `HTTP(S)_PROXY`. */
  allowUpstreamProxy: boolean;
  /** macOS only; refused requests here. */
  dangerouslyAllowAllUnixSockets: boolean;
  /** `full`: every method; `limited`: GET, HEAD and OPTIONS only. */
  mode: "limited" | "full";
  /** Loopback and private destinations allowed. */
  allowLocalBinding: boolean;
  /** Domain pattern → permission. */
  domains?: Record<string, NetworkDomainPermission>;
  /** Domains asked about (`network/policyRequest`) even when allowed. */
  reviewDomains?: string[];
  /** Unix socket path → permission (macOS only). */
  unixSockets?: Record<string, "allow" | "deny">;
  /**
   * Mask the GitHub and OpenAI credentials of a `bash -c` child: it sees
   * stand-ins, the proxy puts the real values back for their hosts
   * (capability `credentialMasking`). Default false.
   */
  credentialMasking?: boolean;
  /**
   * Codex 0.171: more credentials to mask, by name (capability
   * `credentialMaskingCustomProviders`). A provider that cannot be applied
   * (no URL prefix, a pattern that does not compile or matches nothing…)
   * is ignored, as the reference ignores it.
   */
  credentialProviders?: Record<string, CredentialProviderConfig>;
  /**
   * Codex 0.171: capture the sandboxed child's raw TCP connections into the
   * proxy's policy (capability `networkProxyTransparentTcp`): the sandbox is
   * routed to the proxy, and a start this server cannot capture is refused,
   * never run without it. Default false.
   */
  transparentTcp?: boolean;
}

/** How a stand-in is presented and replaced (`bearer` when none is given). */
export type CredentialAuthScheme = "bearer" | "token" | "basic" | "header";

/** A custom credential for the broker (`RemoteNetworkProxyConfig.credentialProviders`). */
export interface CredentialProviderConfig {
  /** Environment variables holding it. */
  env?: string[];
  /** Regular expressions a real value must match whole; its stand-in is generated from the one it matches. */
  patterns?: string[];
  /** `https://` URL prefixes the real value is sent to. */
  url_prefixes?: string[];
  /** A variable of the child's environment holding one more prefix. */
  url_prefix_from_env?: string;
  /** Where a stand-in is replaced (default `["bearer"]`). */
  auth?: CredentialAuthScheme[];
  /** The header of `auth: ["header"]`. */
  header?: string;
  /** What precedes the credential in that header. */
  prefix?: string;
}

/** Who a launched proxy's decisions are attributed to (audit events only). */
export interface NetworkProxyAuditMetadata {
  /** `conversation.id`. */
  conversationId?: string | null;
  /** `app.version`. */
  appVersion?: string | null;
  /** `user.account_id`. */
  userAccountId?: string | null;
  /** `auth_mode`. */
  authMode?: string | null;
  /** `originator`. */
  originator?: string | null;
  /** `user.email`. */
  userEmail?: string | null;
  /** `terminal.type`. */
  terminalType?: string | null;
  /** `model`. */
  model?: string | null;
  /** `slug`. */
  slug?: string | null;
}

/** `process/start.networkProxy`. */
export interface NetworkProxyLaunch {
  /** The proxy's policy. */
  proxy: RemoteNetworkProxyConfig;
  /**
   * When set, hosts the policy does not allow (and review domains) are put to
   * the client as `network/policyRequest`; no answer within this time denies.
   */
  policyDecisionTimeoutMs?: number;
  /** Attribution of the proxy's audit events. */
  auditMetadata?: NetworkProxyAuditMetadata;
  /** The environment the process belongs to (audit only). */
  environmentId?: string;
  /** The execution the process belongs to (audit only). */
  executionId?: string;
}

/** What a `network/policyRequest` asks about. */
export interface NetworkPolicyQuestion {
  /** `http`, `https_connect`, `socks5_tcp` or `socks5_udp`. */
  protocol: "http" | "https_connect" | "socks5_tcp" | "socks5_udp";
  /** The destination host as the child named it. */
  host: string;
  /** The destination port. */
  port: number;
}

/** Server → client request `network/policyRequest`. */
export interface NetworkPolicyRequestParams {
  /** The process whose proxy asks. */
  processId: string;
  /** The destination. */
  request: NetworkPolicyQuestion;
}

/** The client's answer to `network/policyRequest`. */
export interface NetworkPolicyRequestResult {
  /** Allow, deny (with a reason) or ask (denied now, with a reason). */
  decision: { type: "allow" } | { type: "deny"; reason: string } | { type: "ask"; reason: string };
}

/** Server notification `network/policyDecision`: one per policy decision of a launched proxy. */
export interface NetworkPolicyDecisionNotification {
  /** The process whose proxy decided. */
  processId: string;
  /** RFC 3339 with milliseconds. */
  timestamp: string;
  /** `domain` for host policy, `non_domain` for mode and state guards. */
  scope: "domain" | "non_domain";
  /** `allow`, `deny` or `ask`. */
  decision: "allow" | "deny" | "ask";
  /** `baseline_policy`, `mode_guard`, `proxy_state` or `decider`. */
  source: string;
  /** Why (`allow` for baseline allows). */
  reason: string;
  /** The protocol. */
  protocol: string;
  /** The destination host. */
  host: string;
  /** The destination port. */
  port: number;
  /** The HTTP method (`CONNECT` for tunnels); absent for SOCKS5. */
  method?: string;
  /** The child's address as the proxy saw it. */
  client: string;
  /** A client's allow overriding the policy. */
  policyOverride: boolean;
}
