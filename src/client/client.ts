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
 *   30 s — and the session is resumed; every open process then catches up
 *   with `process/read` from the last `seq` it delivered, so nothing is lost
 *   or repeated. When the server no longer knows the session (it restarted,
 *   or the session expired), a fresh session replaces it: the lost session's
 *   processes fail with that reason and new calls go on. Calls whose delivery
 *   is unknown (in flight at the disconnect) fail; they are never re-sent
 *   silently.
 *
 * @module
 */

import type { MethodParams, MethodResult } from "../protocol/method_map.ts";
import type { MethodName } from "../protocol/methods.ts";
import type { TraceContext } from "../jsonrpc/message.ts";
import { ConnectionClosedError, JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import { RpcPeer } from "../jsonrpc/peer.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import {
  ClientNotification,
  Method,
  ServerNotification,
  ServerRequest,
} from "../protocol/methods.ts";
import { toPathUri } from "../protocol/path_uri.ts";
import type {
  Capabilities,
  EnvironmentInfo,
  EnvPolicy,
  HttpBodyDeltaNotification,
  InitializeParams,
  NetworkPolicyDecisionNotification,
  NetworkPolicyRequestParams,
  NetworkPolicyRequestResult,
  ProcessClosedNotification,
  ProcessExitedNotification,
  ProcessOutputNotification,
  ProcessStartParams,
} from "../protocol/types.ts";
import { delay } from "../util/async.ts";
import { RemoteCommand, type RemoteCommandOptions } from "./command.ts";
import type { SpawnOptions } from "./spawn_options.ts";
import { BodyStreams, remoteFetch } from "./fetch.ts";
import { type RendezvousProvider, rendezvousTransport } from "./rendezvous.ts";
import { RemoteFs } from "./fs.ts";
import { chunkEvent, RemoteProcess, type RemoteProcessOptions } from "./process.ts";
import {
  type CommandTarget,
  openCommandTransport,
  type OpenedTransport,
  openWebSocketTransport,
  type StopTimings,
} from "./transports.ts";

/** Reconnection behaviour. */
export interface ReconnectOptions {
  /** First delay before retrying. Default 250 ms. */
  readonly initialDelayMs?: number;
  /** Largest delay. Default 30 000 ms. */
  readonly maxDelayMs?: number;
  /** Give up after this many failed attempts. Default: never. */
  readonly maxAttempts?: number;
}

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
  /** Or bring a transport (tests, relays). Called for every (re)connection. */
  readonly transport?: () => Promise<OpenedTransport>;
  /**
   * Or reach the environment end-to-end encrypted through a registry and
   * rendezvous relay (a fresh bundle and stream per connection).
   */
  readonly rendezvous?: RendezvousProvider;
  /** Sent as `clientName`. Default `exec-server-client`. */
  readonly clientName?: string;
  /** Connect timeout. Default 10 000 ms. */
  readonly connectTimeoutMs?: number;
  /** `initialize` timeout. Default 10 000 ms. */
  readonly initializeTimeoutMs?: number;
  /**
   * Reconnect and resume after a dropped connection (WebSocket, rendezvous
   * and custom transports). Default: on for `url` and `rendezvous`, giving up
   * after 8 attempts (about a minute).
   */
  readonly reconnect?: boolean | ReconnectOptions;
  /**
   * Resume this session (from another client or an earlier run) at the
   * first connection; an unknown id fails `connect`.
   */
  readonly resumeSessionId?: string;
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
}

export type { SpawnOptions } from "./spawn_options.ts";

const DEFAULT_POLICY: EnvPolicy = {
  inherit: "all",
  ignoreDefaultExcludes: false,
  exclude: [],
  set: {},
  includeOnly: [],
};

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** A connection (possibly re-established) to one exec-server session. */
export class ExecServerClient implements AsyncDisposable {
  /** Files on the server. */
  readonly fs: RemoteFs;

