/**
 * Forwarding: an executor whose harness streams are served by another
 * exec-server reached over WebSocket (`exec-server forward`; README,
 * "Encrypted remote mode"). Each decrypted stream gets its own
 * WebSocket connection to the target, and JSON-RPC messages are passed
 * through unchanged both ways (ids, order and backpressure kept); when
 * either side ends, so does the other. Input that does not parse is
 * answered where it came from, as a server would, and never forwarded.
 *
 * @module
 */

import type { Connection } from "../../jsonrpc/connection.ts";
import { JsonRpcCode } from "../../jsonrpc/errors.ts";
import { isMalformed, type JsonRpcMessage } from "../../jsonrpc/message.ts";
import { webSocketConnection } from "../../jsonrpc/websocket_adapter.ts";
import { connectWebSocket } from "../../websocket/handshake.ts";
import { type Logger, nullLogger } from "../../log/logger.ts";

/** What serves each harness stream of a {@linkcode RemoteExecutor}. */
export interface StreamServer {
  /** Serves `connection` until it ends. */
  serve(connection: Connection, onDisconnect: "detach", transport?: "relay"): Promise<unknown>;
}

/** Options of {@linkcode forwardingServer}. */
export interface ForwardOptions {
  /** The target exec-server's WebSocket URL (`ws://` or `wss://`). */
  readonly url: string;
  /** Bearer token for the target (`authorization: Bearer …`). */
  readonly token?: string;
  /** Diagnostics. */
  readonly logger?: Logger;
}

/** A {@linkcode StreamServer} that bridges every stream to the exec-server at `options.url`. */
export function forwardingServer(options: ForwardOptions): StreamServer {
  const logger = options.logger ?? nullLogger;
  return {
    async serve(harness) {
      let target: Connection;
      try {
        const channel = await connectWebSocket(options.url, {
          ...(options.token ? { headers: { authorization: `Bearer ${options.token}` } } : {}),
          timeoutMs: 10_000,
        });
        target = webSocketConnection(channel, { label: `forward ${options.url}` });
      } catch (error) {
        const cause = (error as Error).message;
        logger.warn("forward.connect_failed", { error: cause });
        // The harness hears why over its encrypted stream (a relay reset
        // reason is unauthenticated and shows only "stream reset").
        await refuseFirstRequest(harness, `exec-server forward: ${cause}`);
        harness.close("forward target unreachable");
        return;
      }
      logger.debug("forward.connected", { harness: harness.label });
      await bridgeConnections(harness, target, logger);
    },
  };
}

/** How long an unreachable target's harness has to send its first request. */
const REFUSAL_WAIT_MS = 10_000;

/** Answers the first request on `connection` (normally `initialize`) with `message`. */
async function refuseFirstRequest(connection: Connection, message: string): Promise<void> {
  const reader = connection.readable.getReader();
  const timer = setTimeout(() => void reader.cancel().catch(() => {}), REFUSAL_WAIT_MS);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (isMalformed(value) || !("method" in value) || !("id" in value)) continue;
      await writeOne(connection, {
        jsonrpc: "2.0",
        id: value.id,
        error: { code: JsonRpcCode.InternalError, message },
      });
      return;
    }
  } catch {
    // The harness went away first.
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
  }
}

/**
 * Passes messages between `a` and `b` until either ends, then closes both.
 * Malformed input is answered on its own side (`-32600`, id -1), as the
 * server would.
 */
export async function bridgeConnections(
  a: Connection,
  b: Connection,
  logger: Logger = nullLogger,
): Promise<void> {
  // A side's writer serves both the pump into it and the answers to its
  // own malformed input, so it is shared (see writeOne).
  await Promise.race([pump(a, b, logger), pump(b, a, logger)]);
  a.close("forward peer ended");
  b.close("forward peer ended");
}

async function pump(from: Connection, to: Connection, logger: Logger): Promise<void> {
  const reader = from.readable.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (isMalformed(value)) {
        logger.debug("forward.malformed", { from: from.label, detail: value.malformed });
        await writeOne(from, {
          jsonrpc: "2.0",
          id: -1,
          error: { code: JsonRpcCode.InvalidRequest, message: value.malformed },
        });
        continue;
      }
      await writeOne(to, value);
    }
  } catch (error) {
    logger.debug("forward.side_failed", { from: from.label, error: (error as Error).message });
  } finally {
    reader.releaseLock();
  }
}

const writers = new WeakMap<Connection, WritableStreamDefaultWriter<JsonRpcMessage>>();

/** Writes through the connection's one writer (created on first use). */
async function writeOne(connection: Connection, message: JsonRpcMessage): Promise<void> {
  let writer = writers.get(connection);
  if (!writer) {
    writer = connection.writable.getWriter();
    writers.set(connection, writer);
  }
  await writer.ready;
  await writer.write(message);
}
