/**
 * `ExecServerClient`: drives any exec-server (this one or the reference)
 * over a spawned stdio command or a WebSocket URL.
 *
 * - Responses are matched by id, in any order. The first disconnect reason
 *   is latched: in-flight calls and open processes fail with it, and later
 *   calls are rejected at once with the same reason.
 * - With `reconnect` (on by default for URLs and rendezvous), a dropped
 *   connection is re-established in the background — one attempt at a time,
 *   shared by every caller, with exponential backoff and jitter capped at
 *   30 s, a few attempts (`maxAttempts`, default 8) — and the session is
 *   resumed; every open process then catches up with `process/read` from the
 *   last `seq` it delivered, so nothing is lost or repeated. The client never
 *   dies of an outage: a call made while disconnected makes one attempt of
 *   its own (or joins the one in flight), bounded by the connect and
 *   initialize timeouts, and fails at once with `DisconnectedError` if it
 *   fails — it never waits out a backoff. When the server no longer knows the
 *   session (it restarted, or the session expired), a fresh session replaces
 *   it: the lost session's processes fail with `SessionLostError`, new calls
 *   go on, and `onReconnect` says which happened. Calls whose delivery is
 *   unknown (in flight at the disconnect) fail with `DisconnectedError`; they
 *   are never re-sent silently. Only `close()` ends a client for good.
 *
 * @module
 */

import type { MethodParams, MethodResult } from "../protocol/spec.ts";
import type { MethodName } from "../protocol/methods.ts";
import type { TraceContext } from "../jsonrpc/message.ts";
import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import type { CallOptions } from "../jsonrpc/peer.ts";
import { redactUrl } from "../websocket/handshake.ts";
import { ClientClosedError } from "./errors.ts";
import { ConnectionClosedError } from "../jsonrpc/errors.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import { Method } from "../protocol/methods.ts";
import { toPathUri } from "../protocol/path_uri.ts";
import type {
  Capabilities,
  EnvironmentInfo,
  EnvPolicy,
  NetworkPolicyDecisionNotification,
  NetworkPolicyRequestParams,
  NetworkPolicyRequestResult,
  ProcessReadResult,
  ProcessStartParams,
} from "../protocol/types.ts";
import { RemoteCommand, type RemoteCommandOptions } from "./command.ts";
import type { SpawnOptions } from "./spawn_options.ts";
import { remoteFetch } from "./fetch.ts";
import { ClientRouter } from "./routing.ts";
import { rendezvousLabel, type RendezvousSource, rendezvousTransport } from "./rendezvous.ts";
import {
  DEFAULT_RECONNECT_ATTEMPTS,
  type ReconnectEvent,
  type ReconnectOptions,
  SessionLink,
} from "./session_link.ts";
import { RemoteFs } from "./fs.ts";
import { RemoteProcess, type RemoteProcessOptions } from "./process.ts";
import {
  type ClientTransport,
  type CommandTarget,
  commandTransport,
  type StopTimings,
  webSocketTransport,
} from "./transports.ts";

