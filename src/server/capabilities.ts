/**
 * The capabilities this server advertises, derived from what is actually
 * registered, so a flag can never claim an unimplemented method.
 * Codex-specific features are `false` until implemented.
 *
 * @module
 */

import { Method } from "../protocol/methods.ts";
import type { Capabilities } from "../protocol/types.ts";

/** Runtime facts that decide some flags. */
export interface CapabilityInputs {
  /** Names of the registered methods. */
  readonly methods: ReadonlySet<string>;
  /** A PTY backend is available for `tty: true`. */
  readonly tty: boolean;
  /** Sandboxed requests can be enforced (bubblewrap works). */
  readonly sandbox?: boolean;
  /** An egress proxy is applied to managed-network processes. */
  readonly managedNetworkProxy?: boolean;
  /** A sandbox's raw TCP can be captured (TUN device, setpriv). */
  readonly transparentTcp?: boolean;
}

/** Builds the capability flags for `environment/info`. */
export function serverCapabilities(inputs: CapabilityInputs): Capabilities {
  const has = (method: string) => inputs.methods.has(method);
  const processes = has(Method.ProcessStart);
  return {
    // process/start.networkProxy: a proxy per process, policy questions put
    // to the client (network/policyRequest), review domains honoured.
    networkProxyLaunch: processes,
    networkProxyReviewDomains: processes,
    // process/start.networkProxy.proxy.credentialMasking (bash -c children).
    credentialMasking: processes,
    credentialMaskingCustomProviders: processes,
    capabilityDiscoverySandbox: (inputs.sandbox ?? false) && has(Method.CapabilityRootsDiscoverV1),
    fsWatchMissing: has(Method.FsWatchMissing),
    capabilityDiscoveryV2: has(Method.CapabilitiesDiscoverV2),
    environmentConfigRead: has(Method.EnvironmentConfigRead),
    httpHeaderEnvVars: has(Method.HttpRequest),
    sandboxedFileStreaming: (inputs.sandbox ?? false) && has(Method.FsOpen),
    fileWriteStreaming: has(Method.FsWriteBlock),
    shellSnapshotV2: processes,
    windowsMxc: false,
    // A writable root still gets a minimal /dev, and deny entries inside it
    // still hold (tests/sandbox/sandbox_test.ts checks both against the reference).
    ...(inputs.sandbox
      ? { linuxRootWritePreservesDevices: true, linuxApprovedRootWritePreservesRestrictions: true }
      : {}),
    linuxSandbox: (inputs.sandbox ?? false) && (processes || has(Method.FsOpen)),
    tty: processes && inputs.tty,
    ptyResize: processes && inputs.tty && has(Method.ProcessResize),
    extendedSignals: processes,
    terminateGrace: processes,
    closeStdin: has(Method.ProcessCloseStdin),
    outputFlowControl: has(Method.ProcessPauseOutput) && has(Method.ProcessResumeOutput),
    losslessOutput: processes,
    // A sandbox's raw TCP through the launched proxy (sandbox/tcp_capture/);
    // where it cannot be, starts asking for it are refused.
    networkProxyTransparentTcp: processes && (inputs.transparentTcp ?? false),
    httpBodyLimit: has(Method.HttpRequest),
    httpBodyFlowControl: has(Method.HttpPauseBody) && has(Method.HttpResumeBody) &&
      has(Method.HttpCancelBody),
    safeFileWrites: has(Method.FsWriteFile),
    boundedStdin: has(Method.ProcessWrite),
    managedNetworkProxy: processes && (inputs.managedNetworkProxy ?? false),
  };
}
