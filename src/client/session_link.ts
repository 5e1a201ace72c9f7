/**
 * The connection lifecycle of one `ExecServerClient`: opening a transport,
 * the `initialize` handshake (resuming the session when there is one),
 * background reconnection with backoff after an outage, replacing a
 * session the server no longer knows, and the latched close reason. The
 * client's convenience API (`client.ts`) calls through it; notifications
 * and server requests go to the client's router (`routing.ts`).
 *
 * @module
 */

import type { MethodResult } from "../protocol/spec.ts";
import type { TraceContext } from "../jsonrpc/message.ts";
import { ConnectionClosedError } from "../jsonrpc/errors.ts";
import { type CallOptions, RpcPeer } from "../jsonrpc/peer.ts";
import {
  ClientClosedError,
  ConnectTimeoutError,
  DisconnectedError,
  EnvironmentNotReadyError,
  InitializeTimeoutError,
  SessionLostError,
} from "./errors.ts";
import type { Logger } from "../log/logger.ts";
import { ClientNotification, Method } from "../protocol/methods.ts";
import { isUnknownSession } from "../protocol/errors.ts";
import type { EnvironmentInfo, InitializeParams } from "../protocol/types.ts";
import { delay } from "../util/async.ts";
import type { ClientRouter } from "./routing.ts";
import type { ClientTransport, OpenedTransport } from "./transports.ts";

/** Reconnection behaviour. */
export interface ReconnectOptions {
  /** First delay before retrying in the background. Default 250 ms. */
  readonly initialDelayMs?: number;
  /** Largest delay. Default 30 000 ms. */
  readonly maxDelayMs?: number;
  /**
   * Background attempts after a disconnect (default 8, about a minute).
   * After them the client waits: the next call tries again. It never
   * closes for good because of an outage.
   */
  readonly maxAttempts?: number;
}

/** How a reconnection went on (see {@linkcode ConnectOptions.onReconnect}). */
export interface ReconnectEvent {
  /** `resumed`: the same session, its processes kept; `fresh`: a new session. */
  readonly kind: "resumed" | "fresh";
  /** The session now. */
  readonly sessionId: string;
  /** The session before (`fresh`: the one that was lost). */
  readonly previousSessionId: string | null;
  /** Why the session was not resumed (`fresh`). */
  readonly reason?: string;
}

/** Attempts of the default reconnect policy (backoff 250 ms · 2^n, ≤ 30 s: about a minute). */
export const DEFAULT_RECONNECT_ATTEMPTS = 8;

/** What a link needs, resolved by the client from its `ConnectOptions`. */
export interface LinkOptions {
  /** Opens a connection (every attempt). */
  readonly transport: ClientTransport;
  /** What the target is called in errors before a transport is open. */
  readonly label: string;
  readonly connectTimeoutMs: number;
  readonly initializeTimeoutMs: number;
  readonly clientName: string;
  readonly maxMessageBytes?: number;
  readonly trace?: () => TraceContext | undefined;
  /** Told of every request attempted (the handshake's included), before it is sent. */
  readonly onRequest?: (method: string) => void;
  /** `false`: a dropped connection closes the client for good. */
  readonly reconnect: boolean | ReconnectOptions;
  readonly onReconnect?: (event: ReconnectEvent) => void;
  /** Resume this session at the first connection. */
  readonly resumeSessionId?: string;
  /** Waited for before the first dial (not counted in the connect timeout). */
  readonly ready?: Promise<unknown> | (() => Promise<unknown>);
}

/**
 * `promise` or, after `ms`, `onTimeout()`'s error; a value arriving late is
 * handed to `dispose`.
 */
function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
  dispose?: (late: T) => void,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timedOut = false;
  if (dispose) promise.then((value) => timedOut && dispose(value), () => {});
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(onTimeout());
      }, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** One client's connection to its session, re-established as needed. */
export class SessionLink {
  readonly #options: LinkOptions;
  readonly #router: ClientRouter;
  readonly #logger: Logger;
  #transport: OpenedTransport | null = null;
  #peer: RpcPeer | null = null;
  #sessionId: string | null;
  #info: EnvironmentInfo | null = null;
  #closeReason: string | null = null;
  #closing = false;
  /** Closes of transports whose connection ended on its own, still under way. */
  readonly #droppedTransports = new Set<Promise<void>>();
  /** The connection attempt in flight (calls join it). */
  #attempt: Promise<void> | null = null;
  /** Ever connected: later failures are outages, not a failed `connect`. */
  #everConnected = false;
  /** Why the last connection or attempt failed (for errors during an outage). */
  #lastFailure = "not connected";
  #retrying = false;
  #closed = Promise.withResolvers<string>();
  /** Aborted at close: ends background waits. */
  #stop = new AbortController();

