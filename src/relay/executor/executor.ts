/**
 * The executor side of remote mode: register with the environment registry,
 * keep one outbound WebSocket to the rendezvous, and serve one encrypted
 * virtual stream per harness on it — each an ordinary exec-server
 * connection (`detach` on loss, so a harness that reconnects resumes).
 *
 * Per stream: Noise responder with the prologue bound to environment,
 * registration and stream; the harness key checked with the registry
 * (`/validate`, 10 s) while the handshake is held half-open; a 401 answered
 * with the authenticated rejection payload, anything else with a Reset.
 * Limits: 128 active streams, 32 pending validations, 8 failed handshakes
 * start a 10 s cooldown, 128 queued inbound messages per stream.
 *
 * Socket policy: pings every 30 s, no pong within 60 s closes; reconnect
 * with a jittered backoff (1 s doubling to 30 s, sleep in [b/2, b], reset
 * after 120 s up); any 4xx on the upgrade, or no answer at all (the node that
 * issued the URL is gone), re-registers first.
 *
 * @module
 */

import { connectWebSocket, WebSocketHandshakeError } from "../../websocket/handshake.ts";
import type { WebSocketChannel, WebSocketCloseInfo } from "../../websocket/channel.ts";
import type { ReconnectReason, RemoteMetrics } from "../../telemetry/exec_metrics.ts";
import type { HandshakeRejection, RemoteTracing } from "../../telemetry/tracing.ts";
import { type Logger, nullLogger } from "../../log/logger.ts";
import type { HandshakeState } from "../../noise/handshake.ts";
import {
  AUTH_REJECTED_PAYLOAD,
  authorizationFromPayload,
  buildPrologue,
  encodePublicKey,
  generateIdentity,
  MAX_AUTHORIZATION_BYTES,
  type NoiseIdentity,
  responderHandshake,
} from "../../noise/hybrid_ik.ts";
import { RecordCipher } from "../../noise/transport.ts";
import { loadNoiseCrypto } from "../../noise/primitives.ts";
import type { StreamServer } from "./forward.ts";
import { frames, RELAY_WEBSOCKET_MAX, type RelayFrame, validRelayFrames } from "../wire/frame.ts";
import { type RelayLink, relayLink } from "../wire/relay_link.ts";
import {
  registerExecutor,
  type Registration,
  type RegistryEndpoint,
  validateHarness,
} from "../wire/registry_client.ts";
import { secureConnection, type SecureStream } from "../wire/secure_connection.ts";
import { BASE64_MEMBERS } from "../../protocol/spec.ts";

const MAX_ACTIVE = 128;
const MAX_PENDING = 32;
const FAILURE_BUDGET = 8;
const COOLDOWN_MS = 10_000;

/** Options of {@linkcode RemoteExecutor.start}. */
export interface RemoteExecutorOptions {
  /** The registry (base URL and registration bearer). */
  readonly registry: RegistryEndpoint;
  /** The environment to serve. */
  readonly environmentId: string;
  /**
   * What runs each stream's session: an `ExecServer`, or a forwarding
   * server to another exec-server (see forward.ts).
   */
  readonly server: StreamServer;
  /** Diagnostics. */
  readonly logger?: Logger;
  /** Identity (default: a fresh one, kept for the process's lifetime). */
  readonly identity?: NoiseIdentity;
  /** Reconnect backoff (tests shorten it). */
  readonly backoff?: {
    readonly initialMs?: number;
    readonly maxMs?: number;
    readonly resetAfterMs?: number;
  };
  /** Keepalive (default 30 s ping, 60 s pong timeout). */
  readonly keepalive?: { readonly pingIntervalMs?: number; readonly pongTimeoutMs?: number };
  /** Where registrations, rendezvous dials and reconnects are counted (the server's metrics). */
  readonly metrics?: RemoteMetrics | null;
  /** Spans of its registry and rendezvous calls, as the reference's (an OTLP push). */
  readonly tracing?: RemoteTracing | null;
}

/** Why a rendezvous socket ended, as the reference's reconnect `reason`. */
function reconnectReason(info: WebSocketCloseInfo): ReconnectReason {
  if (info.reason === "pong_timeout") return "pong_timeout";
  if (info.reason === "write failed") return "write_error";
  return info.wasClean || info.code !== 1006 ? "peer_close" : "read_error";
}

