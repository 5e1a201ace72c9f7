/**
 * One client connection to the server: the handshake and its gating, the
 * method table, per-connection resources, and what happens to the session
 * when the connection ends (stdio: terminated; WebSocket: detached).
 *
 * @module
 */

import { withProtocolErrors } from "./domain_errors.ts";
import type { CloseInfo, Connection } from "../jsonrpc/connection.ts";
import { type RequestContext, RpcPeer } from "../jsonrpc/peer.ts";
import { decodeParams } from "../protocol/decode.ts";
import { REQUESTS } from "../protocol/spec.ts";
import { invalidRequest, methodNotFound } from "../protocol/errors.ts";
import {
  ClientNotification,
  CONTROL_METHODS,
  Method,
  methodFamily,
  orderKeyOf,
} from "../protocol/methods.ts";
import type { FileSystemSandboxContext, InitializeResult } from "../protocol/types.ts";
import { sandboxReady } from "../sandbox/policy.ts";
import type { Logger } from "../log/logger.ts";
import type { ServerState } from "./server_state.ts";
import { ResourceScope } from "./resource_scope.ts";
import { settleWithin } from "../util/async.ts";
import type { Session, SessionAttachment } from "./session.ts";
import type { DisconnectPolicy, MethodRegistry, MethodSpec } from "./handler.ts";

export type { DisconnectPolicy };

/** Options for {@linkcode ServerConnection}. */
export interface ServerConnectionOptions {
  /** `terminate` (stdio) or `detach` (WebSocket, resumable). */
  readonly onDisconnect: DisconnectPolicy;
  /** The methods it serves. */
  readonly methods: MethodRegistry;
}

const DRAIN_TIMEOUT_MS = 2000;

type HandshakeState = "awaiting-initialize" | "awaiting-initialized" | "ready";

/** See the module documentation. */
export class ServerConnection {
  /** The JSON-RPC peer. */
  readonly peer: RpcPeer;
  /** File handles, HTTP streams and watches of this connection. */
  readonly resources: ResourceScope;
  /** Resolves after the connection ended and its resources were released. */
  readonly closed: Promise<CloseInfo>;

  #server: ServerState;
  #state: HandshakeState = "awaiting-initialize";
  #session: Session | null = null;
  #logger: Logger;
  #options: ServerConnectionOptions;
  /** The largest message the client declared it accepts (initialize). */
  #limits: { declared: number | undefined } = { declared: undefined };

  /** Starts serving `connection`. */
  constructor(server: ServerState, connection: Connection, options: ServerConnectionOptions) {
    this.#server = server;
    this.#options = options;
    this.#logger = server.logger.child({ connection: connection.label });
    this.peer = new RpcPeer(connection, {
      onRequest: (method, params, ctx) => this.#onRequest(method, params, ctx),
      onNotification: (method) => this.#onNotification(method),
      concurrency: server.options.concurrency,
      laneOf: (method) => CONTROL_METHODS.has(method) ? "control" : "ordinary",
      orderKey: orderKeyOf,
      inline: () => this.#state !== "ready",
      logger: this.#logger,
      tracer: server.tracer,
      observer: server.metrics
        ? (method, result, queued, run) =>
          server.metrics!.request(method, result, { queuedSeconds: queued, runSeconds: run })
        : null,
    });
    this.closed = this.peer.closed.then(async (info) => {
      this.#logger.info("connection.closed", { reason: info.reason });
      // Handlers see the abort signal; give them a moment to answer, then
      // flush what is queued before releasing anything.
      await settleWithin(this.peer.drain(), DRAIN_TIMEOUT_MS);
      await this.peer.flushAndClose(DRAIN_TIMEOUT_MS);
      await this.resources.dispose();
      const session = this.#session;
      if (session) {
        if (this.#options.onDisconnect === "terminate") {
          await server.sessions.terminate(session);
        } else {
          session.detach();
        }
      }
      return info;
    });
    const peer = this.peer;
    const limits = this.#limits;
    this.resources = new ResourceScope({
      notify: (method, params) => peer.notify(method, params),
      ready: () => (peer.congested ? peer.ready : null),
      get maxMessageBytes() {
        return limits.declared ?? connection.maxOutgoingBytes;
      },
      signal: peer.signal,
    });
    this.#logger.info("connection.opened");
  }

