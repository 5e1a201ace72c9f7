/**
 * `process/start`: the request's proxy (`networkProxy`) and environment,
 * its sandbox (routed to the managed proxy when the network is enforced),
 * its shell snapshot, then the child — pipes or a terminal — registered
 * with the session before the answer goes out. Everything it set up is
 * released when the process closes or when the start fails.
 *
 * @module
 */

import { concatBytes } from "../../util/bytes.ts";
import { RpcError } from "../../jsonrpc/errors.ts";
import { computeChildEnv } from "../../process/env_policy.ts";
import { ManagedProcess } from "../../process/managed_process.ts";
import {
  checkCwd,
  checkTerminalProgram,
  spawnChild,
  type SpawnedChild,
  SpawnError,
  type SpawnErrorKind,
} from "../../process/spawn.ts";
import type { DecodedProcessStart } from "../../protocol/process.ts";
import { ErrorCode, internalError, invalidParams, invalidRequest } from "../../protocol/errors.ts";
import { loadTerminalReader, ptyBackend } from "../../process/pty/spawn_pty.ts";
import { signalGroup } from "../../process/signals.ts";
import type { CaptureLimits } from "../../process/shell_snapshot.ts";
import { readsEverything } from "../../sandbox/policy.ts";
import {
  DenialDetector,
  LINUX_SANDBOX_TYPE,
  type ManagedRoute,
  placeholderCoordination,
  type PreparedSandbox,
  prepareSandbox,
  SandboxUnavailableError,
} from "../../sandbox/mod.ts";
import type { NetworkProxyLaunch, ProcessStartResult } from "../../protocol/types.ts";
import type { HandlerContext } from "../handler.ts";
import {
  type CredentialBroker,
  maskableCommand,
  maskCredentials,
} from "../../proxy/credential_broker.ts";
import type { NetworkProxy } from "../../proxy/network_proxy.ts";
import { NetworkConfigError } from "../../proxy/config.ts";
import { DomainPatternError } from "../../proxy/domain_pattern.ts";
import type { ManagedNetworkEnv } from "../server_state.ts";

/** Starts the child of a `process/start` request (terminals: see `pty`). */
export type ChildStarter = (
  request: {
    argv: string[];
    cwd: string;
    env: Record<string, string>;
    arg0: string | null;
    pipeStdin: boolean;
    tty: boolean;
    rows: number;
    cols: number;
    /** Confine the child (null: unconfined). */
    sandbox: PreparedSandbox | null;
  },
) => StartedChild;

/** What `process/start` needs to start a child. */
export interface StartedChild {
  /** The child. */
  readonly child: SpawnedChild;
  /** Signals the right target (a terminal's foreground group). */
  readonly signal?: (signal: Deno.Signal) => boolean;
  /** The child runs on a terminal. */
  readonly tty: boolean;
  /** Signals the program inside a sandbox (see `ManagedProcessOptions.confined`). */
  readonly confined?: (signal: Deno.Signal) => boolean;
  /** Its terminal, for resizes. */
  readonly terminal?: { resize(rows: number, cols: number): void };
}

/**
 * The default starter: pipes, or a pseudo-terminal for `tty: true` when the
 * backend is available (otherwise a clear `-32603`).
 */
export const defaultStarter: ChildStarter = (request) => {
  const launcher = request.sandbox ? { launcher: request.sandbox.launcher(request.cwd) } : {};
  if (request.tty) {
    const { backend, reason } = ptyBackend();
    if (!backend) {
      throw internalError(
        `tty: true is not supported by this server: ${reason}; environment/info capabilities.tty is false`,
      );
    }
    // Inside a sandbox the program is the sandbox's to find.
    if (!request.sandbox) {
      checkCwd(request.cwd);
      checkTerminalProgram(request);
    }
    const { child, pty } = backend.spawn(
      {
        argv: request.argv,
        cwd: request.cwd,
        env: request.env,
        arg0: request.arg0,
        stdin: "piped",
        ...launcher,
      },
      request.rows,
      request.cols,
    );
    request.sandbox?.hold(child.status);
    return {
      child,
      tty: true,
      terminal: pty,
      // Signals go to the terminal's foreground job, as a keypress would.
      signal: (sig) => signalGroup(pty.foregroundGroup() ?? child.pid, sig),
    };
  }
  const child = spawnChild({
    argv: request.argv,
    cwd: request.cwd,
    env: request.env,
    arg0: request.arg0,
    stdin: request.pipeStdin ? "piped" : "null",
    ...launcher,
  });
  request.sandbox?.hold(child.status);
  const confined = request.sandbox?.signaller(child.pid);
  return { child, tty: false, ...(confined ? { signal: confined, confined } : {}) };
};

