/**
 * Streamable HTTP for MCP where every session is its own world: the first
 * `initialize` POST without a session id opens a session (and whatever backs
 * it — a child MCP server, a tool server), later requests carry
 * `mcp-session-id`, `DELETE` ends the session, and a session idle for
 * `idleTimeoutMs` (no request and nothing open) is closed. Two clients never
 * share a server process, so they never see each other's messages.
 *
 * Sessions are capped (`maxSessions`, sessions still starting included):
 * at the cap a new `initialize` is answered `503` with `Retry-After` (when
 * the first idle session can be closed) and nothing in use is touched. So a
 * client — hostile or careless, never sending `DELETE` — can make the
 * endpoint hold at most `maxSessions` backing sides (for a bridge, that many
 * MCP server processes) for at most `idleTimeoutMs` each after their last
 * request. Methods other than `GET`, `POST` and `DELETE` are `405` with
 * `Allow`, with or without a session.
 *
 * Loopback by default. Whatever the bind address, a request from a web page
 * (an `Origin` that is not a loopback origin) is refused, and so is a `Host`
 * that names something other than an IP literal, `localhost` or the bound
 * hostname: a DNS-rebinding page reaches the port under its own name.
 *
 * @module
 */

import type { McpSessionMetrics, SessionCloseReason } from "./session_metrics.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import { bracketHost, isIpLiteral, isLoopbackHost, normalizeHost } from "../util/host.ts";
import { loadMcpSdk, type Transport } from "./sdk.ts";

/** What backs one session. */
export interface McpHttpSession {
  /** Work in flight (a busy session is never idle). */
  readonly busy?: () => boolean;
  /** Resolves when the backing side ended on its own. */
  readonly closed?: Promise<void>;
  /** Ends the session's backing side. */
  close(): Promise<void>;
}

/** Options of {@linkcode serveMcpHttp}. */
export interface McpHttpOptions {
  /** Interface. Default `127.0.0.1`. */
  readonly hostname?: string;
  /** Port; `0` picks one. */
  readonly port: number;
  /** Endpoint path. Default `/mcp`. */
  readonly path?: string;
  /** Close sessions idle this long. Default 600 000 ms. */
  readonly idleTimeoutMs?: number;
  /** Sessions open (or starting) at once; more are refused with 503. Default {@linkcode DEFAULT_MAX_SESSIONS}. */
  readonly maxSessions?: number;
  /** Called for each new session with its transport (not yet started). */
  readonly openSession: (transport: Transport) => Promise<McpHttpSession>;
  /** Where session events go. */
  readonly logger?: Logger;
  /** Where sessions opened, refused, failed and closed are counted. */
  readonly metrics?: McpSessionMetrics | null;
}

/** A running endpoint. */
export interface McpHttpServer {
  /** Bound address. */
  readonly addr: Deno.NetAddr;
  /** The endpoint URL. */
  readonly url: string;
  /** Open sessions. */
  readonly sessionCount: number;
  /** Closes every session and stops listening. */
  close(): Promise<void>;
}

interface Entry {
  transport: Transport & { handleRequest(req: Request, options?: unknown): Promise<Response> };
  session: McpHttpSession | null;
  lastActive: number;
  active: number;
}

/** Default {@linkcode McpHttpOptions.maxSessions}. */
export const DEFAULT_MAX_SESSIONS = 16;

/** The codes of the MCP SDK's Streamable HTTP answers. */
const HttpRpcCode = {
  /** The SDK's generic refusal (origin, host, method, missing session id). */
  Refused: -32000,
  /** No such session. */
  SessionNotFound: -32001,
  /** The body is not JSON. */
  ParseError: -32700,
  /** The session could not be opened. */
  InternalError: -32603,
} as const;

function rpcError(
  status: number,
  code: number,
  message: string,
  headers?: Record<string, string>,
): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, {
    status,
    ...(headers ? { headers } : {}),
  });
}

/** The methods a Streamable HTTP endpoint serves. */
const ALLOWED_METHODS = "GET, POST, DELETE";

function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === "http:" || url.protocol === "https:") &&
      isLoopbackHost(url.hostname);
  } catch {
    return false;
  }
}

/** A `Host` a browser could only send for us, not for a rebinding name. */
function acceptableHost(host: string | null, bound: string): boolean {
  if (host === null) return false;
  let name: string;
  try {
    name = new URL(`http://${host}/`).hostname;
  } catch {
    return false;
  }
  const bare = name.startsWith("[") ? name.slice(1, -1) : name;
  return isIpLiteral(bare) || isLoopbackHost(bare) || normalizeHost(bare) === normalizeHost(bound);
}

function isInitialize(body: unknown): boolean {
  const one = (m: unknown) =>
    typeof m === "object" && m !== null && (m as { method?: unknown }).method === "initialize";
  return Array.isArray(body) ? body.some(one) : one(body);
}

