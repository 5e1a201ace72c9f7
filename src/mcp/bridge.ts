/**
 * Relays MCP messages between a client-facing transport (`front`: stdio or
 * one Streamable HTTP session) and a server's transport (`back`).
 *
 * Better than a blind pipe:
 * - a request the server can no longer take, or that is still open when the
 *   server goes away, is answered with a JSON-RPC error instead of hanging;
 * - server-to-client requests and notifications are tied to the client
 *   request they belong to (`notifications/progress` by progress token, others
 *   to the oldest open request), so a Streamable HTTP client receives them on
 *   that request's stream even without a standalone GET stream.
 *
 * @module
 */

import { type Logger, nullLogger } from "../log/logger.ts";
import type { JSONRPCMessage, Transport } from "./sdk.ts";

/** A running relay. */
export interface McpBridge {
  /** Requests from the client that the server has not answered yet. */
  readonly openRequests: number;
  /** Resolves when either side has closed (and the other was closed too). */
  readonly closed: Promise<void>;
  /** Closes both sides. */
  close(): Promise<void>;
}

type Id = string | number;

/** JSON-RPC "connection closed", as the SDK uses it. */
const CONNECTION_CLOSED = -32000;

function field(message: JSONRPCMessage, key: string): unknown {
  return (message as Record<string, unknown>)[key];
}

/** Starts relaying; `back` is started first. */
export async function bridgeMcp(
  front: Transport,
  back: Transport,
  options: { label?: string; logger?: Logger } = {},
): Promise<McpBridge> {
  const logger = options.logger ?? nullLogger;
  const label = options.label ?? "MCP server";
  // Open client requests in arrival order, with their progress tokens.
  const open = new Map<Id, unknown>();
  const progress = new Map<unknown, Id>();
  const done = Promise.withResolvers<void>();
  let closing: Promise<void> | null = null;

  const fail = (id: Id, reason: string) => {
    if (!open.delete(id)) return;
    front.send({ jsonrpc: "2.0", id, error: { code: CONNECTION_CLOSED, message: reason } })
      .catch(() => {});
  };

  const close = () => {
    closing ??= (async () => {
      for (const id of [...open.keys()]) fail(id, `${label} closed`);
      await Promise.allSettled([back.close(), front.close()]);
      done.resolve();
    })();
    return closing;
  };

  front.onmessage = (message) => {
    const id = field(message, "id") as Id | undefined;
    const method = field(message, "method");
    if (typeof method === "string" && id !== undefined) {
      const params = field(message, "params") as
        | { _meta?: { progressToken?: unknown } }
        | undefined;
      const token = params?._meta?.progressToken;
      open.set(id, token);
      if (token !== undefined) progress.set(token, id);
    }
    back.send(message).catch((error) => {
      logger.warn("mcp.bridge_send_failed", { server: label, error });
      if (id !== undefined && typeof method === "string") {
        fail(id, `${label} is unavailable: ${(error as Error).message}`);
      }
    });
  };

  back.onmessage = (message) => {
    const id = field(message, "id") as Id | undefined;
    const method = field(message, "method");
    let related: Id | undefined;
    if (typeof method !== "string") {
      // A response: it closes the client's request.
      if (id !== undefined) {
        const token = open.get(id);
        open.delete(id);
        if (token !== undefined) progress.delete(token);
      }
    } else {
      const token = (field(message, "params") as { progressToken?: unknown } | undefined)
        ?.progressToken;
      related = method === "notifications/progress" && progress.has(token)
        ? progress.get(token)
        : open.keys().next().value;
    }
    front.send(message, related !== undefined ? { relatedRequestId: related } : undefined)
      .catch((error) => logger.debug("mcp.bridge_reply_failed", { server: label, error }));
  };

  const closeFrom = (side: string) => () => {
    logger.debug("mcp.bridge_side_closed", { server: label, side });
    void close();
  };
  front.onclose = closeFrom("client");
  back.onclose = closeFrom("server");
  front.onerror = (error) => logger.debug("mcp.client_transport_error", { server: label, error });
  back.onerror = (error) => logger.warn("mcp.server_transport_error", { server: label, error });

  await back.start();
  await front.start();
  return {
    get openRequests() {
      return open.size;
    },
    closed: done.promise,
    close,
  };
}
