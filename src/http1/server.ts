/**
 * An HTTP/1.1 server on a `Deno.listen` listener, for sidecars that must see
 * the request exactly as sent (raw request-target, header names in their
 * original case and order, repeats kept) and stream bodies both ways —
 * `Deno.serve` normalises all of that away. One request per connection
 * (`connection: close`), served by the same exchange loop as the egress
 * proxy (`exchange.ts`); bodies are pull streams, so a slow side slows the
 * other.
 *
 * @module
 */

import { type Logger, nullLogger } from "../log/logger.ts";
import { ByteSource } from "./body.ts";
import { type ExchangeRequest, type ExchangeResponse, serveHttpExchanges } from "./exchange.ts";
import { acceptConnections } from "../util/accept_loop.ts";
import { writeAll } from "../util/conn_io.ts";
import { encodeResponse } from "./head.ts";

/** A request as received, with the client's address. */
export interface Http1Request extends ExchangeRequest {
  /** The client's address. */
  readonly remoteAddr: Deno.NetAddr;
}

/** A response to send (framing headers are set by the server). */
export type Http1Response = Omit<ExchangeResponse, "headers" | "close" | "requestDone"> & {
  /** Headers to send. */
  readonly headers?: ReadonlyArray<readonly [string, string]>;
};

/** Handles one request. */
export type Http1Handler = (request: Http1Request) => Promise<Http1Response> | Http1Response;

/** A running server. */
export interface Http1Server {
  /** Bound address. */
  readonly addr: Deno.NetAddr;
  /** Stops accepting and closes open connections. */
  close(): Promise<void>;
  /** Resolves after {@linkcode close}. */
  readonly finished: Promise<void>;
}

/** Serves `handler` on `listener` (see the module documentation). */
export function serveHttp1(
  listener: Deno.Listener,
  handler: Http1Handler,
  options: { logger?: Logger; headTimeoutMs?: number } = {},
): Http1Server {
  const logger = options.logger ?? nullLogger;

  async function handle(conn: Deno.Conn): Promise<void> {
    const source = new ByteSource(conn.readable.getReader());
    let answered = false;
    try {
      await serveHttpExchanges(source, conn, async (request) => {
        const response = await handler({
          ...request,
          remoteAddr: conn.remoteAddr as Deno.NetAddr,
        });
        answered = true;
        return { ...response, headers: response.headers ?? [], close: true };
      }, {
        idleTimeoutMs: options.headTimeoutMs ?? 30_000,
        continueOnRead: true,
        onBadRequest: (error) =>
          logger.debug("http1.bad_request", { error: (error as Error).message }),
      });
    } catch (error) {
      if (!answered) await writeAll(conn, encodeResponse(500, {}, "")).catch(() => {});
      logger.debug("http1.request_failed", { error: (error as Error).message });
    } finally {
      source.cancel();
      try {
        conn.close();
      } catch { /* closed */ }
    }
  }

  const loop = acceptConnections(listener, (conn) => handle(conn));
  return {
    addr: listener.addr as Deno.NetAddr,
    close: () => loop.close(),
    finished: loop.accepting.then(() => {}),
  };
}