/** Serves MCP sessions over Streamable HTTP (see the module documentation). */
export async function serveMcpHttp(options: McpHttpOptions): Promise<McpHttpServer> {
  const sdk = await loadMcpSdk();
  const logger = options.logger ?? nullLogger;
  const path = options.path ?? "/mcp";
  const idleMs = options.idleTimeoutMs ?? 600_000;
  const sessions = new Map<string, Entry>();
  const boundName = options.hostname ?? "127.0.0.1";
  const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
  /** Sessions whose backing side is starting (they hold a place under the cap). */
  let starting = 0;

  /** Seconds until the first idle session can be closed (in use ones never are). */
  const retryAfter = (): number => {
    const now = Date.now();
    let soonest = idleMs;
    for (const entry of sessions.values()) {
      if (entry.active > 0 || entry.session?.busy?.()) continue;
      soonest = Math.min(soonest, Math.max(0, entry.lastActive + idleMs - now));
    }
    return Math.max(1, Math.ceil(soonest / 1000));
  };

  const ending = new Set<Promise<void>>();
  const metrics = options.metrics ?? null;
  metrics?.track(() => sessions.size);
  const end = (id: string, reason: SessionCloseReason, why: string): Promise<void> => {
    const entry = sessions.get(id);
    if (!entry) return Promise.resolve();
    sessions.delete(id);
    metrics?.sessionClosed(reason);
    logger.info("mcp.session_closed", { session: id, reason: why });
    const task = (async () => {
      await entry.session?.close().catch(() => {});
      await entry.transport.close().catch(() => {});
    })();
    ending.add(task);
    task.finally(() => ending.delete(task));
    return task;
  };

  async function handle(req: Request): Promise<Response> {
    if (new URL(req.url).pathname !== path) return new Response("not found", { status: 404 });
    const origin = req.headers.get("origin");
    if (origin !== null && !isLoopbackOrigin(origin)) {
      return rpcError(403, HttpRpcCode.Refused, `Forbidden: origin ${origin} is not allowed`);
    }
    const host = req.headers.get("host");
    if (!acceptableHost(host, boundName)) {
      return rpcError(403, HttpRpcCode.Refused, `Forbidden: host ${host} is not allowed`);
    }
    if (!["GET", "POST", "DELETE"].includes(req.method)) {
      return rpcError(405, HttpRpcCode.Refused, "Method not allowed.", { Allow: ALLOWED_METHODS });
    }
    const sessionId = req.headers.get("mcp-session-id");
    if (sessionId !== null) {
      const entry = sessions.get(sessionId);
      if (!entry) return rpcError(404, HttpRpcCode.SessionNotFound, "Session not found");
      entry.active++;
      try {
        return await entry.transport.handleRequest(req);
      } finally {
        entry.active--;
        entry.lastActive = Date.now();
      }
    }
    if (req.method !== "POST") {
      return rpcError(400, HttpRpcCode.Refused, "Bad Request: No valid session ID provided");
    }
    let body: unknown;
    try {
      body = await req.json();
    } catch {
      return rpcError(400, HttpRpcCode.ParseError, "Parse error: the body is not JSON");
    }
    if (!isInitialize(body)) {
      return rpcError(400, HttpRpcCode.Refused, "Bad Request: No valid session ID provided");
    }
    if (sessions.size + starting >= maxSessions) {
      const seconds = retryAfter();
      metrics?.opened("refused");
      logger.warn("mcp.session_refused", { sessions: sessions.size, starting, maxSessions });
      return rpcError(
        503,
        HttpRpcCode.Refused,
        `Service Unavailable: ${maxSessions} sessions are open (the most this endpoint serves); ` +
          `close one with DELETE, or retry after ${seconds} s`,
        { "Retry-After": String(seconds) },
      );
    }
    starting++;
    try {
      return await openSession(req, body);
    } finally {
      starting--;
    }
  }

  /** Opens a session for an `initialize` POST and answers it. */
  async function openSession(req: Request, body: unknown): Promise<Response> {
    const entry: Entry = {
      transport: null as unknown as Entry["transport"],
      session: null,
      lastActive: Date.now(),
      active: 1,
    };
    const transport = new sdk.http.WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, entry);
        metrics?.opened("opened");
        logger.info("mcp.session_opened", { session: id });
      },
      onsessionclosed: (id) => void end(id, "deleted", "deleted by the client"),
    });
    entry.transport = transport;
    try {
      entry.session = await options.openSession(transport);
    } catch (error) {
      await transport.close().catch(() => {});
      metrics?.opened("failed");
      logger.warn("mcp.session_failed", { error });
      return rpcError(
        500,
        HttpRpcCode.InternalError,
        `cannot start the session: ${(error as Error).message}`,
      );
    }
    entry.session.closed?.then(() => {
      if (transport.sessionId) {
        void end(transport.sessionId, "backend_ended", "backing server ended");
      }
    });
    try {
      const response = await transport.handleRequest(req, { parsedBody: body });
      if (transport.sessionId === undefined) {
        // Initialization failed: nothing to keep.
        await entry.session.close().catch(() => {});
        await transport.close().catch(() => {});
      }
      return response;
    } finally {
      entry.active--;
      entry.lastActive = Date.now();
    }
  }

  const reaper = setInterval(() => {
    const now = Date.now();
    for (const [id, entry] of sessions) {
      if (entry.active > 0 || entry.session?.busy?.()) continue;
      if (now - entry.lastActive >= idleMs) void end(id, "idle", `idle for ${idleMs} ms`);
    }
  }, Math.max(50, Math.min(idleMs / 4, 30_000)));

  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port,
    onListen: () => {},
  }, handle);
  const addr = server.addr as Deno.NetAddr;
  const host = bracketHost(addr.hostname);
  let closing: Promise<void> | null = null;
  return {
    addr,
    url: `http://${host}:${addr.port}${path}`,
    get sessionCount() {
      return sessions.size;
    },
    close() {
      closing ??= (async () => {
        clearInterval(reaper);
        await Promise.allSettled(
          [...sessions.keys()].map((id) => end(id, "server_closing", "server closing")),
        );
        await Promise.allSettled([...ending]);
        await server.shutdown();
      })();
      return closing;
    },
  };
}