/** Runs `call` inside `tracing`'s CLIENT span `name` (see `RemoteTracing`), or just runs it. */
function traced<T>(
  tracing: RemoteTracing | null | undefined,
  name: string,
  attributes: Readonly<Record<string, string>>,
  call: () => Promise<T>,
  withResult = true,
): Promise<T> {
  return tracing ? tracing.clientSpan(name, attributes, call, withResult) : call();
}

/** Runs `attempt`, reporting its outcome and duration to `report`. */
async function measured<T>(
  report: ((result: "success" | "error", seconds: number) => void) | undefined,
  attempt: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  try {
    const value = await attempt();
    report?.("success", (performance.now() - started) / 1000);
    return value;
  } catch (error) {
    report?.("error", (performance.now() - started) / 1000);
    throw error;
  }
}

type StreamState =
  | { readonly kind: "pending"; readonly instance: number; cancelled: boolean }
  | { readonly kind: "active"; readonly instance: number; readonly stream: SecureStream };

function requestId(): string {
  return `req_${crypto.getRandomValues(new Uint8Array(16)).toHex()}`;
}

/** See the module documentation. */
export class RemoteExecutor implements AsyncDisposable {
  /** The executor's identity. */
  readonly identity: NoiseIdentity;
  #options: RemoteExecutorOptions;
  #logger: Logger;
  #registration: Registration;
  #closed = false;
  #channel: WebSocketChannel | null = null;
  #loop: Promise<void> = Promise.resolve();
  #wake: (() => void) | null = null;
  #connectedOnce = Promise.withResolvers<void>();
  #failures = 0;
  #cooldownUntil = 0;
  #instances = 0;
  #streams = new Map<string, StreamState>();
  #pending = 0;

  private constructor(
    options: RemoteExecutorOptions,
    identity: NoiseIdentity,
    registration: Registration,
  ) {
    this.#options = options;
    this.#logger = options.logger ?? nullLogger;
    this.identity = identity;
    this.#registration = registration;
  }

  /** Registers (errors are thrown) and starts serving in the background. */
  static async start(options: RemoteExecutorOptions): Promise<RemoteExecutor> {
    await loadNoiseCrypto();
    const identity = options.identity ?? generateIdentity();
    const registration = await RemoteExecutor.#register(options, identity);
    const executor = new RemoteExecutor(options, identity, registration);
    executor.#loop = executor.#run();
    return executor;
  }

