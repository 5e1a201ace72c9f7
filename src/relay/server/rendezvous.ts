/**
 * The rendezvous: executor sockets (one per environment, carrying every
 * stream) and harness sockets (one stream each, claimed by their first
 * frame), with frames routed by `stream_id` both ways. The relay never
 * holds a key: it parses only the frame envelope (stream id and kind) and
 * forwards the bytes it received unchanged.
 *
 * Bounds: 256 KiB per frame; 4 MiB queued per harness — when a harness's
 * queue is full the executor socket is not read until it drains (TCP
 * backpressure reaches the executor, which pauses the output at its source,
 * so nothing is lost); a harness that stays full for 10 s is reset on both
 * sides instead of stalling the other streams; 32 harness sockets per token. A harness that goes
 * away is reported to the executor with a Reset; an executor that goes
 * away closes its harnesses.
 *
 * @module
 */

import type { WebSocketChannel } from "../../websocket/channel.ts";
import type { PayloadPool } from "../../websocket/frame.ts";
import { type Logger, nullLogger } from "../../log/logger.ts";
import {
  decodeRelayFrame,
  encodeRelayFrame,
  frames,
  type RelayFrame,
  relayFrameProblem,
  validRelayFrames,
} from "../wire/frame.ts";
import { type RendezvousGrant, RendezvousRejection } from "./signing.ts";
import type { RelayStore } from "./store.ts";

/** Most bytes queued towards one harness. */
export const HARNESS_QUEUE_BYTES = 4 * 1024 * 1024;
/** Most harness sockets per token. */
export const HARNESS_SOCKETS_PER_TOKEN = 32;

interface HarnessSocket {
  readonly channel: WebSocketChannel;
  streamId: string | null;
  queue: Uint8Array[];
  queued: number;
  wake: (() => void) | null;
  drained: (() => void) | null;
  ended: boolean;
}

/** How long a full harness queue may hold up its executor socket. */
export const HARNESS_STALL_MS = 10_000;

interface ExecutorSocket {
  readonly channel: WebSocketChannel;
  readonly registrationId: string;
  readonly streams: Map<string, HarnessSocket>;
}

/** Options of {@linkcode Rendezvous}. */
export interface RendezvousOptions {
  /** State. */
  readonly store: RelayStore;
  /** This node's public URL (recorded for executor sockets). */
  readonly nodeUrl: string;
  /** Diagnostics. */
  readonly logger?: Logger;
  /**
   * Observes every forwarded frame (tests: the relay sees ciphertext only);
   * the bytes are valid only during the call (copy to keep them).
   */
  readonly onForward?: (bytes: Uint8Array, direction: "to_executor" | "to_harness") => void;
  /** The pool the relay's sockets parse payloads into: forwarded ones go back to it. */
  readonly payloadPool?: PayloadPool;
}

/** See the module documentation. */
export class Rendezvous {
  readonly nodeId: string = crypto.randomUUID();
  readonly #o: RendezvousOptions;
  readonly #logger: Logger;
  readonly #executors = new Map<string, ExecutorSocket>();
  readonly #perToken = new Map<string, number>();
  #harnesses = 0;
  readonly #refresh: ReturnType<typeof setInterval>;

