/**
 * How a client reaches a server: by spawning it (stdio) or dialling a
 * WebSocket URL. Each opener returns a {@linkcode Connection} and a way to
 * tear the transport down.
 *
 * @module
 */

import type { Connection } from "../jsonrpc/connection.ts";
import { ndjsonConnection } from "../jsonrpc/ndjson.ts";
import { webSocketConnection } from "../jsonrpc/websocket_adapter.ts";
import { connectWebSocket, redactUrl, type WebSocketLimits } from "../websocket/handshake.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import { signalGroup } from "../process/signals.ts";
import { delay, settleWithin } from "../util/async.ts";
import { drainLines } from "../util/line_drain.ts";

/** A server started as a child process speaking NDJSON on its stdio. */
export interface CommandTarget {
  /** The program (looked up in PATH). */
  readonly program: string;
  /** Its arguments. */
  readonly args?: readonly string[];
  /** Extra environment variables (added to the client's). */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory. */
  readonly cwd?: string;
}

/** An open transport. */
export interface OpenedTransport {
  /** The JSON-RPC connection. */
  readonly connection: Connection;
  /** For messages: the command or the URL without its query. */
  readonly label: string;
  /** Tears the transport down (idempotent; a second call is a no-op). */
  close(): Promise<void>;
  /** Why the far end went away, when the transport can tell (a spawned server's exit). */
  ended?(): Promise<string | null>;
}

/**
 * What `connect()` takes: opens one physical connection per call (the
 * client calls it again to reconnect). Made by {@linkcode webSocketTransport},
 * {@linkcode commandTransport}, `rendezvousTransport` or
 * `inProcessTransport` — or by hand (tests, custom relays).
 */
export type ClientTransport = () => Promise<OpenedTransport>;

/**
 * A transport that dials the WebSocket server at `target.url` for each
 * connection (see {@linkcode openWebSocketTransport}).
 *
 * @example
 * ```ts ignore
 * import { connect, webSocketTransport } from "jsr:@org/exec-server/client";
 *
 * await using client = await connect({
 *   transport: webSocketTransport({ url: "ws://127.0.0.1:4500", token: Deno.env.get("TOKEN") }),
 * });
 * ```
 */
export function webSocketTransport(target: WebSocketTarget): ClientTransport {
  return () => openWebSocketTransport(target);
}

/**
 * A transport that starts `target` and speaks NDJSON on its stdio, once per
 * connection (see {@linkcode openCommandTransport}).
 *
 * @example
 * ```ts ignore
 * import { commandTransport, connect } from "jsr:@org/exec-server/client";
 *
 * await using client = await connect({
 *   transport: commandTransport({ program: "exec-server", args: ["serve", "--listen", "stdio"] }),
 * });
 * ```
 */
export function commandTransport(
  target: CommandTarget,
  options: { logger?: Logger; timings?: StopTimings } = {},
): ClientTransport {
  return () => Promise.resolve(openCommandTransport(target, options));
}

/** Grace periods when stopping a spawned server. */
export interface StopTimings {
  /** After closing its stdin, wait this long before SIGTERM. Default 1 000. */
  readonly eofGraceMs?: number;
  /** After SIGTERM, wait this long before SIGKILL. Default 2 000. */
  readonly termGraceMs?: number;
}

/**
 * Spawns `target` in its own process group, pipes its stdin/stdout, drains
 * its stderr line by line into `logger`, and on close stops the whole tree:
 * EOF first, then SIGTERM to the group, then SIGKILL.
 */
export function openCommandTransport(
  target: CommandTarget,
  options: { logger?: Logger; timings?: StopTimings } = {},
): OpenedTransport {
  const logger = options.logger ?? nullLogger;
  const label = [target.program, ...(target.args ?? [])].join(" ");
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(target.program, {
      args: [...(target.args ?? [])],
      ...(target.env ? { env: { ...target.env } } : {}),
      ...(target.cwd ? { cwd: target.cwd } : {}),
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      detached: true,
    }).spawn();
  } catch (error) {
    throw new Error(`cannot start exec-server command \`${label}\`: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const stopStderr = new AbortController();
  const stderrDone = drainLines(child.stderr, {
    maxLineBytes: 64 * 1024,
    onLine: (line) => logger.debug("server.stderr", { command: target.program, line }),
    signal: stopStderr.signal,
  });
  const connection = ndjsonConnection(child.stdout, child.stdin, {
    label: `stdio ${target.program}`,
    outputIsResource: true,
  });
  const eofGrace = options.timings?.eofGraceMs ?? 1000;
  const termGrace = options.timings?.termGraceMs ?? 2000;
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      // Polite first: closing the connection gives the server EOF on stdin.
      connection.close("client closed");
      if (!(await settleWithin(child.status, eofGrace))) {
        signalGroup(child.pid, "SIGTERM");
        if (!(await settleWithin(child.status, termGrace))) signalGroup(child.pid, "SIGKILL");
      }
      await child.status;
      // The server is gone; whatever it left in its group (a grandchild
      // holding our pipes) goes too — politely, then not.
      if (signalGroup(child.pid, "SIGTERM")) {
        await delay(Math.min(termGrace, 200));
        signalGroup(child.pid, "SIGKILL");
      }
      // Never wait on a pipe something outside the group may still hold.
      if (!(await settleWithin(stderrDone, 500))) {
        stopStderr.abort();
        await stderrDone;
      }
    })();
    return closing;
  };
  // A server that dies on its own ends the connection.
  child.status.then(() => connection.close("server exited"));
  const ended = async () => {
    const status = await settleWithin(child.status, 1000) ? await child.status : null;
    if (status === null) return null;
    return status.signal !== null
      ? `was killed by ${status.signal}`
      : `exited with code ${status.code}`;
  };
  return { connection, label, close, ended };
}

/** Options for {@linkcode openWebSocketTransport}. */
export interface WebSocketTarget {
  /** `ws://` or `wss://` URL. */
  readonly url: string | URL;
  /** Sent as `Authorization: Bearer <token>`. */
  readonly token?: string;
  /** Extra upgrade headers. */
  readonly headers?: HeadersInit;
  /** Connect + handshake timeout. Default 10 000 ms. */
  readonly timeoutMs?: number;
  /** Frame and message limits. */
  readonly limits?: WebSocketLimits;
  /** The server accepts messages this large (for our own sends). */
  readonly maxOutgoingBytes?: number;
}

/** Dials a WebSocket server. Errors name the URL without its query string. */
export async function openWebSocketTransport(target: WebSocketTarget): Promise<OpenedTransport> {
  const headers = new Headers(target.headers);
  if (target.token !== undefined) headers.set("authorization", `Bearer ${target.token}`);
  const channel = await connectWebSocket(target.url, {
    headers,
    timeoutMs: target.timeoutMs ?? 10_000,
    ...target.limits,
  });
  const label = redactUrl(target.url);
  const connection = webSocketConnection(channel, {
    label,
    ...(target.maxOutgoingBytes !== undefined ? { maxOutgoingBytes: target.maxOutgoingBytes } : {}),
  });
  return {
    connection,
    label,
    close: async () => {
      connection.close("client closed");
      await settleWithin(channel.closed, 3000);
      channel.abort();
    },
  };
}