/**
 * Runs a shell-snapshot capture to completion: its stdout (bounded), or
 * null when it fails, exits non-zero, says too much or takes too long
 * (then its whole process group is killed).
 */
async function captureOutput(
  starter: ChildStarter,
  request: {
    sandbox: PreparedSandbox | null;
    argv: string[];
    cwd: string;
    env: Record<string, string>;
  },
  limits: CaptureLimits,
  guard: (pgid: number) => () => void,
): Promise<Uint8Array | null> {
  let started: StartedChild;
  try {
    started = starter({
      ...request,
      arg0: null,
      pipeStdin: false,
      tty: false,
      rows: 24,
      cols: 80,
    });
  } catch {
    return null;
  }
  const { child } = started;
  const release = guard(child.pid);
  const kill = () => signalGroup(child.pid, "SIGKILL");
  const timer = setTimeout(kill, limits.timeoutMs);
  const chunks: Uint8Array[] = [];
  let size = 0;
  let overflow = false;
  try {
    // stderr is read and dropped (a closed pipe would kill a chatty profile).
    const drainErr = (async () => {
      for await (const _ of child.stderr) { /* dropped */ }
    })().catch(() => {});
    for await (const chunk of child.stdout) {
      size += chunk.byteLength;
      if (size > limits.maxBytes) {
        overflow = true;
        kill();
        break;
      }
      chunks.push(chunk);
    }
    await drainErr;
    const status = await child.status;
    if (overflow || status.code !== 0) return null;
    return concatBytes(chunks, size);
  } finally {
    clearTimeout(timer);
    // Whatever the login shell left running in its group goes with it.
    kill();
    release();
  }
}

/**
 * `process/start`: checks, sandbox and shell snapshot preparation, then the
 * child, registered with the session before the answer goes out.
 */
export async function startProcess(
  p: DecodedProcessStart,
  ctx: HandlerContext,
  starter: ChildStarter,
): Promise<ProcessStartResult> {
  const { session, server } = ctx;
  // The first terminal loads its reader (before the checks: they follow every wait).
  if (p.tty) await loadTerminalReader();
  if (session.hasProcess(p.processId)) {
    throw invalidRequest(`process ${p.processId} already exists`);
  }
  const asked = p.networkProxy?.proxy.transparentTcp === true;
  if (asked && !p.sandbox) throw invalidParams("transparent TCP requires a managed Linux sandbox");
  let env = computeChildEnv(p.env, p.envPolicy, () => Deno.env.toObject());
  // enforceManagedNetwork: a sandbox's only way out is the proxy (none: no
  // way out). Transparent TCP routes it there too, and captures raw TCP.
  const capture = asked || (p.enforceManagedNetwork && server.options.sandboxTransparentTcp);
  const routeTo = (proxy: ManagedNetworkEnv | null): ManagedRoute | null => {
    if (!p.enforceManagedNetwork && !capture) return null;
    const context = proxy?.managedNetworkContext?.();
    if (capture && context && !context.socksPort) {
      throw invalidParams(
        "invalid network proxy config: transparent_tcp requires an enabled managed SOCKS5 proxy",
      );
    }
    return {
      ports: context?.loopbackPorts ?? [],
      captureVia: capture ? context?.socksPort ?? null : null,
    };
  };
  if (!p.networkProxy) {
    const managed = p.enforceManagedNetwork ? server.managedNetwork : null;
    if (p.enforceManagedNetwork && !managed && server.options.tcpUpstreamProxy) {
      throw invalidParams("a mandatory TCP upstream requires an executor-local managed proxy");
    }
    if (managed) env = managed.applyToEnv(env);
    return await startChild(p, ctx, starter, env, routeTo(managed));
  }
  let broker: CredentialBroker | undefined;
  if (p.networkProxy.proxy.credentialMasking && maskableCommand(p.argv)) {
    if (p.shellSnapshot) {
      // A shell snapshot replays what the user's profile exported (real
      // credentials included): as the reference, such a start is not masked,
      // and says so (the child sees no broker variables either).
      ctx.server.logger.warn("process.credential_masking_unavailable", {
        processId: p.processId,
        message: "Credential masking is unavailable for this shell startup; preserving shell " +
          "profiles and snapshots and running with unmasked credentials.",
      });
    } else {
      ({ env, broker } = await maskCredentials(env, p.networkProxy.proxy.credentialProviders));
    }
  }
  const proxy = await launchProxy(p.processId, p.networkProxy, ctx, broker);
  try {
    const started = await startChild(p, ctx, starter, proxy.applyToEnv(env), routeTo(proxy));
    // The proxy serves the process (and its descendants) until it closes.
    void session.process(p.processId)?.finished.then(() => proxy.shutdown());
    return started;
  } catch (error) {
    await proxy.shutdown();
    throw error;
  }
}

