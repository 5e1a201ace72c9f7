/**
 * The WebSocket listener (`--listen ws://IP:PORT`), on `Deno.listen`.
 *
 * Routes as the reference: any request carrying `Origin` → 403 (before
 * anything else); `GET|HEAD /readyz` → 200 without auth (other methods
 * 405); `/` upgrades (400 without upgrade headers, 401 when auth fails);
 * anything else 404. Each upgraded socket is one connection whose session
 * is detached, not killed, when it drops.
 *
 * The WebSocket protocol itself is implemented in `src/jsonrpc/websocket`
 * rather than with `Deno.upgradeWebSocket`, whose server sockets cannot
 * send a ping without also closing peers that do not answer, expose no
 * frame-level limit, and give no backpressure.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import type { Connection } from "../jsonrpc/connection.ts";
import { webSocketConnection } from "../jsonrpc/websocket_adapter.ts";
import { LARGE_MESSAGE_BYTES } from "../jsonrpc/large_message.ts";
import { BASE64_MEMBERS } from "../protocol/spec.ts";
import { acceptWebSocket, upgradeProblem, type WebSocketLimits } from "../websocket/handshake.ts";
import { encodeResponse, HttpHeadError, readHead } from "../http1/head.ts";
import { headReader } from "../http1/body.ts";
import { writeAll } from "../util/conn_io.ts";
import type { ExecServer } from "./exec_server.ts";
import { checkWebSocketAuth, type WebSocketAuth } from "./ws_auth.ts";
import { acceptConnections } from "../util/accept_loop.ts";
import { bracketHost, isLoopbackHost } from "../util/host.ts";

/** Options for {@linkcode listenWebSocket}. */
export interface WebSocketListenOptions {
  /** IP literal to bind (IPv4, or IPv6 without brackets). */
  readonly hostname: string;
  /** Port; 0 picks a free one. */
  readonly port: number;
  /** Upgrade authentication. Default none. */
  readonly auth?: WebSocketAuth;
  /** Allow a non-loopback bind without authentication. */
  readonly allowUnauthenticated?: boolean;
  /** Frame/message limits and ping interval. */
  readonly limits?: WebSocketLimits;
}

/** A running WebSocket listener. */
export interface WebSocketListener {
  /** The bound URL, e.g. `ws://127.0.0.1:41535`. */
  readonly url: string;
  /** The bound address. */
  readonly addr: Deno.NetAddr;
  /** Stops accepting and closes every socket (sessions are not killed). */
  close(): Promise<void>;
  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Formats `ws://host:port` with IPv6 brackets. */
export function formatWsUrl(addr: Deno.NetAddr): string {
  const host = bracketHost(addr.hostname);
  return `ws://${host}:${addr.port}`;
}

/** Starts listening; throws when the address is refused or cannot be bound. */
export function listenWebSocket(
  server: ExecServer,
  options: WebSocketListenOptions,
): WebSocketListener {
  const auth = options.auth ?? { mode: "none" };
  if (auth.mode === "none" && !isLoopbackHost(options.hostname) && !options.allowUnauthenticated) {
    throw new Error(
      `refusing to listen on non-loopback address ${options.hostname} without --ws-auth; ` +
        "pass --allow-unauthenticated to accept unauthenticated connections from the network",
    );
  }
  let listener: Deno.TcpListener;
  try {
    listener = Deno.listen({ hostname: options.hostname, port: options.port, transport: "tcp" });
  } catch (error) {
    const host = bracketHost(options.hostname);
    throw new Error(`cannot listen on ${host}:${options.port}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const addr = listener.addr as Deno.NetAddr;
  const url = formatWsUrl(addr);
  const logger = server.logger.child({ listener: url });
  const loop = acceptConnections(
    listener,
    (conn, release) => handleSocket(server, conn, release, auth, options.limits ?? {}, logger),
    (error, during) =>
      logger.warn(during === "accept" ? "ws.accept_failed" : "ws.socket_failed", { error }),
  );

  async function handleSocket(
    server: ExecServer,
    conn: Deno.Conn,
    release: () => void,
    auth: WebSocketAuth,
    limits: WebSocketLimits,
    logger: Logger,
  ): Promise<void> {
    // The upgrade's request head and its helpers are garbage once it is
    // done: only the connection lives as long as it is served.
    const connection = await upgrade(conn, release, auth, limits, logger);
    if (connection === null) return;
    await server.serve(connection, "detach");
    release();
  }

  /** Answers a request that is no upgrade (null), or upgrades it. */
  async function upgrade(
    conn: Deno.Conn,
    release: () => void,
    auth: WebSocketAuth,
    limits: WebSocketLimits,
    logger: Logger,
  ): Promise<Connection | null> {
    const remote = conn.remoteAddr as Deno.NetAddr;
    const peerLabel = `${bracketHost(remote.hostname)}:${remote.port}`;
    const respond = async (status: number, headers: Record<string, string> = {}, body = "") => {
      await writeAll(conn, encodeResponse(status, headers, body)).catch(() => {});
      await conn.closeWrite().catch(() => {});
      release();
      try {
        conn.close();
      } catch { /* closed */ }
      return null;
    };
    let head;
    try {
      head = await readHead(headReader(conn));
    } catch (error) {
      if (error instanceof HttpHeadError) return respond(error.status, {}, error.message);
      return respond(400);
    }
    const [method, target] = head.startLine;
    const path = target.split("?")[0];
    if (head.headers.has("origin")) return respond(403);
    if (path === "/readyz") {
      if (method === "GET" || method === "HEAD") return respond(200);
      return respond(405, { allow: "GET,HEAD" });
    }
    if (path !== "/") return respond(404);
    const problem = upgradeProblem(head);
    if (problem) {
      return respond(problem.status, { "content-type": "text/plain; charset=utf-8" }, problem.body);
    }
    const denied = await checkWebSocketAuth(auth, head.headers);
    if (denied !== null) {
      logger.info("ws.unauthorized", { peer: peerLabel, reason: denied });
      return respond(401, { "content-type": "text/plain; charset=utf-8" }, denied);
    }
    const channel = await acceptWebSocket(
      conn,
      head,
      { rawTextFrom: LARGE_MESSAGE_BYTES, ...limits },
      true,
    );
    return webSocketConnection(channel, {
      base64Members: BASE64_MEMBERS,
      label: `ws ${peerLabel}`,
      parseErrorPrefix:
        `failed to parse websocket JSON-RPC message from exec-server websocket ${peerLabel}`,
    });
  }

  const close = () => loop.close();

  return { url, addr, close, [Symbol.asyncDispose]: close };
}
