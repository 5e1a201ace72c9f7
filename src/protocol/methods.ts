/**
 * Every method and notification name of the exec-server protocol.
 *
 * @module
 */

/** Client → server requests. */
export const Method = {
  Initialize: "initialize",
  EnvironmentInfo: "environment/info",
  EnvironmentStatus: "environment/status",
  EnvironmentConfigRead: "environmentConfig/read",
  CapabilityRootsDiscoverV1: "capabilityRoots/discoverV1",
  CapabilitiesDiscoverV2: "capabilities/discoverV2",
  ProcessStart: "process/start",
  ProcessRead: "process/read",
  ProcessWrite: "process/write",
  ProcessSignal: "process/signal",
  ProcessTerminate: "process/terminate",
  ProcessCloseStdin: "process/closeStdin",
  ProcessResize: "process/resize",
  ProcessPauseOutput: "process/pauseOutput",
  ProcessResumeOutput: "process/resumeOutput",
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
  HttpRequest: "http/request",
  HttpPauseBody: "http/request/pauseBody",
  HttpResumeBody: "http/request/resumeBody",
  HttpCancelBody: "http/request/cancelBody",
} as const;

/** Client → server notifications. */
export const ClientNotification = {
  Initialized: "initialized",
} as const;

/** Server → client notifications. */
export const ServerNotification = {
  ProcessOutput: "process/output",
  ProcessExited: "process/exited",
  ProcessClosed: "process/closed",
  HttpBodyDelta: "http/request/bodyDelta",
  FsMissingChanged: "fs/missingChanged",
  NetworkPolicyDecision: "network/policyDecision",
} as const;

/** Requests the server sends the client (a client must answer them). */
export const ServerRequest = {
  NetworkPolicyRequest: "network/policyRequest",
} as const;

/** Any request method name. */
export type MethodName = typeof Method[keyof typeof Method];

/**
 * The family a method belongs to, as used in the lifecycle gating messages
 * (`client must call initialize before using <family> methods`).
 */
export function methodFamily(method: string): string {
  if (method.startsWith("process/")) return "exec";
  if (method.startsWith("fs/")) return "filesystem";
  if (method.startsWith("http/")) return "http";
  if (method === Method.EnvironmentInfo) return "environment info";
  if (method === Method.EnvironmentStatus) return "environment status";
  if (method === Method.EnvironmentConfigRead) return "environment config";
  if (method.startsWith("capabilit")) return "capability discovery";
  return method;
}

/**
 * Methods that must never wait behind ordinary work (the reference's
 * "control lane"): status, signals, termination, closing handles.
 */
export const CONTROL_METHODS: ReadonlySet<string> = new Set([
  Method.EnvironmentInfo,
  Method.EnvironmentStatus,
  Method.ProcessSignal,
  Method.ProcessTerminate,
  Method.ProcessResize,
  Method.ProcessPauseOutput,
  Method.ProcessResumeOutput,
  Method.FsClose,
  Method.HttpPauseBody,
  Method.HttpResumeBody,
  Method.HttpCancelBody,
]);

/**
 * What a request is about, for ordering: `process/*` requests name a
 * process (`processId`), file-handle requests a handle (`handleId`).
 * Requests about the same one take effect in arrival order, across lanes
 * (a `process/terminate` pipelined behind its `process/start` waits for it).
 */
const ORDERED_BY: ReadonlyMap<string, "processId" | "handleId"> = new Map([
  [Method.ProcessStart, "processId"],
  [Method.ProcessRead, "processId"],
  [Method.ProcessWrite, "processId"],
  [Method.ProcessSignal, "processId"],
  [Method.ProcessTerminate, "processId"],
  [Method.ProcessCloseStdin, "processId"],
  [Method.ProcessResize, "processId"],
  [Method.ProcessPauseOutput, "processId"],
  [Method.ProcessResumeOutput, "processId"],
  [Method.FsOpen, "handleId"],
  [Method.FsReadBlock, "handleId"],
  [Method.FsWriteBlock, "handleId"],
  [Method.FsClose, "handleId"],
]);

/** The ordering key of a request (see `ORDERED_BY`), or null when it has none. */
export function orderKeyOf(method: string, params: unknown): string | null {
  const field = ORDERED_BY.get(method);
  if (field === undefined || typeof params !== "object" || params === null) return null;
  const id = (params as Record<string, unknown>)[field];
  return typeof id === "string" ? `${field}\0${id}` : null;
}
