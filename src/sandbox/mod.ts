/**
 * Sandboxed execution: `sandbox` requests resolved to a bubblewrap plan
 * ({@linkcode resolveSandbox}) and run through it ({@linkcode sandboxCommand}).
 *
 * @module
 */

import type { FileSystemSandboxContext } from "../protocol/types.ts";
import { unsafeForHelpers } from "../process/spawn.ts";
import {
  contestedPaths,
  createdMountPoints,
  holdMountPoints,
  MountPointLease,
  type PidNamespace,
  sandboxCommand,
  sandboxSignaller,
  sandboxSupport,
} from "./bwrap.ts";
import {
  readsEverything,
  type ResolveContext,
  resolveSandbox,
  type SandboxPlan,
} from "./policy.ts";
import { ProxyRoute } from "./proxy_route.ts";
import { tcpCaptureSupport } from "./tcp_capture/support.ts";

export { DenialDetector } from "./denied.ts";
export { sandboxSupport } from "./bwrap.ts";
export { placeholderCoordination } from "./mount_points.ts";
export { tcpCaptureSupport } from "./tcp_capture/support.ts";
export type { SandboxPlan } from "./policy.ts";

/** What `process/start` reports for a confined child (the reference's name for its Linux sandbox). */
export const LINUX_SANDBOX_TYPE = "linuxSeccomp";

/** A sandbox was asked for and cannot be provided; nothing was started. */
export class SandboxUnavailableError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "SandboxUnavailableError";
  }
}

/** Throws {@linkcode SandboxUnavailableError} when bubblewrap cannot sandbox here. */
export function requireSandboxSupport(): void {
  const support = sandboxSupport();
  if (!support.available) {
    throw new SandboxUnavailableError(`sandbox requested but unavailable: ${support.reason}`);
  }
}

/** Where a sandbox's network goes when the managed network is enforced. */
export interface ManagedRoute {
  /** The managed proxy's loopback ports. */
  readonly ports: readonly number[];
  /** The SOCKS5 port raw TCP is captured through, or null: no capture. */
  readonly captureVia: number | null;
}

/** A sandbox ready to wrap one child. */
export interface PreparedSandbox {
  /** The resolved plan. */
  readonly plan: SandboxPlan;
  /** The command line that runs `target` confined, in working directory `cwd`. */
  launcher(cwd: string): (target: string[]) => string[];
  /** Signals the confined program of the sandbox whose outer bwrap is `pid`. */
  signaller(pid: number): (signal: Deno.Signal) => boolean;
  /**
   * Call right after the launch with the sandbox's exit: placeholder mount
   * points bubblewrap creates on the host are removed once it has ended.
   */
  hold(running: Promise<unknown>): void;
  /** Releases what outlives single launches (the proxy route): call once the process has ended, or was never started. */
  close(): Promise<void>;
}

/**
 * Prepares `sandbox` (null: none asked for, or `permissions.type:
 * "disabled"`). Throws {@linkcode SandboxUnavailableError} when a sandbox is
 * required and bubblewrap cannot provide it — never runs unconfined instead.
 *
 * `route` (managed network enforced): the sandbox's network is its own
 * namespace whatever the policy says, and the managed proxy's loopback ports
 * are all it can reach; an empty list (no proxy to reach) is refused. With
 * `captureVia` (one of them, the SOCKS5 listener's), the program's raw TCP
 * is captured and put through it too (transparent TCP).
 */
export function prepareSandbox(
  sandbox: FileSystemSandboxContext | null | undefined,
  context: ResolveContext,
  pidNamespace: PidNamespace = "isolate",
  route: ManagedRoute | null = null,
): PreparedSandbox | null {
  if (!sandbox) return null;
  // The paths where another sandbox's placeholder may be are locked first
  // and the plan made again: it then sees what stays until this one ends.
  const lease = new MountPointLease();
  let plan = resolveSandbox(sandbox, context);
  // The mount points its bubblewrap will create: once it runs they exist
  // and would look like real paths.
  let created = plan ? createdMountPoints(plan) : [];
  for (let i = 0; plan && i < 3 && lease.add(contestedPaths(plan, created)); i++) {
    plan = resolveSandbox(sandbox, context);
    created = plan ? createdMountPoints(plan) : [];
  }
  try {
    const result = prepared(plan, created, context, pidNamespace, route, lease);
    if (result === null) lease.release();
    return result;
  } catch (error) {
    lease.release();
    throw error;
  }
}

function prepared(
  resolved: SandboxPlan | null,
  mountPoints: readonly string[],
  context: ResolveContext,
  pidNamespace: PidNamespace,
  route: ManagedRoute | null,
  lease: MountPointLease,
): PreparedSandbox | null {
  let plan = resolved;
  if (!plan) {
    if (!route) return null;
    // No filesystem confinement asked for, but the managed network is
    // enforced (or raw TCP captured): the network is confined all the same,
    // as the reference confines it — never a run with direct network access.
    plan = { fileSystem: "unrestricted", network: "restricted", key: "unrestricted|restricted" };
  }
  requireSandboxSupport();
  let proxyRoute: ProxyRoute | null = null;
  if (route) {
    if (route.ports.length === 0) {
      throw new SandboxUnavailableError(
        "sandbox requested but unavailable: enforceManagedNetwork needs a managed network proxy (send networkProxy, or start the server with --network-proxy)",
      );
    }
    // The bridge runs inside: it must be able to read its runtime, and a
    // policy that hides anything might hide that.
    if (!readsEverything(plan)) {
      throw new SandboxUnavailableError(
        "sandbox requested but unavailable: routing a sandbox's network to the managed proxy needs a policy that can read everything",
      );
    }
    if (route.captureVia !== null) {
      const capture = tcpCaptureSupport();
      if (!capture.available) {
        throw new SandboxUnavailableError(
          `sandbox requested but unavailable: transparent TCP capture: ${capture.reason}`,
        );
      }
    }
    plan = { ...plan, network: "restricted" };
    proxyRoute = ProxyRoute.open(route.ports, route.captureVia);
  }
  let held = false;
  const env = context.env;
  // Kept from the host-side helpers (see `unsafeForHelpers`): bubblewrap
  // sets them for the confined program alone.
  const confinedOnly = Object.fromEntries(
    Object.entries(env).filter(([name]) => unsafeForHelpers(name)),
  );
  return {
    plan,
    launcher: (cwd) => (target) => {
      if (!proxyRoute) {
        return sandboxCommand(plan, cwd, target, pidNamespace, { setenv: confinedOnly });
      }
      const bridged = proxyRoute.bridged(target, env);
      return sandboxCommand(plan, cwd, bridged.argv, pidNamespace, {
        setenv: { ...confinedOnly, ...bridged.setenv },
        routed: true,
        capture: proxyRoute.captureVia !== null,
      });
    },
    signaller: sandboxSignaller,
    hold: (running) => {
      held = true;
      holdMountPoints(mountPoints, running, lease);
    },
    close: () => {
      // Never launched: nothing of it to remove.
      if (!held) lease.release();
      return proxyRoute?.close() ?? Promise.resolve();
    },
  };
}