/** Starts the proxy of `process/start.networkProxy`; a policy it cannot compile is `-32602`. */
async function launchProxy(
  processId: string,
  launch: NetworkProxyLaunch,
  ctx: HandlerContext,
  broker: CredentialBroker | undefined,
): Promise<NetworkProxy> {
  const logger = ctx.server.logger.child({ processId });
  try {
    const tcpUpstream = ctx.server.options.tcpUpstreamProxy ?? undefined;
    // Loaded by the first start that asks for a proxy (most servers never do).
    const { launchProcessProxy } = await import("../network_launch.ts");
    return await launchProcessProxy(launch, processId, ctx.session, logger, {
      ...(broker ? { broker } : {}),
      ...(tcpUpstream ? { tcpUpstream } : {}),
    });
  } catch (error) {
    if (error instanceof NetworkConfigError || error instanceof DomainPatternError) {
      throw invalidParams(`invalid network proxy config: ${error.message}`);
    }
    // The process's managed network is part of its sandbox.
    throw startError(
      `failed to start the network proxy: ${(error as Error).message}`,
      "sandboxPreparation",
      error,
    );
  }
}

/** Runs one step of a start inside its span when the server is traced (see `ExecTelemetry.span`). */
function traced<T>(
  server: HandlerContext["server"],
  name: string,
  attributes: Readonly<Record<string, string | boolean>>,
  step: () => T,
): T {
  const telemetry = server.execTelemetry;
  return telemetry ? telemetry.span(name, attributes, step) : step();
}

/**
 * A `-32603` start failure with its kind (`data.kind`, as Codex 0.171
 * reports it) and, for the debug log, what it concerns.
 */
function startError(
  message: string,
  kind: SpawnErrorKind,
  cause: unknown,
  logDetail?: string,
): RpcError {
  return new RpcError(ErrorCode.InternalError, message, {
    cause,
    data: { kind },
    ...(logDetail !== undefined ? { logDetail } : {}),
  });
}

/**
 * The child itself: sandbox (its network only the managed proxy's `route`
 * when given), shell snapshot, spawn, registration.
 */
async function startChild(
  p: DecodedProcessStart,
  ctx: HandlerContext,
  starter: ChildStarter,
  env: Record<string, string>,
  route: ManagedRoute | null,
): Promise<ProcessStartResult> {
  const { session, server } = ctx;
  let sandbox: PreparedSandbox | null;
  try {
    sandbox = traced(
      server,
      "codex.exec_server.process_prepare_sandbox",
      { "process.id": p.processId },
      () =>
        prepareSandbox(p.sandbox, { cwd: p.cwd, env }, server.options.sandboxPidNamespace, route),
    );
  } catch (error) {
    if (error instanceof SandboxUnavailableError) {
      throw startError(error.message, "sandboxUnavailable", error);
    }
    if (error instanceof RpcError) throw error;
    throw startError((error as Error).message, "sandboxPreparation", error);
  }
  if (sandbox !== null && sandbox.plan.fileSystem !== "unrestricted") warnIfUncoordinated(server);
  try {
    const result = await launchChild(p, ctx, starter, env, sandbox);
    if (sandbox) void session.process(p.processId)?.finished.then(() => sandbox.close());
    return result;
  } catch (error) {
    await sandbox?.close();
    throw error;
  }
}

