/**
 * `fetch` through the server (`http/request` with `streamResponse`): a
 * standard `Response` whose body is fed by `http/request/bodyDelta`
 * notifications in `seq` order. A slow body reader pauses the client's
 * connection reading (and so the server and the upstream); cancelling the
 * body discards the rest of the stream.
 *
 * @module
 */

import type { RequestFn } from "../protocol/method_map.ts";
import type { HttpRequestParams } from "../protocol/types.ts";
import type { HttpBodyDeltaNotification, HttpResponseResult } from "../protocol/types.ts";

interface BodyState {
  controller: ReadableStreamDefaultController<Uint8Array>;
  nextSeq: number;
  pending: Map<number, HttpBodyDeltaNotification>;
  space: PromiseWithResolvers<void> | null;
  cancelled: boolean;
  done: boolean;
}

/** Bodies of streamed requests by `requestId`. */
export class BodyStreams {
  #streams = new Map<string, BodyState>();

  /** Registers a body before the request is sent (deltas may follow at once). */
  register(requestId: string, highWaterMark = 8 * 1024 * 1024): ReadableStream<Uint8Array> {
    let state!: BodyState;
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        state = {
          controller,
          nextSeq: 1,
          pending: new Map(),
          space: null,
          cancelled: false,
          done: false,
        };
      },
      pull: () => {
        state.space?.resolve();
        state.space = null;
      },
      cancel: () => {
        state.cancelled = true;
        state.space?.resolve();
        state.space = null;
      },
    }, new ByteLengthQueuingStrategy({ highWaterMark }));
    this.#streams.set(requestId, state);
    return stream;
  }

  /** Drops a registration (the request failed). */
  unregister(requestId: string): void {
    this.#streams.delete(requestId);
  }

  /** Accepts a delta; returns a promise when the body reader must catch up. */
  accept(delta: HttpBodyDeltaNotification): Promise<void> | null {
    const state = this.#streams.get(delta.requestId);
    if (!state || delta.seq < state.nextSeq) return null;
    state.pending.set(delta.seq, delta);
    let wait: Promise<void> | null = null;
    while (state.pending.has(state.nextSeq)) {
      const d = state.pending.get(state.nextSeq)!;
      state.pending.delete(state.nextSeq);
      state.nextSeq++;
      if (state.cancelled) {
        if (d.done) this.#streams.delete(delta.requestId);
        continue;
      }
      if (d.deltaBase64.length > 0) state.controller.enqueue(Uint8Array.fromBase64(d.deltaBase64));
      if (d.done) {
        this.#streams.delete(delta.requestId);
        state.done = true;
        if (d.error === null) state.controller.close();
        else state.controller.error(new TypeError(`response body failed: ${d.error}`));
        state.space?.resolve();
        return null;
      }
      const size = state.controller.desiredSize;
      if (size !== null && size <= 0) {
        state.space ??= Promise.withResolvers<void>();
        wait = state.space.promise;
      }
    }
    return wait;
  }

  /** Errors every open body (connection lost). */
  failAll(reason: string): void {
    for (const state of this.#streams.values()) {
      if (!state.cancelled && !state.done) {
        state.controller.error(new TypeError(`response body failed: ${reason}`));
      }
      state.space?.resolve();
    }
    this.#streams.clear();
  }
}

/** What `remoteFetch` needs from the client. */
export interface FetchLink {
  /** Sends a request. */
  readonly request: RequestFn;
  /** Where bodies are fed. */
  readonly bodies: BodyStreams;
}

const NULL_BODY = new Set([101, 103, 204, 205, 304]);

function headerList(
  input: string | URL | Request,
  init?: RequestInit,
): Array<{ name: string; value: string }> {
  // Arrays keep their order and repeats; other forms go through Headers.
  if (Array.isArray(init?.headers)) {
    return (init.headers as [string, string][]).map(([name, value]) => ({ name, value }));
  }
  const headers = new Headers(input instanceof Request ? input.headers : undefined);
  for (const [name, value] of new Headers(init?.headers)) headers.set(name, value);
  return [...headers].map(([name, value]) => ({ name, value }));
}

/** See the module documentation. */
export async function remoteFetch(
  link: FetchLink,
  input: string | URL | Request,
  init?: RequestInit,
): Promise<Response> {
  const request = new Request(input, init);
  const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
  signal?.throwIfAborted();
  const body = request.body ? new Uint8Array(await request.arrayBuffer()) : undefined;
  const redirect = init?.redirect ?? request.redirect;
  const requestId = `f-${crypto.randomUUID()}`;
  const stream = link.bodies.register(requestId);
  const params: HttpRequestParams = {
    method: init?.method ?? request.method,
    url: request.url,
    headers: headerList(input, init),
    requestId,
    streamResponse: true,
    redirectPolicy: redirect === "follow" ? "follow" : "stop",
  };
  if (body && body.length > 0) params.bodyBase64 = body.toBase64();
  let result: HttpResponseResult;
  try {
    const answer = link.request("http/request", params);
    result = signal
      ? await Promise.race([
        answer,
        new Promise<never>((_, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason), { once: true })
        ),
      ])
      : await answer;
  } catch (error) {
    link.bodies.unregister(requestId);
    throw error;
  }
  if (redirect === "error" && result.status >= 300 && result.status < 400) {
    await stream.cancel();
    throw new TypeError(`redirect (${result.status}) with redirect: "error"`);
  }
  signal?.addEventListener("abort", () => stream.cancel(signal.reason).catch(() => {}), {
    once: true,
  });
  const headers = new Headers();
  for (const h of result.headers) headers.append(h.name, h.value);
  if (NULL_BODY.has(result.status) || result.status < 200) {
    stream.cancel().catch(() => {});
    return new Response(null, { status: result.status < 200 ? 200 : result.status, headers });
  }
  return new Response(stream, { status: result.status, headers });
}
