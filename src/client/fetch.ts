/**
 * `fetch` through the server (`http/request` with `streamResponse`): a
 * standard `Response` whose body is fed by `http/request/bodyDelta`
 * notifications in `seq` order. A slow body reader holds its own body
 * and nothing else (see {@linkcode BodyStreams}); cancelling the body stops
 * it on the server.
 *
 * @module
 */

import type { RequestFn } from "../protocol/spec.ts";
import type { HttpRequestParams } from "../protocol/types.ts";
import type { HttpBodyDeltaNotification, HttpResponseResult } from "../protocol/types.ts";

/** Holds, releases or stops one body on the server (`httpBodyFlowControl`). */
export interface BodyFlow {
  /** `http/request/pauseBody`. */
  pause(requestId: string): void;
  /** `http/request/resumeBody`. */
  resume(requestId: string): void;
  /** `http/request/cancelBody`. */
  cancel(requestId: string): void;
}

interface BodyState {
  /** Weak: a body nobody holds any more can be collected (and is then cancelled). */
  controller: WeakRef<ReadableStreamDefaultController<Uint8Array>>;
  nextSeq: number;
  pending: Map<number, HttpBodyDeltaNotification>;
  /** Bytes enqueued and not yet read. */
  queued: number;
  highWaterMark: number;
  paused: boolean;
  cancelled: boolean;
  done: boolean;
  flow: BodyFlow | null;
}

/**
 * Bytes a body may fall behind its reader before it is failed, against a
 * server without per-body flow control (it cannot be held without holding
 * the whole connection).
 */
export const UNCONTROLLED_BODY_LIMIT = 64 * 1024 * 1024;

/**
 * Bodies of streamed requests by `requestId`. No body ever holds up the
 * connection: with a server that has `httpBodyFlowControl`, a body whose
 * reader falls a high-water mark behind is paused on the server (its
 * upstream is read no further) and resumed when read; without it, a body
 * more than {@linkcode UNCONTROLLED_BODY_LIMIT} behind is failed with an
 * error saying so. A body cancelled — or collected because nobody holds
 * its `Response` any more — is cancelled on the server.
 */
export class BodyStreams {
  #streams = new Map<string, BodyState>();
  #collected = new FinalizationRegistry<string>((requestId) => this.#abandon(requestId));

  /** Registers a body before the request is sent (deltas may follow at once). */
  register(
    requestId: string,
    options: { highWaterMark?: number; flow?: BodyFlow | null } = {},
  ): ReadableStream<Uint8Array> {
    let state!: BodyState;
    const highWaterMark = options.highWaterMark ?? 8 * 1024 * 1024;
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        state = {
          controller: new WeakRef(controller),
          nextSeq: 1,
          pending: new Map(),
          queued: 0,
          highWaterMark,
          paused: false,
          cancelled: false,
          done: false,
          flow: options.flow ?? null,
        };
      },
      pull: (controller) => {
        state.queued = Math.max(0, highWaterMark - (controller.desiredSize ?? 0));
        if (state.paused && !state.done) {
          state.paused = false;
          state.flow?.resume(requestId);
        }
      },
      cancel: () => this.#stop(requestId, state),
    }, new ByteLengthQueuingStrategy({ highWaterMark }));
    this.#streams.set(requestId, state);
    this.#collected.register(stream, requestId);
    return stream;
  }

  /** Drops a registration (the request failed). */
  unregister(requestId: string): void {
    this.#streams.delete(requestId);
  }

  #stop(requestId: string, state: BodyState): void {
    if (state.cancelled || state.done) return;
    state.cancelled = true;
    state.flow?.cancel(requestId);
  }

  /** The stream was collected unread: stop it on the server. */
  #abandon(requestId: string): void {
    const state = this.#streams.get(requestId);
    if (state) this.#stop(requestId, state);
  }

  /** Accepts a delta. Never waits: a slow reader is handled per body. */
  accept(delta: HttpBodyDeltaNotification): null {
    const state = this.#streams.get(delta.requestId);
    if (!state || delta.seq < state.nextSeq) return null;
    state.pending.set(delta.seq, delta);
    while (state.pending.has(state.nextSeq)) {
      const d = state.pending.get(state.nextSeq)!;
      state.pending.delete(state.nextSeq);
      state.nextSeq++;
      if (d.done) this.#streams.delete(delta.requestId);
      const controller = state.controller.deref();
      if (!controller) this.#stop(delta.requestId, state);
      if (state.cancelled || !controller) continue;
      if (d.deltaBase64.length > 0) {
        const bytes = Uint8Array.fromBase64(d.deltaBase64);
        controller.enqueue(bytes);
        state.queued = Math.max(0, state.highWaterMark - (controller.desiredSize ?? 0));
      }
      if (d.done) {
        state.done = true;
        if (d.error === null) controller.close();
        else controller.error(new TypeError(`response body failed: ${d.error}`));
        return null;
      }
      if (state.flow) {
        if (!state.paused && (controller.desiredSize ?? 1) <= 0) {
          state.paused = true;
          state.flow.pause(delta.requestId);
        }
      } else if (state.queued > UNCONTROLLED_BODY_LIMIT) {
        controller.error(
          new TypeError(
            `response body failed: its reader fell more than ${UNCONTROLLED_BODY_LIMIT} bytes behind, and the server cannot hold one body without holding the connection (no httpBodyFlowControl)`,
          ),
        );
        state.cancelled = true;
      }
    }
    return null;
  }

  /** Errors every open body (connection lost). */
  failAll(reason: string): void {
    for (const state of this.#streams.values()) {
      if (!state.cancelled && !state.done) {
        state.controller.deref()?.error(new TypeError(`response body failed: ${reason}`));
      }
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
  /** Per-body flow control, when the server has it. */
  readonly flow?: BodyFlow | null;
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
  const stream = link.bodies.register(requestId, { flow: link.flow ?? null });
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