  #options: ConnectOptions;
  #logger: Logger;
  #transport: OpenedTransport | null = null;
  #peer: RpcPeer | null = null;
  #sessionId: string | null = null;
  #info: EnvironmentInfo | null = null;
  #processes = new Map<string, RemoteProcess>();
  #bodies = new BodyStreams();
  #closeReason: string | null = null;
  #closing = false;
  #connecting: Promise<void> | null = null;
  #processCounter = 0;
  #closed = Promise.withResolvers<string>();

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
    this.#options = options.rendezvous && !options.transport
      ? {
        connectTimeoutMs: 30_000,
        ...options,
        reconnect,
        transport: rendezvousTransport(options.rendezvous),
      }
      : { ...options, reconnect };
    this.#sessionId = options.resumeSessionId ?? null;
    this.#logger = options.logger ?? nullLogger;
    this.fs = new RemoteFs({
      request: (method, params) => this.request(method, params),
      supports: (c) => this.supports(c),
    });
  }

  /** The session id (after the first connection). */
  get sessionId(): string | null {
    return this.#sessionId;
  }

  /** What the server reported at `initialize`. */
  get environmentInfo(): EnvironmentInfo | null {
    return this.#info;
  }

  /** The server's capability flags (all false before connecting). */
  get capabilities(): Partial<Capabilities> {
    return this.#info?.capabilities ?? {};
  }

  /** True when the server advertises `capability`. */
  supports(capability: string): boolean {
    return (this.#info?.capabilities as Record<string, boolean> | undefined)?.[capability] === true;
  }

  /** Resolves with the reason once the client is closed for good. */
  get closed(): Promise<string> {
    return this.#closed.promise;
  }

  /** Connects (if not connected) and completes the handshake. */
  ensureConnected(): Promise<void> {
    if (this.#closeReason !== null) {
      return Promise.reject(new ConnectionClosedError(this.#closeReason));
    }
    if (this.#peer && this.#peer.closeInfo === null) return Promise.resolve();
    this.#connecting ??= this.#connectLoop().finally(() => (this.#connecting = null));
    return this.#connecting;
  }

  async #connectOnce(): Promise<void> {
    const options = this.#options;
    const open = options.transport ??
      (options.command
        ? () =>
          Promise.resolve(
            openCommandTransport(options.command!, {
              logger: this.#logger,
              ...(options.stopTimings ? { timings: options.stopTimings } : {}),
            }),
          )
        : () =>
          openWebSocketTransport({
            url: options.url!,
            ...(options.token !== undefined ? { token: options.token } : {}),
            ...(options.headers ? { headers: options.headers } : {}),
            timeoutMs: options.connectTimeoutMs ?? 10_000,
          }));
    const transport = await withTimeout(open(), options.connectTimeoutMs ?? 10_000, "connect");
    const peer = new RpcPeer(transport.connection, {
      onNotification: (method, params) => this.#onNotification(method, params),
      onRequest: (method, params) => this.#onServerRequest(method, params),
      onMalformed: "close",
      logger: this.#logger,
      ...(options.trace ? { trace: options.trace } : {}),
    });
    try {
      const params: InitializeParams = {
        clientName: options.clientName ?? "exec-server-client",
      };
      if (this.#sessionId) params.resumeSessionId = this.#sessionId;
      if (options.maxMessageBytes !== undefined) params.maxMessageBytes = options.maxMessageBytes;
      const result = await withTimeout(
        peer.request<MethodResult<typeof Method.Initialize>>(Method.Initialize, params),
        options.initializeTimeoutMs ?? 10_000,
        `initialize with ${transport.label}`,
      );
      if (
        !result || typeof result.sessionId !== "string" ||
        typeof result.environmentInfo !== "object"
      ) {
        throw new Error(`${transport.label} answered initialize with an invalid result`);
      }
      await peer.notify(ClientNotification.Initialized, {});
      this.#sessionId = result.sessionId;
      this.#info = result.environmentInfo;
    } catch (error) {
      peer.close("handshake failed");
      const why = error instanceof ConnectionClosedError ? await transport.ended?.() : null;
      await transport.close();
      if (why) {
        throw new Error(
          `the exec-server command \`${transport.label}\` ${why} before answering initialize`,
          { cause: error },
        );
      }
      throw error;
    }
    this.#transport = transport;
    this.#peer = peer;
    peer.closed.then((info) => this.#onDisconnect(peer, info.reason));
  }

  async #connectLoop(): Promise<void> {
    const reconnect = this.#options.reconnect;
    const policy: ReconnectOptions = typeof reconnect === "object" ? reconnect : {};
    // The first connection resuming a given session must find it.
    const explicit = this.#peer === null && this.#info === null;
    let resuming = this.#sessionId !== null;
    for (let attempt = 0;; attempt++) {
      try {
        await this.#connectOnce();
        if (resuming) await this.#catchUpAll();
        return;
      } catch (error) {
        if (resuming && !explicit && reconnect && isUnknownSession(error) && !this.#closing) {
          this.#replaceSession(`session ${this.#sessionId} was lost: ${(error as Error).message}`);
          resuming = false;
          attempt = -1;
          continue;
        }
        const fatal = !resuming || !reconnect ||
          (error instanceof RpcError && (error.code === -32600 || error.code === -32010)) ||
          attempt + 1 >= (policy.maxAttempts ?? Infinity) || this.#closing;
        if (fatal) {
          if (resuming) this.#fail(`reconnect failed: ${(error as Error).message}`);
          throw error;
        }
        const base = Math.min(
          policy.maxDelayMs ?? 30_000,
          (policy.initialDelayMs ?? 250) * 2 ** attempt,
        );
        const wait = base * (0.5 + Math.random());
        this.#logger.info("client.reconnect_retry", {
          attempt: attempt + 1,
          delayMs: Math.round(wait),
          error: (error as Error).message,
        });
        await delay(wait);
      }
    }
  }

  /**
   * The server no longer knows our session: its processes are gone with it.
   * They fail with `reason`; the next connection starts a fresh session.
   */
  #replaceSession(reason: string): void {
    this.#logger.warn("client.session_replaced", { sessionId: this.#sessionId, reason });
    this.#sessionId = null;
    for (const p of [...this.#processes.values()]) p.fail(reason);
    this.#processes.clear();
    this.#bodies.failAll(reason);
  }

  async #catchUpAll(): Promise<void> {
    await Promise.all([...this.#processes.values()].map((p) => p.catchUp().catch(() => {})));
  }

  #onDisconnect(peer: RpcPeer, reason: string): void {
    if (this.#peer !== peer) return;
    this.#peer = null;
    const transport = this.#transport;
    this.#transport = null;
    transport?.close().catch(() => {});
    if (this.#closing) return;
    this.#bodies.failAll(`connection lost: ${reason}`);
    const canReconnect = this.#options.reconnect && !this.#options.command &&
      this.#sessionId !== null;
    if (!canReconnect) {
      this.#fail(reason);
      return;
    }
    this.#logger.warn("client.disconnected", { reason });
    this.ensureConnected().catch(() => {});
  }

  #fail(reason: string): void {
    if (this.#closeReason !== null) return;
    this.#closeReason = reason;
    for (const p of [...this.#processes.values()]) p.fail(reason);
    this.#processes.clear();
    this.#bodies.failAll(reason);
    this.#closed.resolve(reason);
  }

  /** The server's requests: only `network/policyRequest` exists. */
  async #onServerRequest(method: string, params: unknown): Promise<NetworkPolicyRequestResult> {
    const decide = this.#options.onNetworkPolicyRequest;
    if (method !== ServerRequest.NetworkPolicyRequest || !decide) {
      throw new RpcError(JsonRpcCode.MethodNotFound, `method not found: ${method}`);
    }
    return { decision: await decide(params as NetworkPolicyRequestParams) };
  }

  #onNotification(method: string, params: unknown): Promise<void> | void {
    // Process events never hold up the connection (per-process flow control).
    switch (method) {
      case ServerNotification.ProcessOutput: {
        const p = params as ProcessOutputNotification;
        this.#processes.get(p.processId)?.accept(chunkEvent(p));
        return;
      }
      case ServerNotification.ProcessExited: {
        const p = params as ProcessExitedNotification;
        this.#processes.get(p.processId)?.accept({
          kind: "exited",
          seq: p.seq,
          code: p.exitCode,
          signal: p.signal ?? null,
        });
        return;
      }
      case ServerNotification.ProcessClosed: {
        const p = params as ProcessClosedNotification;
        this.#processes.get(p.processId)?.accept({ kind: "closed", seq: p.seq });
        return;
      }
      case ServerNotification.HttpBodyDelta:
        return this.#bodies.accept(params as HttpBodyDeltaNotification) ?? undefined;
      case ServerNotification.NetworkPolicyDecision:
        this.#options.onNetworkPolicyDecision?.(params as NetworkPolicyDecisionNotification);
        return;
      default:
        this.#logger.debug("client.notification", { method });
    }
  }

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
  async call(method: string, params?: unknown): Promise<unknown> {
    await this.ensureConnected();
    const peer = this.#peer;
    if (!peer) throw new ConnectionClosedError(this.#closeReason ?? "not connected");
    return await peer.request(method, params);
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
    if (this.#processes.has(processId)) {
      throw new RpcError(-32600, `process ${processId} is already attached`);
    }
    const process = this.#newProcess(processId, options);
    try {
      await process.catchUp();
    } catch (error) {
      if (this.#processes.get(processId) === process) this.#processes.delete(processId);
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
      request: (m, p) => this.request(m, p),
      supports: (c) => this.supports(c),
      release: (id) => {
        if (this.#processes.get(id) === process) this.#processes.delete(id);
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
    this.#processes.set(processId, process);
    return process;
  }

  /** Starts `argv` on the server. */
  async spawn(argv: readonly string[], options: SpawnOptions = {}): Promise<RemoteProcess> {
    await this.ensureConnected();
    const processId = options.processId ??
      `p${++this.#processCounter}-${crypto.randomUUID().slice(0, 8)}`;
    if (this.#processes.has(processId)) {
      // Refused here: the server would refuse it too, and the first process
      // must keep its routing.
      throw new RpcError(-32600, `process ${processId} already exists`);
    }
    const process = this.#newProcess(processId, options);
    const params: ProcessStartParams = {
      processId,
      argv: [...argv],
      cwd: options.cwd !== undefined ? toPathUri(options.cwd) : this.#info!.cwd,
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
      if (this.#processes.get(processId) === process) this.#processes.delete(processId);
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
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    return remoteFetch(
      {
        request: (m, p) => this.request(m, p),
        bodies: this.#bodies,
      },
      input,
      init,
    );
  }

  /** Closes the connection (and stops a spawned server with its whole tree). */
  async close(): Promise<void> {
    this.#closing = true;
    const peer = this.#peer;
    const transport = this.#transport;
    this.#peer = null;
    this.#transport = null;
    this.#fail("client closed");
    peer?.close("client closed");
    await transport?.close();
    await this.#connecting?.catch(() => {});
  }

  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** Attempts of the default reconnect policy (backoff 250 ms · 2^n, ≤ 30 s: about a minute). */
const DEFAULT_RECONNECT_ATTEMPTS = 8;

function isUnknownSession(error: unknown): boolean {
  return error instanceof RpcError && error.code === -32600 &&
    error.message.startsWith("unknown session id");
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