/** Shell snapshot, spawn and registration of a prepared child. */
async function launchChild(
  p: DecodedProcessStart,
  ctx: HandlerContext,
  starter: ChildStarter,
  env: Record<string, string>,
  sandbox: PreparedSandbox | null,
): Promise<ProcessStartResult> {
  const { session, server } = ctx;
  const shellSnapshot = p.shellSnapshot;
  const id = { "process.id": p.processId };
  const argv = await traced(
    server,
    "codex.exec_server.process_prepare_shell_snapshot",
    { ...id, snapshot_requested: shellSnapshot != null },
    async () => {
      // A snapshot file lives on the host: used where the sandbox can read it.
      if (!shellSnapshot || (sandbox && !readsEverything(sandbox.plan))) return p.argv;
      const requestEnv = { ...(p.envPolicy?.set ?? {}), ...p.env };
      const argv = await server.shellSnapshots.commandLine(
        shellSnapshot,
        p.argv,
        { set: Object.keys(requestEnv), env: requestEnv },
        (captureArgv, limits) =>
          traced(
            server,
            "codex.exec_server.process_capture_shell_snapshot",
            id,
            () =>
              captureOutput(
                starter,
                { sandbox, argv: captureArgv, cwd: p.cwd, env },
                limits,
                (pgid) => server.orphans.watch(pgid),
              ),
          ),
      );
      if (session.hasProcess(p.processId)) {
        throw invalidRequest(`process ${p.processId} already exists`);
      }
      return argv;
    },
  );
  let started;
  try {
    started = traced(server, "codex.process.spawn", {}, () =>
      starter({
        sandbox,
        argv,
        cwd: p.cwd,
        env,
        arg0: p.arg0 ?? null,
        pipeStdin: p.pipeStdin,
        tty: p.tty,
        rows: p.rows ?? 24,
        cols: p.cols ?? 80,
      }));
  } catch (error) {
    if (error instanceof SpawnError) {
      server.execTelemetry?.processSpawnFailed(sandbox !== null, p.metadata);
      throw startError(error.message, error.kind, error, error.detail);
    }
    throw error;
  }
  const process = new ManagedProcess({
    id: p.processId,
    child: started.child,
    // Killed with its server, even one killed with SIGKILL.
    releaseGroup: server.orphans.watch(started.child.pid),
    tty: started.tty,
    stdoutName: started.tty ? "pty" : "stdout",
    logger: server.logger.child({ processId: p.processId }),
    // A session that can be resumed keeps enough delivered output to
    // replay what was in flight when its connection dropped.
    limits: {
      retainBytes: ctx.connection.disconnectPolicy === "detach"
        ? server.options.outputHistoryBytes
        : 1024 * 1024,
      budget: server.historyBudget,
    },
    ...(started.signal ? { signal: started.signal } : {}),
    ...(started.terminal ? { terminal: started.terminal } : {}),
    ...(started.confined ? { confined: started.confined } : {}),
    ...(sandbox ? { denial: new DenialDetector() } : {}),
    onOutput: server.trimmer.note,
  });
  session.addProcess(process);
  const metrics = server.metrics;
  const startedAt = metrics ? performance.now() : 0;
  metrics?.processStarted();
  const reported = server.execTelemetry?.processStarted(p.processId, sandbox !== null, p.metadata);
  // Its pipes' buffers are freed when it ends: give them back then.
  process.finished.then(() => {
    server.trimmer.note();
    metrics?.processFinished(process.exitCode, (performance.now() - startedAt) / 1000);
    reported?.finished(process.exitCode, process.terminationRequested, process.sandboxDenied);
  });
  server.logger.debug("process.started", {
    sessionId: session.id,
    processId: p.processId,
    pid: process.pid,
    tty: started.tty,
    sandboxed: sandbox !== null,
  });
  const result: ProcessStartResult = {
    processId: p.processId,
    sandboxType: sandbox ? LINUX_SANDBOX_TYPE : "none",
  };
  return result;
}

let coordinationChecked = false;

/**
 * Warns once when this server's sandboxes cannot agree on placeholders with
 * other servers' (see `sandbox/mount_points.ts`): never a silent fallback.
 */
function warnIfUncoordinated(server: HandlerContext["server"]): void {
  if (coordinationChecked) return;
  coordinationChecked = true;
  const reason = placeholderCoordination();
  if (reason !== null) server.logger.warn("sandbox.placeholders_uncoordinated", { reason });
}