/** How to reach the server and behave. */
export interface ConnectOptions {
  /** Spawn the server and speak NDJSON on its stdio. */
  readonly command?: CommandTarget;
  /** Or dial a WebSocket server. */
  readonly url?: string | URL;
  /** Bearer token for the WebSocket upgrade. */
  readonly token?: string;
  /** Extra WebSocket upgrade headers. */
  readonly headers?: HeadersInit;
  /**
   * Or a transport ({@linkcode webSocketTransport}, {@linkcode commandTransport},
   * `rendezvousTransport`, `inProcessTransport`, or your own): called for
   * every (re)connection. `command`, `url` and `rendezvous` are shorthands
   * for the first three.
   */
  readonly transport?: ClientTransport;
  /**
   * Or reach the environment end-to-end encrypted through a rendezvous
   * relay, with a fresh single-use bundle per physical connection: from the
   * built-in registry client (`{registryUrl, environmentId, token}`), from a
   * function that mints one per attempt (the caller owns the credentials and
   * renews them), or one bundle the caller fetched (one connection only).
   */
  readonly rendezvous?: RendezvousSource;
  /** Sent as `clientName`. Default `exec-server-client`. */
  readonly clientName?: string;
  /** Connect timeout. Default 10 000 ms. */
  readonly connectTimeoutMs?: number;
  /** `initialize` timeout. Default 10 000 ms. */
  readonly initializeTimeoutMs?: number;
  /**
   * Reconnect and resume after a dropped connection (WebSocket, rendezvous
   * and custom transports). Default: on for `url` and `rendezvous`, with 8
   * background attempts (about a minute); after them the next call tries
   * again. `false`: a dropped connection closes the client for good.
   */
  readonly reconnect?: boolean | ReconnectOptions;
  /** Told after every reconnection whether the session was resumed or replaced. */
  readonly onReconnect?: (event: ReconnectEvent) => void;
  /**
   * Resume this session (from another client or an earlier run) at the
   * first connection; an unknown id fails `connect`.
   */
  readonly resumeSessionId?: string;
  /**
   * An environment that is still booting (a container starting, a VM
   * coming up): the first dial waits for this promise — or for the
   * promise this function returns, asked again on the next attempt after
   * a refusal — outside `connectTimeoutMs`. A rejection fails the connect
   * with {@linkcode EnvironmentNotReadyError} carrying its reason. After the
   * first connection, reconnects do not wait for it.
   *
   * @example Wait until the container's port answers
   * ```ts ignore
   * const client = await connect({
   *   url: "ws://10.0.0.5:4500",
   *   ready: () => waitForPort("10.0.0.5", 4500),
   * });
   * ```
   */
  readonly ready?: Promise<unknown> | (() => Promise<unknown>);
  /** Largest message this client accepts (declared to servers that understand it). */
  readonly maxMessageBytes?: number;
  /** Grace periods when stopping a spawned server. */
  readonly stopTimings?: StopTimings;
  /** Where to log (the spawned server's stderr goes here at `debug`). */
  readonly logger?: Logger;
  /**
   * Decides the server's `network/policyRequest` questions (processes
   * spawned with a `networkProxy` that has a decision timeout). Without it,
   * or when it throws, the answer is an error and the proxy denies.
   */
  readonly onNetworkPolicyRequest?: (
    question: NetworkPolicyRequestParams,
  ) => NetworkPolicyRequestResult["decision"] | Promise<NetworkPolicyRequestResult["decision"]>;
  /** Receives every `network/policyDecision` of launched proxies. */
  readonly onNetworkPolicyDecision?: (decision: NetworkPolicyDecisionNotification) => void;
  /**
   * Trace context sent with every request (a top-level `trace` member;
   * through a relay it also travels in clear on the request's first frame
   * so the rendezvous can correlate), e.g. from the caller's active span.
   */
  readonly trace?: () => TraceContext | undefined;
  /**
   * Counts every request attempted, by method (`exec_server_client_requests_total`,
   * as Codex's client does; see `ExecClientMetrics`).
   */
  readonly metrics?: { request(method: string): void } | null;
}

export type { SpawnOptions } from "./spawn_options.ts";
export type { ReconnectEvent, ReconnectOptions } from "./session_link.ts";

const DEFAULT_POLICY: EnvPolicy = {
  inherit: "all",
  ignoreDefaultExcludes: false,
  exclude: [],
  set: {},
  includeOnly: [],
};

/** What a transport is called in errors before it is open. */
function targetLabel(options: ConnectOptions): string {
  if (options.command) return [options.command.program, ...(options.command.args ?? [])].join(" ");
  if (options.url !== undefined) return redactUrl(options.url);
  if (options.rendezvous) return `relay ${rendezvousLabel(options.rendezvous) ?? "environment"}`;
  return "the exec-server";
}

/** A connection (possibly re-established) to one exec-server session. */
export class ExecServerClient implements AsyncDisposable {
  /** Files on the server. */
  readonly fs: RemoteFs;