  /** A link for `options`, routing what the server sends through `router`. */
  constructor(options: LinkOptions, router: ClientRouter, logger: Logger) {
    this.#options = options;
    this.#router = router;
    this.#logger = logger;
    this.#sessionId = options.resumeSessionId ?? null;
  }

  /** The session id (after the first connection). */
  get sessionId(): string | null {
    return this.#sessionId;
  }

  /** What the server reported at `initialize`. */
  get info(): EnvironmentInfo | null {
    return this.#info;
  }

  /** Resolves with the reason once the link is closed for good. */
  get closed(): Promise<string> {
    return this.#closed.promise;
  }

  /**
   * Connects (if not connected) and completes the handshake. After an
   * outage this makes one attempt (or joins the one in flight), bounded by
   * the connect and initialize timeouts, and rejects with
   * {@linkcode DisconnectedError} when it fails — it never waits out a
   * backoff.
   */
  ensureConnected(): Promise<void> {
    if (this.#closeReason !== null) {
      return Promise.reject(new ClientClosedError(this.#closeReason));
    }
    if (this.#peer && this.#peer.closeInfo === null) return Promise.resolve();
    const attempt = this.#attempt ??= this.#connect().finally(() => (this.#attempt = null));
    if (!this.#everConnected) return attempt;
    return attempt.catch((error) => {
      if (error instanceof ClientClosedError) throw error;
      throw new DisconnectedError(
        `disconnected from ${this.#options.label}: ${(error as Error).message}`,
        { cause: error },
      );
    });
  }

  /** One attempt: open, handshake (resuming the session when there is one), catch up. */
  async #connect(): Promise<void> {
    const previous = this.#sessionId;
    const resuming = previous !== null;
    try {
      try {
        await this.#connectOnce();
      } catch (error) {
        // An explicit `resumeSessionId` must be found at the first connection.
        if (!resuming || !this.#everConnected || !isUnknownSession(error) || this.#closing) {
          throw error;
        }
        const lost = new SessionLostError(previous!, (error as Error).message);
        this.#replaceSession(lost);
        await this.#connectOnce();
        this.#reconnected({
          kind: "fresh",
          sessionId: this.#sessionId!,
          previousSessionId: previous,
          reason: lost.message,
        });
        return;
      }
      if (this.#closing) throw new ClientClosedError(this.#closeReason ?? "client closed");
      if (resuming && this.#everConnected) {
        await this.#router.catchUpAll();
        this.#reconnected({
          kind: "resumed",
          sessionId: this.#sessionId!,
          previousSessionId: previous,
        });
      }
      this.#everConnected = true;
    } catch (error) {
      this.#lastFailure = (error as Error).message;
      throw error;
    }
  }

