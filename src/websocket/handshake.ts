/**
 * WebSocket opening handshakes: accepting an upgrade on an accepted
 * connection (server) and dialling a `ws://` or `wss://` URL (client).
 *
 * @module
 */

import {
  type ByteDuplex,
  type PooledChannelOptions,
  WebSocketChannel,
  type WebSocketChannelOptions,
} from "./channel.ts";
import {
  acceptKey,
  encodeResponse,
  HttpHeadError,
  type MessageHead,
  readHead,
} from "../http1/head.ts";
import { connReader } from "../http1/body.ts";
import { type ByteWriter, writeAll } from "../util/conn_io.ts";

/** Limits and timers shared by both roles. */
export type WebSocketLimits = Omit<WebSocketChannelOptions, "role" | "leftover">;

/** Why an upgrade request cannot be accepted (status and body to answer). */
export function upgradeProblem(head: MessageHead): { status: number; body: string } | null {
  const [method] = head.startLine;
  const connection = head.headers.get("connection") ?? "";
  if (!connection.toLowerCase().split(",").some((t) => t.trim() === "upgrade")) {
    return { status: 400, body: "Connection header did not include 'upgrade'" };
  }
  if ((head.headers.get("upgrade") ?? "").toLowerCase() !== "websocket") {
    return { status: 400, body: "Upgrade header did not include 'websocket'" };
  }
  if (method !== "GET") return { status: 405, body: "" };
  if (head.headers.get("sec-websocket-version") !== "13") {
    return { status: 400, body: "Sec-WebSocket-Version must be 13" };
  }
  if (!head.headers.get("sec-websocket-key")) {
    return { status: 400, body: "missing Sec-WebSocket-Key" };
  }
  return null;
}

/**
 * Completes the server side of a handshake whose head was already read and
 * checked with {@linkcode upgradeProblem}, and returns the channel.
 */
export async function acceptWebSocket(
  conn: ByteDuplex & ByteWriter,
  head: MessageHead,
  limits: WebSocketLimits & Pick<PooledChannelOptions, "payloadPool"> = {},
  reusableWrites = false,
): Promise<WebSocketChannel> {
  const key = head.headers.get("sec-websocket-key")!;
  await writeAll(
    conn,
    encodeResponse(101, {
      upgrade: "websocket",
      connection: "Upgrade",
      "sec-websocket-accept": acceptKey(key),
    }),
  );
  return new WebSocketChannel(conn, {
    ...limits,
    role: "server",
    leftover: head.leftover,
    reusableWrites: reusableWrites,
  });
}

/** Options for {@linkcode connectWebSocket}. */
export interface ConnectWebSocketOptions extends WebSocketLimits {
  /** Extra request headers (e.g. `authorization`). */
  readonly headers?: HeadersInit;
  /** Aborts the attempt. */
  readonly signal?: AbortSignal;
  /** Gives up after this many milliseconds. Default 10 000. */
  readonly timeoutMs?: number;
}

/** A failed WebSocket handshake, with the HTTP status and body received. */
export class WebSocketHandshakeError extends Error {
  /** Creates the error. */
  constructor(message: string, readonly status?: number, readonly body?: string) {
    super(message);
    this.name = "WebSocketHandshakeError";
  }
}

/** Strips the query and fragment of a URL for messages and logs. */
export function redactUrl(url: URL | string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}

/** Dials `url` and completes the client handshake. */
export async function connectWebSocket(
  url: string | URL,
  options: ConnectWebSocketOptions = {},
): Promise<WebSocketChannel> {
  const target = new URL(url);
  const shown = redactUrl(target);
  if (target.protocol !== "ws:" && target.protocol !== "wss:") {
    throw new WebSocketHandshakeError(`unsupported WebSocket URL scheme in ${shown}`);
  }
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  const signal = options.signal
    ? AbortSignal.any([deadline.signal, options.signal])
    : deadline.signal;
  try {
    return await dial(target, shown, timeoutMs, signal, options);
  } finally {
    clearTimeout(timer);
  }
}

async function dial(
  target: URL,
  shown: string,
  timeoutMs: number,
  signal: AbortSignal,
  options: ConnectWebSocketOptions,
): Promise<WebSocketChannel> {
  const hostname = target.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(target.port || (target.protocol === "wss:" ? 443 : 80));
  let conn: Deno.Conn;
  try {
    conn = target.protocol === "wss:"
      ? await Deno.connectTls({ hostname, port, signal } as Deno.ConnectTlsOptions)
      : await Deno.connect({ hostname, port, signal } as Deno.ConnectOptions);
  } catch (error) {
    const why = signal.aborted && !options.signal?.aborted
      ? `timed out after ${timeoutMs} ms`
      : (error as Error).message;
    throw new WebSocketHandshakeError(`cannot connect to ${shown}: ${why}`);
  }
  try {
    (conn as Deno.TcpConn).setNoDelay?.(true);
  } catch { /* not TCP */ }
  const abort = () => {
    try {
      conn.close();
    } catch { /* closed */ }
  };
  signal.addEventListener("abort", abort, { once: true });
  const key = crypto.getRandomValues(new Uint8Array(16)).toBase64();
  const headers = new Headers(options.headers);
  let request = `GET ${target.pathname}${target.search} HTTP/1.1\r\n` +
    `host: ${target.host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n` +
    `sec-websocket-key: ${key}\r\nsec-websocket-version: 13\r\n`;
  for (const [name, value] of headers) request += `${name}: ${value}\r\n`;
  request += "\r\n";
  try {
    await writeAll(conn, new TextEncoder().encode(request));
    const head = await readHead(connReader(conn), { timeoutMs });
    const status = Number(head.startLine[1]);
    if (status !== 101) {
      const body = new TextDecoder().decode(head.leftover).slice(0, 500);
      throw new WebSocketHandshakeError(
        `WebSocket upgrade to ${shown} failed with HTTP ${status}${body ? `: ${body}` : ""}`,
        status,
        body,
      );
    }
    if (head.headers.get("sec-websocket-accept") !== acceptKey(key)) {
      throw new WebSocketHandshakeError(`WebSocket upgrade to ${shown} returned a bad accept key`);
    }
    signal.removeEventListener("abort", abort);
    return new WebSocketChannel(conn, {
      ...options,
      role: "client",
      leftover: head.leftover,
      reusableWrites: true,
    });
  } catch (error) {
    signal.removeEventListener("abort", abort);
    abort();
    if (error instanceof WebSocketHandshakeError) throw error;
    const why = signal.aborted && !options.signal?.aborted
      ? `timed out after ${timeoutMs} ms`
      : error instanceof HttpHeadError
      ? error.message
      : (error as Error).message;
    throw new WebSocketHandshakeError(`WebSocket handshake with ${shown} failed: ${why}`);
  }
}