  #logger: Logger;
  #router: ClientRouter;
  /** The session each process was started in (recent ones), to answer for a lost one. */
  readonly #startedIn = new Map<string, string>();
  /** Sessions the server no longer knows, and why. */
  readonly #lostSessions = new Map<string, string>();
  #link: SessionLink;
  /** Body flow requests: best effort (a body that already ended answers `active: false`). */
  #bodyFlow = {
    pause: (requestId: string) =>
      void this.request(Method.HttpPauseBody, { requestId }).catch(() => {}),
    resume: (requestId: string) =>
      void this.request(Method.HttpResumeBody, { requestId }).catch(() => {}),
    cancel: (requestId: string) =>
      void this.request(Method.HttpCancelBody, { requestId }).catch(() => {}),
  };
  #processCounter = 0;

  /** Use {@linkcode connect} or {@linkcode connectLazy}. */
  constructor(options: ConnectOptions) {
    if (!options.command && !options.url && !options.transport && !options.rendezvous) {
      throw new TypeError("connect needs a command, a url, a rendezvous provider, or a transport");
    }
    // On by default where a connection can drop and come back; bounded
    // then, so that calls fail once a server is gone for good.
    const reconnect = options.reconnect ??
      (options.url !== undefined || options.rendezvous !== undefined
        ? { maxAttempts: DEFAULT_RECONNECT_ATTEMPTS }
        : false);
    this.#logger = options.logger ?? nullLogger;
    this.#router = new ClientRouter({
      logger: this.#logger,
      ...(options.onNetworkPolicyRequest
        ? { onNetworkPolicyRequest: options.onNetworkPolicyRequest }
        : {}),
      ...(options.onNetworkPolicyDecision
        ? { onNetworkPolicyDecision: options.onNetworkPolicyDecision }
        : {}),
    });
    const connectTimeoutMs = options.connectTimeoutMs ??
      (options.rendezvous && !options.transport ? 30_000 : 10_000);
    this.#link = new SessionLink(
      {
        transport: options.transport ?? this.#shorthandTransport(options, connectTimeoutMs),
        label: targetLabel(options),
        connectTimeoutMs,
        initializeTimeoutMs: options.initializeTimeoutMs ?? 10_000,
        clientName: options.clientName ?? "exec-server-client",
        reconnect,
        ...(options.maxMessageBytes !== undefined
          ? { maxMessageBytes: options.maxMessageBytes }
          : {}),
        ...(options.trace ? { trace: options.trace } : {}),
        ...(options.metrics
          ? { onRequest: (method: string) => options.metrics!.request(method) }
          : {}),
        onReconnect: (event) => {
          if (event.kind === "fresh" && event.previousSessionId !== null) {
            remember(this.#lostSessions, event.previousSessionId, event.reason ?? "session lost");
          }
          options.onReconnect?.(event);
        },
        ...(options.resumeSessionId !== undefined
          ? { resumeSessionId: options.resumeSessionId }
          : {}),
        ...(options.ready !== undefined ? { ready: options.ready } : {}),
      },
      this.#router,
      this.#logger,
    );
    this.fs = new RemoteFs({
      request: (method, params) => this.request(method, params),
      supports: (c) => this.supports(c),
    });
  }

  /** The transport `command`, `url` or `rendezvous` stand for. */
  #shorthandTransport(options: ConnectOptions, connectTimeoutMs: number): ClientTransport {
    if (options.rendezvous) return rendezvousTransport(options.rendezvous);
    if (options.command) {
      return commandTransport(options.command, {
        logger: this.#logger,
        ...(options.stopTimings ? { timings: options.stopTimings } : {}),
      });
    }
    return webSocketTransport({
      url: options.url!,
      ...(options.token !== undefined ? { token: options.token } : {}),
      ...(options.headers ? { headers: options.headers } : {}),
      // The client's deadline decides; the dialer's own is a backstop.
      timeoutMs: connectTimeoutMs + 1000,
    });
  }

  /** The session id (after the first connection). */
  get sessionId(): string | null {
    return this.#link.sessionId;
  }

  /** What the server reported at `initialize`. */
  get environmentInfo(): EnvironmentInfo | null {
    return this.#link.info;
  }

  /** The server's capability flags (all false before connecting). */
  get capabilities(): Partial<Capabilities> {
    return this.#link.info?.capabilities ?? {};
  }

  /** True when the server advertises `capability`. */
  supports(capability: string): boolean {
    const capabilities = this.#link.info?.capabilities as Record<string, boolean> | undefined;
    return capabilities?.[capability] === true;
  }

  /** Resolves with the reason once the client is closed for good. */
  get closed(): Promise<string> {
    return this.#link.closed;
  }

  /**
   * Connects (if not connected) and completes the handshake. After an
   * outage this makes one attempt (or joins the one in flight), bounded by
   * the connect and initialize timeouts, and rejects with
   * {@linkcode DisconnectedError} when it fails — it never waits out a
   * backoff.
   */
  ensureConnected(): Promise<void> {
    return this.#link.ensureConnected();
  }

  /** The server's requests: only `network/policyRequest` exists. */
  /**
   * Calls a method (connecting first if needed). Rejects with
   * {@linkcode RpcError} for error answers and {@linkcode ConnectionClosedError}
   * when the connection is (or gets) lost.
   */
  async request<M extends MethodName>(
    method: M,
    ...params: undefined extends MethodParams<M> ? [params?: MethodParams<M>]
      : [params: MethodParams<M>]
  ): Promise<MethodResult<M>> {
    return await this.call(method, params[0]) as MethodResult<M>;
  }

  /**
   * Calls a method by name with untyped params (extensions, or a method
   * this client version has no types for); see {@linkcode request}.
   */
  async call(method: string, params?: unknown, options: CallOptions = {}): Promise<unknown> {
    if (method === Method.ProcessRead) {
      const id = (params as { processId?: unknown } | undefined)?.processId;
      const session = typeof id === "string" ? this.#startedIn.get(id) : undefined;
      const lost = session !== undefined ? this.#lostSessions.get(session) : undefined;
      if (lost !== undefined) return disconnectedRead(params, lost);
    }
    try {
      const result = await this.#link.call(method, params, options);
      if (method === Method.ProcessStart && this.sessionId !== null) {
        const id = (result as { processId?: unknown } | null)?.processId;
        if (typeof id === "string") remember(this.#startedIn, id, this.sessionId);
      }
      return result;
    } catch (error) {
      // A read after the connection is gone — an outage, a stdio server
      // that ended, a client without reconnection, a session that could not
      // be resumed — answers like the reference's client: the process is
      // over for this connection (`exited`, `closed`) and `failure` says
      // why, so a polling loop ends cleanly. Only a client closed on purpose
      // throws.
      if (
        method === Method.ProcessRead && error instanceof ConnectionClosedError &&
        !(error instanceof ClientClosedError && this.#link.closedByCaller)
      ) {
        return disconnectedRead(params, error.message);
      }
      throw error;
    }
  }

  /**
   * Attaches to a process already running in this session (started by an
   * earlier client of a resumed session): its retained output is fetched
   * with `process/read`, then it streams like a spawned one.
   */
  async attach(
    processId: string,
    options: Pick<SpawnOptions, "stdin" | "stdout" | "stderr" | "events" | "bufferBytes"> = {},
  ): Promise<RemoteProcess> {
    await this.ensureConnected();
    if (this.#router.processes.has(processId)) {
      throw new RpcError(JsonRpcCode.InvalidRequest, `process ${processId} is already attached`);
    }
    const process = this.#newProcess(processId, options);
    try {
      await process.catchUp();
    } catch (error) {
      if (this.#router.processes.get(processId) === process) {
        this.#router.processes.delete(processId);
      }
      throw error;
    }
    return process;
  }

  #newProcess(
    processId: string,
    options: Pick<SpawnOptions, "stdin" | "stdout" | "stderr" | "events" | "bufferBytes" | "tty">,
  ): RemoteProcess {
    const procOptions: RemoteProcessOptions = {
      stdinPiped: options.stdin === "piped" || options.tty === true,
      ...(options.stdout ? { stdout: options.stdout } : {}),
      ...(options.stderr ? { stderr: options.stderr } : {}),
      ...(options.events ? { events: true } : {}),
      ...(options.bufferBytes ? { bufferBytes: options.bufferBytes } : {}),
    };
    const process = new RemoteProcess(processId, {
      // Not `call`: a process's own catch-up must see the outage.
      request: (m, p) => this.#link.call(m, p) as never,
      supports: (c) => this.supports(c),
      release: (id) => {
        if (this.#router.processes.get(id) === process) this.#router.processes.delete(id);
      },
      // Never silent: skipped events (evicted before a reconnect caught up) are logged.
      reportGap: (id, from, to) =>
        this.#logger.warn("client.process_events_lost", {
          processId: id,
          fromSeq: from,
          toSeq: to,
        }),
    }, procOptions);
    // Registered before any request: output may arrive before the answer.
    this.#router.processes.set(processId, process);
    return process;
  }

  /** Starts `argv` on the server. */
  async spawn(argv: readonly string[], options: SpawnOptions = {}): Promise<RemoteProcess> {
    await this.ensureConnected();
    const processId = options.processId ??
      `p${++this.#processCounter}-${crypto.randomUUID().slice(0, 8)}`;
    if (this.#router.processes.has(processId)) {
      // Refused here: the server would refuse it too, and the first process
      // must keep its routing.
      throw new RpcError(JsonRpcCode.InvalidRequest, `process ${processId} already exists`);
    }
    const process = this.#newProcess(processId, options);
    const params: ProcessStartParams = {
      processId,
      argv: [...argv],
      cwd: options.cwd !== undefined ? toPathUri(options.cwd) : this.#link.info!.cwd,
      env: { ...(options.env ?? {}) },
      tty: options.tty ?? false,
      pipeStdin: options.stdin === "piped",
    };
    const policy = options.envPolicy === undefined ? DEFAULT_POLICY : options.envPolicy;
    if (policy !== null) params.envPolicy = policy;
    if (options.arg0 !== undefined) params.arg0 = options.arg0;
    if (options.rows !== undefined) params.rows = options.rows;
    if (options.cols !== undefined) params.cols = options.cols;
    if (options.sandbox !== undefined) params.sandbox = options.sandbox;
    if (options.enforceManagedNetwork) params.enforceManagedNetwork = true;
    if (options.networkProxy) params.networkProxy = options.networkProxy;
    options.signal?.throwIfAborted();
    try {
      await this.request(Method.ProcessStart, params);
    } catch (error) {
      if (this.#router.processes.get(processId) === process) {
        this.#router.processes.delete(processId);
      }
      throw error;
    }
    const stops = [
      options.signal,
      options.timeoutMs !== undefined ? AbortSignal.timeout(options.timeoutMs) : undefined,
    ]
      .filter((s): s is AbortSignal => s !== undefined);
    if (stops.length > 0) {
      const stop = AbortSignal.any(stops);
      const onStop = () => void process.terminate().catch(() => {});
      if (stop.aborted) onStop();
      else {
        stop.addEventListener("abort", onStop, { once: true });
        process.done.then(() => stop.removeEventListener("abort", onStop));
      }
    }
    return process;
  }

  /**
   * Runs a shell command line (`/bin/sh -c`) and returns its text output,
   * like E2B's `commands.run("ls | wc -l")`.
   *
   * @example
   * ```ts ignore
   * const { code, stdout } = await client.run("ls | wc -l", { cwd: "/repo" });
   * ```
   */
  async run(
    commandLine: string,
    options: Omit<SpawnOptions, "stdout" | "stderr" | "events" | "tty"> = {},
  ): Promise<{ code: number; success: boolean; stdout: string; stderr: string }> {
    const out = await this.command("/bin/sh", { ...options, args: ["-c", commandLine] }).output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    return {
      code: out.code,
      success: out.success,
      stdout: decode(out.stdout),
      stderr: decode(out.stderr),
    };
  }

  /** A `Deno.Command`-like builder for a remote program. */
  command(program: string, options: RemoteCommandOptions = {}): RemoteCommand {
    return new RemoteCommand(this, program, options);
  }

  /**
   * `fetch` from inside the environment (`http/request`): the body streams
   * from `http/request/bodyDelta` notifications.
   */
  async fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    // Connected first: whether bodies can be held per body depends on the server.
    await this.ensureConnected();
    const flow = this.supports("httpBodyFlowControl") ? this.#bodyFlow : null;
    return await remoteFetch(
      { request: (m, p) => this.request(m, p), bodies: this.#router.bodies, flow },
      input,
      init,
    );
  }

  /** Closes the connection (and stops a spawned server with its whole tree). */
  close(): Promise<void> {
    return this.#link.close();
  }

  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The answer to `process/read` while disconnected. */
/** Most entries kept by {@linkcode remember} (a polling client's recent processes). */
const REMEMBERED = 4096;

/** Sets `key`, dropping the oldest entry beyond {@linkcode REMEMBERED}. */
function remember(map: Map<string, string>, key: string, value: string): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > REMEMBERED) map.delete(map.keys().next().value!);
}

function disconnectedRead(params: unknown, reason: string): ProcessReadResult {
  const after = (params as { afterSeq?: unknown } | undefined)?.afterSeq;
  return {
    chunks: [],
    nextSeq: typeof after === "number" ? after + 1 : 1,
    exited: true,
    exitCode: null,
    closed: true,
    failure: reason,
    sandboxDenied: false,
  };
}

/** Connects now (and completes the handshake). */
export async function connect(options: ConnectOptions): Promise<ExecServerClient> {
  const client = new ExecServerClient(options);
  await client.ensureConnected();
  return client;
}

/** A client that connects on first use (and reconnects when asked to). */
export function connectLazy(options: ConnectOptions): ExecServerClient {
  return new ExecServerClient(options);
}
