/**
 * `http/request`: buffered (body capped) or streamed as
 * `http/request/bodyDelta` notifications that follow the response, read
 * from the upstream only as fast as the client takes them.
 *
 * @module
 */

import { RpcError } from "../../jsonrpc/errors.ts";
import { bodyErrorMessage, type HttpExchange, readBody, startExchange } from "./http_request.ts";
import { ErrorCode } from "../../protocol/errors.ts";
import { Method, ServerNotification } from "../../protocol/methods.ts";
import type { HttpBodyDeltaNotification, HttpResponseResult } from "../../protocol/types.ts";
import { defineMethods, type MethodTable } from "../handler.ts";
import { type ConnectionContext, ResourceKey } from "../resource_scope.ts";

/** One streamed body: its abort switch and whether the client holds it. */
interface BodyStream {
  readonly controller: AbortController;
  paused: boolean;
  resumed: PromiseWithResolvers<void> | null;
}

/** The streamed bodies of one connection. */
class HttpStreams {
  #active = new Map<string, BodyStream>();

  /** Reserves `requestId`; fails while a stream with that id is active. */
  claim(requestId: string): BodyStream {
    if (this.#active.has(requestId)) {
      throw new RpcError(
        ErrorCode.InvalidParams,
        `http/request streamResponse requestId \`${requestId}\` is already active`,
      );
    }
    const stream: BodyStream = { controller: new AbortController(), paused: false, resumed: null };
    this.#active.set(requestId, stream);
    return stream;
  }

  release(requestId: string, stream: BodyStream): void {
    if (this.#active.get(requestId) === stream) this.#active.delete(requestId);
  }

  /** Holds a body: its upstream is read no further until resumed. */
  pause(requestId: string): boolean {
    const stream = this.#active.get(requestId);
    if (stream) stream.paused = true;
    return stream !== undefined;
  }

  resume(requestId: string): boolean {
    const stream = this.#active.get(requestId);
    if (!stream) return false;
    stream.paused = false;
    stream.resumed?.resolve();
    stream.resumed = null;
    return true;
  }

  /** Stops a body: the upstream is aborted, the last delta says `cancelled`. */
  cancel(requestId: string): boolean {
    const stream = this.#active.get(requestId);
    stream?.controller.abort(new Error(CANCELLED));
    return stream !== undefined;
  }

  dispose(): void {
    for (const s of this.#active.values()) s.controller.abort(new Error("connection closed"));
    this.#active.clear();
  }
}

const CANCELLED = "cancelled by the client";

/** Waits while the client holds `stream` (ends early when it is aborted). */
function whilePaused(stream: BodyStream): Promise<void> | null {
  if (!stream.paused) return null;
  stream.resumed ??= Promise.withResolvers<void>();
  const signal = stream.controller.signal;
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    stream.resumed!.promise.then(done);
  });
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
  stream: BodyStream,
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
      const held = whilePaused(stream);
      if (held !== null) await held;
      if (stream.controller.signal.aborted) throw stream.controller.signal.reason;
      const { value, done } = await reader.read();
      if (done) break;
      if (!(await delta(value.toBase64(), false, null))) return; // connection gone
    }
  } catch (error) {
    failure = connection.signal.aborted
      ? "connection closed"
      : stream.controller.signal.aborted && stream.controller.signal.reason?.message === CANCELLED
      ? CANCELLED
      : bodyErrorMessage(error);
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
export const httpMethods: MethodTable = defineMethods({
  [Method.HttpRequest]: async (p, ctx): Promise<HttpResponseResult> => {
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
      const exchange = await ctx.rpc.idle(
        startExchange(spec, env, ctx.rpc.signal, ctx.server.execTelemetry),
      );
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
    const stream = streams.claim(p.requestId);
    const release = () => streams.release(p.requestId, stream);
    let exchange: HttpExchange;
    try {
      exchange = await ctx.rpc.idle(
        startExchange(
          spec,
          env,
          AbortSignal.any([ctx.rpc.signal, stream.controller.signal]),
          ctx.server.execTelemetry,
        ),
      );
    } catch (error) {
      release();
      throw error;
    }
    ctx.rpc.afterResponse(() => {
      streamBody(exchange, p.requestId, ctx.connection.resources.connection, stream, release);
    });
    return headResult(exchange, null);
  },

  [Method.HttpPauseBody]: (p, ctx) => ({
    active: ctx.connection.resources.use(STREAMS).pause(p.requestId),
  }),

  [Method.HttpResumeBody]: (p, ctx) => ({
    active: ctx.connection.resources.use(STREAMS).resume(p.requestId),
  }),

  [Method.HttpCancelBody]: (p, ctx) => ({
    active: ctx.connection.resources.use(STREAMS).cancel(p.requestId),
  }),
});