  /** Starts (refreshing socket records every 30 s). */
  constructor(options: RendezvousOptions) {
    this.#o = options;
    this.#logger = options.logger ?? nullLogger;
    this.#refresh = setInterval(() => {
      for (const [env, e] of this.#executors) {
        options.store.setSocket(env, {
          registrationId: e.registrationId,
          nodeUrl: options.nodeUrl,
          nodeId: this.nodeId,
        })
          .catch(() => {});
      }
    }, 30_000);
  }

  /** Environments whose executor socket is here. */
  get executorCount(): number {
    return this.#executors.size;
  }

  /** Harness sockets open here. */
  get harnessCount(): number {
    return this.#harnesses;
  }

  /** Refuses an upgrade that cannot be served (before switching protocols). */
  async check(grant: RendezvousGrant): Promise<void> {
    if (grant.role === "environment") {
      const current = await this.#o.store.registration(grant.environmentId);
      if (!current || current.registrationId !== grant.registrationId) {
        throw new RendezvousRejection(409, "unexpected_executor_registration_id");
      }
      return;
    }
    const executor = this.#executors.get(grant.environmentId);
    if (!executor || executor.registrationId !== grant.registrationId) {
      throw new RendezvousRejection(404, "route_unavailable");
    }
    if ((this.#perToken.get(grant.tokenTag ?? "") ?? 0) >= HARNESS_SOCKETS_PER_TOKEN) {
      throw new RendezvousRejection(429, "route_unavailable");
    }
  }

  /** Serves an executor socket until it closes. */
  async attachExecutor(channel: WebSocketChannel, grant: RendezvousGrant): Promise<void> {
    const env = grant.environmentId;
    this.#executors.get(env)?.channel.abort("replaced by a newer executor socket");
    const executor: ExecutorSocket = {
      channel,
      registrationId: grant.registrationId,
      streams: new Map(),
    };
    this.#executors.set(env, executor);
    await this.#o.store.setSocket(env, {
      registrationId: grant.registrationId,
      nodeUrl: this.#o.nodeUrl,
      nodeId: this.nodeId,
    });
    this.#logger.info("relay.executor_connected", { environment: env });
    try {
      for await (const [frame, message] of validRelayFrames(channel.messages)) {
        const harness = executor.streams.get(frame.streamId);
        if (!harness) continue;
        this.#enqueue(harness, message);
        if (harness.queued >= HARNESS_QUEUE_BYTES) await this.#waitForRoom(executor, harness);
      }
    } catch { /* socket failed */ }
    if (this.#executors.get(env) === executor) {
      this.#executors.delete(env);
      await this.#o.store.clearSocket(env, this.nodeId).catch(() => {});
    }
    for (const h of executor.streams.values()) h.channel.abort("executor disconnected");
    this.#logger.info("relay.executor_disconnected", { environment: env });
  }

  #enqueue(harness: HarnessSocket, bytes: Uint8Array): void {
    harness.queue.push(bytes);
    harness.queued += bytes.length;
    harness.wake?.();
  }

  async #waitForRoom(executor: ExecutorSocket, harness: HarnessSocket): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const drained = await Promise.race([
      new Promise<boolean>((resolve) => (harness.drained = () => resolve(true))),
      new Promise<boolean>((
        resolve,
      ) => (timer = setTimeout(() => resolve(false), HARNESS_STALL_MS))),
    ]);
    clearTimeout(timer);
    harness.drained = null;
    if (drained || harness.ended) return;
    this.#logger.warn("relay.harness_stalled", { stream: harness.streamId });
    if (harness.streamId) {
      executor.channel.send(
        encodeRelayFrame(frames.reset(harness.streamId, "relay_harness_stalled")),
      )
        .catch(() => {});
    }
    harness.channel.abort("stalled");
  }

  /** Serves a harness socket until it closes. */
  async attachHarness(channel: WebSocketChannel, grant: RendezvousGrant): Promise<void> {
    const executor = this.#executors.get(grant.environmentId);
    if (!executor) return channel.abort("executor unavailable");
    const tag = grant.tokenTag ?? "";
    this.#perToken.set(tag, (this.#perToken.get(tag) ?? 0) + 1);
    this.#harnesses++;
    const harness: HarnessSocket = {
      channel,
      streamId: null,
      queue: [],
      queued: 0,
      wake: null,
      drained: null,
      ended: false,
    };
    let ended = false;
    // Writer: executor → harness, in order, with this socket's backpressure.
    const writer = (async () => {
      while (!ended) {
        const next = harness.queue.shift();
        if (!next) {
          await new Promise<void>((r) => (harness.wake = r));
          harness.wake = null;
          continue;
        }
        harness.queued -= next.length;
        if (harness.queued < HARNESS_QUEUE_BYTES / 2) harness.drained?.();
        this.#o.onForward?.(next, "to_harness");
        try {
          await channel.send(next);
        } catch {
          break;
        }
        // Written and referenced nowhere else: its buffer serves a later frame.
        this.#o.payloadPool?.recycle(next);
      }
    })();
    try {
      for await (const message of channel.messages) {
        if (typeof message === "string") break;
        let frame: RelayFrame;
        try {
          frame = decodeRelayFrame(message);
        } catch {
          break;
        }
        if (relayFrameProblem(frame) !== null) break;
        if (harness.streamId === null) {
          if (executor.streams.has(frame.streamId)) break; // stream id taken
          harness.streamId = frame.streamId;
          executor.streams.set(frame.streamId, harness);
        } else if (frame.streamId !== harness.streamId) break;
        if (frame.body!.kind === "resume") continue; // a claim only
        if (frame.traceparent !== undefined) {
          // Cleartext trace context of a request (see secure_connection.ts), for correlation.
          this.#logger.debug("relay.request_trace", {
            stream: frame.streamId,
            traceparent: frame.traceparent,
            ...(frame.tracestate !== undefined ? { tracestate: frame.tracestate } : {}),
          });
        }
        this.#o.onForward?.(message, "to_executor");
        await executor.channel.send(message);
      }
    } catch { /* socket failed */ }
    ended = true;
    harness.ended = true;
    harness.drained?.();
    harness.wake?.();
    await writer;
    channel.abort("stream ended");
    this.#perToken.set(tag, (this.#perToken.get(tag) ?? 1) - 1);
    this.#harnesses--;
    if (harness.streamId && executor.streams.get(harness.streamId) === harness) {
      executor.streams.delete(harness.streamId);
      if (!executor.channel.ended) {
        executor.channel.send(
          encodeRelayFrame(frames.reset(harness.streamId, "harness_disconnected")),
        ).catch(() => {});
      }
    }
  }

  /** Closes every socket. */
  close(): void {
    clearInterval(this.#refresh);
    for (const e of this.#executors.values()) e.channel.abort("relay closing");
  }
}
