/**
 * The exec-server core: sessions, the method table and the environment,
 * independent of any transport. Listeners hand it connections.
 *
 * @module
 */

import type { Connection } from "../jsonrpc/connection.ts";
import { createLogger, type Logger } from "../log/logger.ts";
import type { EnvironmentInfo } from "../protocol/types.ts";
import { serverCapabilities } from "./capabilities.ts";
import { type DisconnectPolicy, ServerConnection } from "./connection.ts";
import { environmentInfo } from "./environment_info.ts";
import type { MethodTable } from "./handler.ts";
import { environmentMethods } from "./handlers/environment.ts";
import { SessionRegistry } from "./session_registry.ts";

/** Options of an {@linkcode ExecServer}. */
export interface ExecServerOptions {
  /** Requests handled at once per connection and lane. Default 32. */
  readonly concurrency?: number;
  /** How long a closed process stays readable, in ms. Default 80 000. */
  readonly processRetentionMs?: number;
  /** How long a detached session may be resumed, in ms. Default 80 000. */
  readonly sessionTtlMs?: number;
  /** Cap on buffered `http/request` bodies, in bytes. Default 256 MiB. */
  readonly httpBodyLimitBytes?: number;
  /** Where to log. Default: JSON lines on stderr at `info`. */
  readonly logger?: Logger;
}

/** Fully resolved options. */
export interface ResolvedExecServerOptions {
  /** Requests handled at once per connection and lane. */
  readonly concurrency: number;
  /** How long a closed process stays readable, in ms. */
  readonly processRetentionMs: number;
  /** How long a detached session may be resumed, in ms. */
  readonly sessionTtlMs: number;
  /** Cap on buffered `http/request` bodies, in bytes. */
  readonly httpBodyLimitBytes: number;
}

/** See the module documentation. */
export class ExecServer {
  /** Resolved options. */
  readonly options: ResolvedExecServerOptions;
  /** Where the server logs. */
  readonly logger: Logger;
  /** Live sessions. */
  readonly sessions: SessionRegistry;
  /** What `environment/info` answers. */
  readonly environmentInfo: EnvironmentInfo;

  #methods: MethodTable;
  #connections = new Set<ServerConnection>();
  #closed = false;

  /** Creates a server; it serves nothing until given connections. */
  constructor(options: ExecServerOptions = {}) {
    this.options = {
      concurrency: options.concurrency ?? 32,
      processRetentionMs: options.processRetentionMs ?? 80_000,
      sessionTtlMs: options.sessionTtlMs ?? 80_000,
      httpBodyLimitBytes: options.httpBodyLimitBytes ?? 256 * 1024 * 1024,
    };
    this.logger = options.logger ?? createLogger();
    this.sessions = new SessionRegistry(
      {
        processRetentionMs: this.options.processRetentionMs,
        sessionTtlMs: this.options.sessionTtlMs,
      },
      this.logger,
    );
    this.#methods = { ...environmentMethods };
    this.environmentInfo = environmentInfo(
      serverCapabilities({ methods: new Set(Object.keys(this.#methods)), tty: false }),
    );
  }

  /** Connections currently served. */
  get connectionCount(): number {
    return this.#connections.size;
  }

  /**
   * Serves one connection. With `detach` (WebSocket) its session survives a
   * disconnect; with `terminate` (stdio) the session's processes are killed.
   */
  serve(connection: Connection, onDisconnect: DisconnectPolicy): ServerConnection {
    if (this.#closed) {
      connection.close("server is shutting down");
      throw new Error("server is closed");
    }
    const served = new ServerConnection(this, connection, this.#methods, { onDisconnect });
    this.#connections.add(served);
    served.closed.finally(() => this.#connections.delete(served));
    return served;
  }

  /** Closes every connection and kills every session's processes. */
  async close(): Promise<void> {
    this.#closed = true;
    const connections = [...this.#connections];
    for (const c of connections) c.close("server shutting down");
    await Promise.allSettled(connections.map((c) => c.closed));
    await this.sessions.closeAll();
  }

  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