  /** Whether the session outlives this connection (`detach`) or dies with it. */
  get disconnectPolicy(): DisconnectPolicy {
    return this.#options.onDisconnect;
  }

  /** The attached session, once initialized. */
  get session(): Session | null {
    return this.#session;
  }

  /** Ends the connection. */
  close(reason?: string): void {
    this.peer.close(reason);
  }

  #attachment(): SessionAttachment {
    const peer = this.peer;
    return {
      label: peer.connection.label,
      notify: (method, params) => peer.notifyDelivered(method, params),
      ready: () => (peer.congested ? peer.ready : null),
      request: (method, params, timeoutMs) => peer.request(method, params, { timeoutMs }),
    };
  }

  #initialize(params: unknown): InitializeResult | Promise<InitializeResult> {
    if (this.#state !== "awaiting-initialize") {
      throw invalidRequest("initialize may only be sent once per connection");
    }
    const p = decodeParams(REQUESTS[Method.Initialize].decode, params);
    const sessions = this.#server.sessions;
    const session = p.resumeSessionId != null
      ? sessions.resume(p.resumeSessionId, this.#attachment())
      : sessions.create(this.#attachment());
    this.#session = session;
    this.#limits.declared = p.maxMessageBytes ?? undefined;
    this.#state = "awaiting-initialized";
    this.#logger.info("connection.initialized", {
      clientName: p.clientName,
      sessionId: session.id,
      resumed: p.resumeSessionId != null,
    });
    const info = this.#server.environmentInfo();
    this.#server.warm();
    return info instanceof Promise
      ? info.then((environmentInfo) => ({ sessionId: session.id, environmentInfo }))
      : { sessionId: session.id, environmentInfo: info };
  }

  #onRequest(method: string, params: unknown, rpc: RequestContext): unknown {
    // No memory to give back after a handshake (and the trimmer's first
    // timer costs a first answer ~10 ms: Deno loads its timers then).
    if (method === Method.Initialize) return this.#initialize(params);
    this.#server.trimmer.note();
    const spec = this.#options.methods.get(method);
    if (!spec) throw methodNotFound(method);
    // Like the reference: params are validated before the handshake gate.
    const decoded = decodeParams(spec.decode, params);
    if (this.#state === "awaiting-initialize") {
      throw invalidRequest(
        `client must call initialize before using ${methodFamily(method)} methods`,
      );
    }
    if (this.#state === "awaiting-initialized") {
      throw invalidRequest(
        `client must send initialized before using ${methodFamily(method)} methods`,
      );
    }
    // The first sandbox policy with glob patterns waits for their expansion to load.
    const ready = sandboxReady((decoded as { sandbox?: FileSystemSandboxContext | null }).sandbox);
    if (ready) return ready.then(() => this.#handle(spec, decoded, rpc));
    return this.#handle(spec, decoded, rpc);
  }

  #handle(spec: MethodSpec, decoded: unknown, rpc: RequestContext): unknown {
    return withProtocolErrors(() =>
      spec.handle(decoded, {
        server: this.#server,
        connection: this,
        session: this.#session!,
        rpc,
      })
    );
  }

  #onNotification(method: string): void {
    if (method === ClientNotification.Initialized) {
      if (this.#state === "awaiting-initialized") {
        this.#state = "ready";
      } else if (this.#state === "awaiting-initialize") {
        this.#logger.warn("connection.initialized_before_initialize");
      }
      return;
    }
    // JSON-RPC says unknown notifications are ignored (the reference closes
    // the connection instead).
    this.#logger.warn("connection.unknown_notification", { method });
  }
}