  #reconnected(event: ReconnectEvent): void {
    this.#logger.info("client.reconnected", { ...event });
    try {
      this.#options.onReconnect?.(event);
    } catch (error) {
      this.#logger.warn("client.on_reconnect_failed", { error: (error as Error).message });
    }
  }

  /** Readiness, once: a given promise, or the function's (asked again after a refusal). */
  #readiness: Promise<unknown> | null = null;

  async #whenReady(): Promise<void> {
    const ready = this.#options.ready;
    if (ready === undefined || this.#everConnected) return;
    const pending = this.#readiness ??= typeof ready === "function" ? ready() : ready;
    try {
      await pending;
    } catch (error) {
      if (typeof ready === "function") this.#readiness = null;
      throw new EnvironmentNotReadyError(this.#options.label, error);
    }
  }

  async #connectOnce(): Promise<void> {
    await this.#whenReady();
    const options = this.#options;
    const connectMs = options.connectTimeoutMs;
    const transport = await withTimeout(
      options.transport(),
      connectMs,
      () => new ConnectTimeoutError(options.label, connectMs),
      (late) => void late.close().catch(() => {}),
    );
    if (this.#closing) {
      await transport.close();
      throw new ClientClosedError(this.#closeReason ?? "client closed");
    }
    const peer = new RpcPeer(transport.connection, {
      onNotification: (method, params) => this.#router.onNotification(method, params),
      onRequest: (method, params) => this.#router.onServerRequest(method, params),
      onMalformed: "close",
      logger: this.#logger,
      ...(options.trace ? { trace: options.trace } : {}),
    });
    try {
      const params: InitializeParams = {
        clientName: options.clientName,
      };
      if (this.#sessionId) params.resumeSessionId = this.#sessionId;
      if (options.maxMessageBytes !== undefined) params.maxMessageBytes = options.maxMessageBytes;
      const initializeMs = options.initializeTimeoutMs;
      options.onRequest?.(Method.Initialize);
      const result = await withTimeout(
        peer.request<MethodResult<typeof Method.Initialize>>(Method.Initialize, params),
        initializeMs,
        () => new InitializeTimeoutError(transport.label, initializeMs),
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

  /** Background attempts with backoff after a disconnect; calls do not wait for them. */
  async #retryInBackground(): Promise<void> {
    if (this.#retrying) return;
    this.#retrying = true;
    const reconnect = this.#options.reconnect;
    const policy: ReconnectOptions = typeof reconnect === "object" ? reconnect : {};
    const attempts = policy.maxAttempts ?? DEFAULT_RECONNECT_ATTEMPTS;
    try {
      for (let attempt = 0; attempt < attempts; attempt++) {
        if (this.#closing || (this.#peer && this.#peer.closeInfo === null)) return;
        try {
          await this.ensureConnected();
          return;
        } catch (error) {
          if (error instanceof ClientClosedError) return;
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
          await delay(wait, this.#stop.signal).catch(() => {});
        }
      }
      this.#logger.warn("client.reconnect_paused", {
        attempts,
        error: this.#lastFailure,
        note: "the next call tries again",
      });
    } finally {
      this.#retrying = false;
    }
  }

  /**
   * The server no longer knows our session: its processes are gone with it
   * and fail with `lost`; the next connection starts a fresh session.
   */
  #replaceSession(lost: SessionLostError): void {
    this.#logger.warn("client.session_replaced", {
      sessionId: this.#sessionId,
      reason: lost.message,
    });
    this.#sessionId = null;
    this.#router.failAll(lost.message, lost);
  }

  #onDisconnect(peer: RpcPeer, reason: string): void {
    if (this.#peer !== peer) return;
    this.#peer = null;
    const transport = this.#transport;
    this.#transport = null;
    // `close()` waits for it (a stdio server's group is reaped there).
    if (transport) {
      const closed = transport.close().catch(() => {});
      this.#droppedTransports.add(closed);
      void closed.then(() => this.#droppedTransports.delete(closed));
    }
    if (this.#closing) return;
    this.#lastFailure = `connection lost: ${reason}`;
    this.#router.bodies.failAll(`connection lost: ${reason}`);
    const canReconnect = this.#options.reconnect && this.#sessionId !== null;
    if (!canReconnect) {
      this.#fail(reason);
      return;
    }
    this.#logger.warn("client.disconnected", { reason });
    void this.#retryInBackground();
  }

  #fail(reason: string): void {
    if (this.#closeReason !== null) return;
    this.#closeReason = reason;
    this.#stop.abort();
    this.#router.failAll(reason);
    this.#closed.resolve(reason);
  }

  /** Sends one request (connecting first if needed); outages fail with `DisconnectedError`. */
  async call(method: string, params?: unknown, options: CallOptions = {}): Promise<unknown> {
    this.#options.onRequest?.(method);
    await this.ensureConnected();
    const peer = this.#peer;
    if (!peer) throw new DisconnectedError(this.#lastFailure);
    try {
      return await peer.request(method, params, options);
    } catch (error) {
      if (error instanceof ConnectionClosedError && !(error instanceof DisconnectedError)) {
        if (this.#closing) throw new ClientClosedError(this.#closeReason ?? error.message);
        // Without reconnection the client is closed for good, with this reason.
        if (!this.#options.reconnect) throw new ClientClosedError(error.message, { cause: error });
        throw new DisconnectedError(
          `connection to ${this.#options.label} lost before ${method} was answered: ${error.message}`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /** Whether {@linkcode close} was called (not: the connection ended on its own). */
  get closedByCaller(): boolean {
    return this.#closing;
  }

  /** Closes for good (and stops a spawned server with its whole tree). */
  async close(): Promise<void> {
    this.#closing = true;
    const peer = this.#peer;
    const transport = this.#transport;
    this.#peer = null;
    this.#transport = null;
    this.#fail("client closed");
    peer?.close("client closed");
    await transport?.close();
    await this.#attempt?.catch(() => {});
    await Promise.all(this.#droppedTransports);
  }
}
