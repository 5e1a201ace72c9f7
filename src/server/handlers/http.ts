/**
 * `http/request`: buffered (body capped) or streamed as
 * `http/request/bodyDelta` notifications that follow the response, read
 * from the upstream only as fast as the client takes them.
 *
 * @module
 */

import { RpcError } from "../../jsonrpc/errors.ts";
import { bodyErrorMessage, type HttpExchange, readBody, startExchange } from "./http_request.ts";
import { httpRequestParams } from "../../protocol/decoders.ts";
import { ErrorCode } from "../../protocol/errors.ts";
import { Method, ServerNotification } from "../../protocol/methods.ts";
import type { HttpBodyDeltaNotification, HttpResponseResult } from "../../protocol/types.ts";
import { defineMethod, type MethodTable } from "../handler.ts";
import { type ConnectionContext, ResourceKey } from "../resource_scope.ts";

/** The streamed bodies of one connection. */
class HttpStreams {
  #active = new Map<string, AbortController>();

  /** Reserves `requestId`; fails while a stream with that id is active. */
  claim(requestId: string): AbortController {
    if (this.#active.has(requestId)) {
      throw new RpcError(
        ErrorCode.InvalidParams,
        `http/request streamResponse requestId \`${requestId}\` is already active`,
      );
    }
    const controller = new AbortController();
    this.#active.set(requestId, controller);
    return controller;
  }

  release(requestId: string, controller: AbortController): void {
    if (this.#active.get(requestId) === controller) this.#active.delete(requestId);
  }

  dispose(): void {
    for (const c of this.#active.values()) c.abort(new Error("connection closed"));
    this.#active.clear();
  }
}

const STREAMS = new ResourceKey("http.streams", () => new HttpStreams());

function headResult(exchange: HttpExchange, body: Uint8Array | null): HttpResponseResult {
  const { response } = exchange;
  return {
    status: response.status,
    headers: response.headers.map(([name, value]) => ({ name, value })),
    bodyBase64: body === null ? "" : body.toBase64(),
  };
}

async function streamBody(
  exchange: HttpExchange,
  requestId: string,
  connection: ConnectionContext,
  release: () => void,
): Promise<void> {
  const reader = exchange.response.body.getReader();
  let seq = 0;
  const delta = (deltaBase64: string, done: boolean, error: string | null) => {
    const params: HttpBodyDeltaNotification = { requestId, seq: ++seq, deltaBase64, done, error };
    return connection.notify(ServerNotification.HttpBodyDelta, params);
  };
  let failure: string | null = null;
  try {
    for (;;) {
      const ready = connection.ready();
      if (ready !== null) await ready;
      const { value, done } = await reader.read();
      if (done) break;
      if (!(await delta(value.toBase64(), false, null))) return; // connection gone
    }
  } catch (error) {
    failure = connection.signal.aborted ? "connection closed" : bodyErrorMessage(error);
  } finally {
    reader.releaseLock();
    await exchange.response.body.cancel().catch(() => {});
    exchange.done();
    // Free the id before the last delta: a client may reuse it at once.
    release();
  }
  await delta("", true, failure);
}

/** The HTTP method. */
export const httpMethods: MethodTable = {
  [Method.HttpRequest]: defineMethod(
    httpRequestParams,
    async (p, ctx): Promise<HttpResponseResult> => {
      const spec = {
        method: p.method,
        url: p.url,
        headers: p.headers,
        redirectPolicy: p.redirectPolicy,
        ...(p.bodyBase64 ? { body: p.bodyBase64 } : {}),
        ...(p.timeoutMs !== undefined ? { timeoutMs: p.timeoutMs } : {}),
      };
      const env = (name: string) => Deno.env.get(name);
      if (!p.streamResponse) {
        // Waiting on the network does not hold a request slot.
        const exchange = await ctx.rpc.idle(startExchange(spec, env, ctx.rpc.signal));
        try {
          const body = await ctx.rpc.idle(
            readBody(exchange.response.body, ctx.server.options.httpBodyLimitBytes),
          );
          return headResult(exchange, body);
        } finally {
          exchange.done();
        }
      }
      const streams = ctx.connection.resources.use(STREAMS);
      const controller = streams.claim(p.requestId);
      const release = () => streams.release(p.requestId, controller);
      let exchange: HttpExchange;
      try {
        exchange = await ctx.rpc.idle(
          startExchange(spec, env, AbortSignal.any([ctx.rpc.signal, controller.signal])),
        );
      } catch (error) {
        release();
        throw error;
      }
      ctx.rpc.afterResponse(() => {
        streamBody(exchange, p.requestId, ctx.connection.resources.connection, release);
      });
      return headResult(exchange, null);
    },
  ),
};