  static async #register(
    options: RemoteExecutorOptions,
    identity: NoiseIdentity,
  ): Promise<Registration> {
    const metrics = options.metrics;
    const register = () =>
      measured(
        metrics ? (result, seconds) => metrics.registration(result, seconds) : undefined,
        () => registerExecutor(options.registry, options.environmentId, identity.publicKey),
      );
    const registration = await traced(
      options.tracing,
      "codex.exec_server.remote.register",
      {},
      register,
    );
    options.tracing?.executor({
      environmentId: registration.environmentId,
      registrationId: registration.executorRegistrationId,
    });
    return registration;
  }

  /** The current registration. */
  get registration(): Registration {
    return this.#registration;
  }

  /** Active streams. */
  get activeStreams(): number {
    let n = 0;
    for (const s of this.#streams.values()) if (s.kind === "active") n++;
    return n;
  }

  /** Resolves after the first successful rendezvous connection. */
  get connected(): Promise<void> {
    return this.#connectedOnce.promise;
  }

  /** Drops the rendezvous socket now (it reconnects; for tests and diagnostics). */
  dropSocket(): void {
    this.#channel?.abort("dropped");
  }

  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = null;
        resolve();
      }, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async #run(): Promise<void> {
    const initial = this.#options.backoff?.initialMs ?? 1000;
    const max = this.#options.backoff?.maxMs ?? 30_000;
    const resetAfter = this.#options.backoff?.resetAfterMs ?? 120_000;
    let base = initial;
    const backoff = async () => {
      await this.#sleep(base / 2 + Math.random() * (base / 2));
      base = Math.min(base * 2, max);
    };
    while (!this.#closed) {
      let channel: WebSocketChannel;
      const metrics = this.#options.metrics;
      const request = requestId();
      const dial = () =>
        measured(
          metrics ? (result, seconds) => metrics.rendezvousConnect(result, seconds) : undefined,
          () =>
            connectWebSocket(this.#registration.url, {
              headers: { "x-request-id": request },
              maxFrameBytes: RELAY_WEBSOCKET_MAX,
              maxMessageBytes: RELAY_WEBSOCKET_MAX,
              pingIntervalMs: this.#options.keepalive?.pingIntervalMs ?? 30_000,
              pongTimeoutMs: this.#options.keepalive?.pongTimeoutMs ?? 60_000,
              timeoutMs: 10_000,
            }),
        );
      try {
        channel = await traced(
          this.#options.tracing,
          "codex.exec_server.remote.rendezvous.connect",
          { request_id: request },
          dial,
        );
      } catch (error) {
        const status = error instanceof WebSocketHandshakeError ? error.status ?? 0 : 0;
        this.#logger.warn("remote.connect_failed", { status, error: (error as Error).message });
        // A refused URL (4xx), or a node that is gone (no answer at all: its
        // URL names that node): register again — the registry, behind its
        // one address, answers from a live node with that node's URL.
        if ((status === 0 || (status >= 400 && status < 500)) && !this.#closed) {
          try {
            this.#registration = await RemoteExecutor.#register(this.#options, this.identity);
            this.#logger.info("remote.reregistered", {
              registration: this.#registration.executorRegistrationId,
            });
          } catch (e) {
            this.#logger.warn("remote.register_failed", { error: (e as Error).message });
          }
        }
        if (!this.#closed) {
          metrics?.reconnect("connect_failed");
          await backoff();
        }
        continue;
      }
      if (this.#closed) {
        channel.abort("closed");
        break;
      }
      this.#channel = channel;
      this.#connectedOnce.resolve();
      this.#logger.info("remote.connected", { environment: this.#options.environmentId });
      const started = Date.now();
      // The streams of one rendezvous socket are served inside its span.
      const tracing = this.#options.tracing;
      const ended = await (tracing
        ? tracing.environment(() => this.#serve(channel))
        : this.#serve(channel));
      this.#channel = null;
      if (Date.now() - started >= resetAfter) base = initial;
      if (!this.#closed) {
        metrics?.reconnect(reconnectReason(ended));
        await backoff();
      }
    }
  }

  async #serve(channel: WebSocketChannel): Promise<WebSocketCloseInfo> {
    const link = relayLink(channel);
    try {
      for await (const [frame] of validRelayFrames(channel.messages)) {
        this.#dispatch(frame, link);
      }
    } catch (error) {
      this.#logger.debug("remote.socket_error", { error: (error as Error).message });
    }
    const info = await channel.closed;
    this.#logger.info("remote.disconnected", { reason: info.reason });
    for (const [id, s] of this.#streams) {
      if (s.kind === "pending") s.cancelled = true;
      else s.stream.terminate("executor socket closed");
      this.#streams.delete(id);
    }
    return info;
  }

  #reset(link: RelayLink, streamId: string): void {
    link.send(frames.reset(streamId)).catch(() => {});
  }

  /**
   * A handshake refused: in the debug log (with the error that refused it,
   * if any), and as the reference's diagnostic (span and event).
   */
  #rejected(
    streamId: string,
    reason: HandshakeRejection,
    registryStatus: number | null = null,
    error?: unknown,
  ) {
    this.#logger.debug("remote.handshake_rejected", {
      stream: streamId,
      reason,
      registryStatus,
      ...(error === undefined ? {} : { error: (error as Error).message }),
    });
    this.#options.tracing?.handshakeRejected({
      environmentId: this.#options.environmentId,
      registrationId: this.#registration.executorRegistrationId,
      streamId,
      reason,
      registryStatus,
    });
  }

  /** Message 1 that does not decrypt or carries no usable authorization: refused, counted, reset. */
  #brokenHandshake(link: RelayLink, id: string, reason: HandshakeRejection, error: unknown): void {
    this.#rejected(id, reason, null, error);
    this.#fail();
    this.#reset(link, id);
  }

  #fail(): void {
    this.#failures++;
    if (this.#failures >= FAILURE_BUDGET) {
      this.#cooldownUntil = Date.now() + COOLDOWN_MS;
      this.#failures = 0;
      this.#logger.warn("remote.handshake_cooldown", { seconds: COOLDOWN_MS / 1000 });
    }
  }

  /** A handshake the harness broke off (a second handshake, or data before it finished). */
  #abandon(id: string, state: { cancelled: boolean }): void {
    state.cancelled = true;
    this.#streams.delete(id);
    this.#pending--;
    this.#fail();
  }

  #dispatch(frame: RelayFrame, link: RelayLink): void {
    const id = frame.streamId;
    const body = frame.body!;
    const state = this.#streams.get(id);
    switch (body.kind) {
      case "handshake": {
        const refused = (reason: HandshakeRejection) => {
          this.#rejected(id, reason);
          this.#reset(link, id);
        };
        if (Date.now() < this.#cooldownUntil) return refused("cooldown");
        if (state?.kind === "active") return refused("duplicate_active_stream");
        if (state?.kind === "pending") {
          this.#abandon(id, state);
          return refused("duplicate_pending_stream");
        }
        if (this.activeStreams >= MAX_ACTIVE) return refused("active_stream_limit");
        if (this.#pending >= MAX_PENDING) return refused("pending_validation_limit");
        return this.#handshake(id, body.payload, link);
      }
      case "data": {
        if (state?.kind === "active") {
          state.stream.acceptData(body.seq, body.payload);
          return;
        }
        if (state?.kind === "pending") this.#abandon(id, state);
        return this.#reset(link, id);
      }
      case "reset": {
        if (state?.kind === "pending") {
          state.cancelled = true;
          this.#pending--;
        } else if (state?.kind === "active") state.stream.terminate("reset by the harness");
        this.#streams.delete(id);
        return;
      }
      default:
        return; // resume, ack, heartbeat
    }
  }

  #handshake(id: string, msg1: Uint8Array, link: RelayLink): void {
    const registration = this.#registration;
    let hs: HandshakeState;
    let authorization: string;
    try {
      hs = responderHandshake(
        this.identity,
        buildPrologue(this.#options.environmentId, registration.executorRegistrationId, id),
      );
      const payload = hs.readMessage(msg1);
      try {
        authorization = authorizationFromPayload(payload);
      } catch (error) {
        const reason = payload.length > MAX_AUTHORIZATION_BYTES
          ? "authorization_too_long"
          : "authorization_not_utf8";
        return this.#brokenHandshake(link, id, reason, error);
      }
    } catch (error) {
      return this.#brokenHandshake(link, id, "handshake_request", error);
    }
    const instance = ++this.#instances;
    const pending: StreamState = { kind: "pending", instance, cancelled: false };
    this.#streams.set(id, pending);
    this.#pending++;
    (async () => {
      const validate = () =>
        validateHarness(
          this.#options.registry,
          this.#options.environmentId,
          id,
          {
            executor_registration_id: registration.executorRegistrationId,
            harness_public_key: encodePublicKey(hs.remoteStatic!),
            harness_key_authorization: authorization,
          },
          (why) => {
            this.#logger.info("remote.harness_refused", {
              stream: id,
              status: why.status,
              code: why.code,
            });
            this.#rejected(id, why.reason, why.reason === "registry_http" ? why.status : null);
          },
        );
      const verdict = await traced(
        this.#options.tracing,
        "codex.exec_server.remote.environment_registry.validate_harness_key",
        {
          environment_id: this.#options.environmentId,
          executor_registration_id: registration.executorRegistrationId,
        },
        validate,
        false,
      );
      if (pending.cancelled) return;
      this.#pending--;
      if (verdict !== "valid") {
        this.#streams.delete(id);
        this.#fail();
        if (verdict === "unauthorized") {
          await link.send(
            frames.handshake(id, hs.writeMessage(new TextEncoder().encode(AUTH_REJECTED_PAYLOAD))),
          ).catch(() => {});
        }
        return this.#reset(link, id);
      }
      this.#failures = 0;
      const msg2 = hs.writeMessage();
      const { send: tx, receive: rx } = hs.split();
      const stream = secureConnection(new RecordCipher(tx), new RecordCipher(rx), {
        sendData: (seq, ct, trace) => link.send(frames.data(id, seq, ct, trace)),
        sendDataBatch: (records, fill) => link.sendDataBatch(id, records, fill),
        end: () => {
          const current = this.#streams.get(id);
          if (current?.instance === instance) {
            this.#streams.delete(id);
            this.#reset(link, id);
          }
        },
      }, { label: `relay stream ${id}`, maxQueuedMessages: 128, base64Members: BASE64_MEMBERS });
      await link.send(frames.handshake(id, msg2));
      this.#streams.set(id, { kind: "active", instance, stream });
      this.#options.server.serve(stream.connection, "detach", "relay").catch(() => {});
    })().catch((error) => {
      this.#logger.warn("remote.stream_failed", { error: (error as Error).message });
      this.#streams.delete(id);
      this.#reset(link, id);
    });
  }

  /** Stops reconnecting and closes the socket (sessions stay resumable until their TTL). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wake?.();
    this.#channel?.abort("executor closing");
    await this.#loop;
  }

  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
