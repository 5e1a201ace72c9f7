/**
 * Every request method with its params and result types: the single place
 * the client's typed `request` (and anything else that calls the server)
 * takes its shapes from. A compile-time check keeps it complete: a method
 * added to `Method` without an entry here fails type-checking.
 *
 * @module
 */

import type { Method, MethodName } from "./methods.ts";
import type {
  CapabilitiesDiscoverParams,
  CapabilitiesDiscoverResult,
  CapabilityRootsDiscoverParams,
  CapabilityRootsDiscoverResult,
  EnvironmentConfigReadParams,
  EnvironmentConfigReadResult,
  EnvironmentInfo,
  EnvironmentStatusResult,
  FsCanonicalizeParams,
  FsCanonicalizeResult,
  FsCloseParams,
  FsCopyParams,
  FsCreateDirectoryParams,
  FsGetMetadataParams,
  FsMetadata,
  FsOpenParams,
  FsOpenResult,
  FsReadBlockParams,
  FsReadBlockResult,
  FsReadDirectoryParams,
  FsReadDirectoryResult,
  FsReadFileParams,
  FsReadFileResult,
  FsRemoveParams,
  FsWalkParams,
  FsWalkResult,
  FsWatchMissingParams,
  FsWatchMissingResult,
  FsWriteBlockParams,
  FsWriteFileParams,
  HttpBodyFlowParams,
  HttpBodyFlowResult,
  HttpRequestParams,
  HttpResponseResult,
  InitializeParams,
  InitializeResult,
  ProcessCloseStdinParams,
  ProcessFlowParams,
  ProcessReadParams,
  ProcessReadResult,
  ProcessResizeParams,
  ProcessSignalParams,
  ProcessStartParams,
  ProcessStartResult,
  ProcessTerminateParams,
  ProcessTerminateResult,
  ProcessWriteParams,
  ProcessWriteResult,
} from "./types.ts";

/** An empty object (`{}`), the result of methods that only succeed or fail. */
export type EmptyResult = Record<string, never>;

/** Params and result of one method. */
interface Shape<P, R> {
  /** What the client sends. */
  params: P;
  /** What the server answers. */
  result: R;
}

/** Method name → params and result (wire shapes: paths are `file:` URIs). */
export interface MethodMap {
  /** `initialize`. */
  [Method.Initialize]: Shape<InitializeParams, InitializeResult>;
  /** `environment/info`. */
  [Method.EnvironmentInfo]: Shape<EmptyResult | undefined, EnvironmentInfo>;
  /** `environment/status`. */
  [Method.EnvironmentStatus]: Shape<EmptyResult | undefined, EnvironmentStatusResult>;
  /** `environmentConfig/read`. */
  [Method.EnvironmentConfigRead]: Shape<EnvironmentConfigReadParams, EnvironmentConfigReadResult>;
  /** `capabilityRoots/discoverV1`. */
  [Method.CapabilityRootsDiscoverV1]: Shape<
    CapabilityRootsDiscoverParams,
    CapabilityRootsDiscoverResult
  >;
  /** `capabilities/discoverV2`. */
  [Method.CapabilitiesDiscoverV2]: Shape<CapabilitiesDiscoverParams, CapabilitiesDiscoverResult>;
  /** `process/start`. */
  [Method.ProcessStart]: Shape<ProcessStartParams, ProcessStartResult>;
  /** `process/read`. */
  [Method.ProcessRead]: Shape<ProcessReadParams, ProcessReadResult>;
  /** `process/write`. */
  [Method.ProcessWrite]: Shape<ProcessWriteParams, ProcessWriteResult>;
  /** `process/signal`. */
  [Method.ProcessSignal]: Shape<ProcessSignalParams, EmptyResult>;
  /** `process/terminate`. */
  [Method.ProcessTerminate]: Shape<ProcessTerminateParams, ProcessTerminateResult>;
  /** `process/closeStdin`. */
  [Method.ProcessCloseStdin]: Shape<ProcessCloseStdinParams, EmptyResult>;
  /** `process/resize`. */
  [Method.ProcessResize]: Shape<ProcessResizeParams, EmptyResult>;
  /** `process/pauseOutput`. */
  [Method.ProcessPauseOutput]: Shape<ProcessFlowParams, EmptyResult>;
  /** `process/resumeOutput`. */
  [Method.ProcessResumeOutput]: Shape<ProcessFlowParams, EmptyResult>;
  /** `fs/readFile`. */
  [Method.FsReadFile]: Shape<FsReadFileParams, FsReadFileResult>;
  /** `fs/writeFile`. */
  [Method.FsWriteFile]: Shape<FsWriteFileParams, EmptyResult>;
  /** `fs/createDirectory`. */
  [Method.FsCreateDirectory]: Shape<FsCreateDirectoryParams, EmptyResult>;
  /** `fs/getMetadata`. */
  [Method.FsGetMetadata]: Shape<FsGetMetadataParams, FsMetadata>;
  /** `fs/canonicalize`. */
  [Method.FsCanonicalize]: Shape<FsCanonicalizeParams, FsCanonicalizeResult>;
  /** `fs/readDirectory`. */
  [Method.FsReadDirectory]: Shape<FsReadDirectoryParams, FsReadDirectoryResult>;
  /** `fs/remove`. */
  [Method.FsRemove]: Shape<FsRemoveParams, EmptyResult>;
  /** `fs/copy`. */
  [Method.FsCopy]: Shape<FsCopyParams, EmptyResult>;
  /** `fs/open`. */
  [Method.FsOpen]: Shape<FsOpenParams, FsOpenResult>;
  /** `fs/readBlock`. */
  [Method.FsReadBlock]: Shape<FsReadBlockParams, FsReadBlockResult>;
  /** `fs/writeBlock`. */
  [Method.FsWriteBlock]: Shape<FsWriteBlockParams, EmptyResult>;
  /** `fs/close`. */
  [Method.FsClose]: Shape<FsCloseParams, EmptyResult>;
  /** `fs/walk`. */
  [Method.FsWalk]: Shape<FsWalkParams, FsWalkResult>;
  /** `fs/watchMissing`. */
  [Method.FsWatchMissing]: Shape<FsWatchMissingParams, FsWatchMissingResult>;
  /** `http/request`. */
  [Method.HttpRequest]: Shape<HttpRequestParams, HttpResponseResult>;
  /** `http/request/pauseBody` (extension). */
  [Method.HttpPauseBody]: Shape<HttpBodyFlowParams, HttpBodyFlowResult>;
  /** `http/request/resumeBody` (extension). */
  [Method.HttpResumeBody]: Shape<HttpBodyFlowParams, HttpBodyFlowResult>;
  /** `http/request/cancelBody` (extension). */
  [Method.HttpCancelBody]: Shape<HttpBodyFlowParams, HttpBodyFlowResult>;
}

/** The params of method `M`. */
export type MethodParams<M extends MethodName> = MethodMap[M]["params"];
/** The result of method `M`. */
export type MethodResult<M extends MethodName> = MethodMap[M]["result"];

/** Sends one typed request (what the client's parts share). */
export type RequestFn = <M extends MethodName>(
  method: M,
  params: MethodParams<M>,
) => Promise<MethodResult<M>>;

// Every method has an entry, and every entry is a method.
type Missing = Exclude<MethodName, keyof MethodMap>;
type Extra = Exclude<keyof MethodMap, MethodName>;
const complete: [Missing, Extra] extends [never, never] ? true : never = true;
void complete;
