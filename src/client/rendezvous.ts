/**
 * The harness side of remote mode: for every physical connection, fetch a
 * fresh single-use bundle from the registry (`connect`), open a WebSocket to
 * the rendezvous URL with a new UUID stream id, claim it (Resume), run the
 * Noise handshake against the pinned executor key, and hand back an
 * ordinary JSON-RPC connection — so the client library's reconnect and
 * session resume work unchanged over it.
 *
 * @module
 */

import type { OpenedTransport } from "./transports.ts";
import { connectWebSocket, WebSocketHandshakeError } from "../websocket/handshake.ts";
import type { WebSocketChannel } from "../websocket/channel.ts";
import {
  AUTH_REJECTED_PAYLOAD,
  buildPrologue,
  decodePublicKey,
  generateIdentity,
  initiatorHandshake,
  type NoiseIdentity,
  type NoisePublicKey,
} from "../noise/hybrid_ik.ts";
import type { RemoteKey } from "../noise/handshake.ts";
import { RecordCipher } from "../noise/transport.ts";
import { loadNoiseCrypto } from "../noise/primitives.ts";
import {
  decodeRelayFrame,
  frames,
  type RelayFrame,
  relayFrameProblem,
} from "../relay/wire/frame.ts";
import { relayLink } from "../relay/wire/relay_link.ts";
import { RELAY_WEBSOCKET_MAX } from "../relay/wire/frame.ts";
import { type ConnectBundle, connectHarness } from "../relay/wire/registry_client.ts";
import { harnessInboundLimit, secureConnection } from "../relay/wire/secure_connection.ts";

/** Where an environment is reached through a relay, asking the built-in registry client. */
export interface RendezvousProvider {
  /** Registry base URL. */
  readonly registryUrl: string;
  /** The environment (trimmed; blank is refused). */
  readonly environmentId: string;
  /** Harness API token (bearer). */
  readonly token: string;
  /** `chatgpt-account-id`, when needed. */
  readonly accountId?: string;
}

/**
 * A single-use connect bundle the caller obtained itself (its own registry
 * call, its own credentials), for exactly one physical connection and the
 * harness key it was minted for.
 */
export interface RendezvousBundle {
  /** The rendezvous WebSocket URL for this connection. */
  readonly url: string;
  /** The environment. */
  readonly environmentId: string;
  /** The executor's current registration id. */
  readonly executorRegistrationId: string;
  /** The executor's pinned key: raw, or as the registry sends it (`x25519_public_key`…). */
  readonly executorPublicKey: RemoteKey | NoisePublicKey;
  /** The single-use authorization for the harness key. */
  readonly harnessKeyAuthorization: string;
}

/**
 * Mints a fresh bundle for one connection attempt, for the harness key
 * given (the registry binds the authorization to it). Called once per
 * physical connection, so credentials that expire are renewed by the caller.
 */
export type RendezvousMinter = (harnessPublicKey: NoisePublicKey) => Promise<RendezvousBundle>;

/** How each physical connection through a relay gets its credentials. */
export type RendezvousSource = RendezvousProvider | RendezvousMinter;

/** A trimmed environment id; blank ones are refused. */
export function checkEnvironmentId(id: string): string {
  const trimmed = id.trim();
  if (trimmed === "") throw new RendezvousError("the environment id is blank");
  return trimmed;
}

function isProvider(source: RendezvousSource): source is RendezvousProvider {
  return typeof source === "object";
}

/** The environment a source names, for messages (null: known only per attempt). */
export function rendezvousLabel(source: RendezvousSource): string | null {
  return isProvider(source) ? source.environmentId.trim() : null;
}

function bundleOf(b: RendezvousBundle): ConnectBundle {
  const key = b.executorPublicKey;
  const nonBlank = (v: unknown) => typeof v === "string" && v.trim() !== "";
  if (
    !nonBlank(b.url) || !nonBlank(b.executorRegistrationId) || !nonBlank(b.harnessKeyAuthorization)
  ) {
    throw new RendezvousError(
      "a rendezvous bundle needs url, executorRegistrationId and harnessKeyAuthorization",
    );
  }
  return {
    url: b.url,
    environmentId: checkEnvironmentId(b.environmentId),
    executorRegistrationId: b.executorRegistrationId,
    executorPublicKey: "dh" in key ? key : decodePublicKey(key),
    harnessKeyAuthorization: b.harnessKeyAuthorization,
  };
}

/** The relay path failed (before or during the handshake). */
export class RendezvousError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RendezvousError";
  }
}

async function open(bundle: ConnectBundle): Promise<WebSocketChannel> {
  return await connectWebSocket(bundle.url, {
    maxFrameBytes: RELAY_WEBSOCKET_MAX,
    maxMessageBytes: RELAY_WEBSOCKET_MAX,
    pingIntervalMs: 30_000,
    pongTimeoutMs: 60_000,
    timeoutMs: 10_000,
  });
}

/** Reads frames for `streamId` until msg 2 (others and control frames are skipped). */
async function awaitMsg2(
  reader: ReadableStreamDefaultReader<string | Uint8Array>,
  streamId: string,
): Promise<Uint8Array> {
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new RendezvousError("the relay closed the connection during the handshake");
    if (typeof value === "string") {
      throw new RendezvousError("unexpected text message from the relay");
    }
    let frame: RelayFrame;
    try {
      frame = decodeRelayFrame(value);
    } catch {
      throw new RendezvousError("malformed relay frame during the handshake");
    }
    if (frame.streamId !== streamId) continue;
    if (relayFrameProblem(frame) !== null) {
      throw new RendezvousError("malformed relay frame during the handshake");
    }
    const body = frame.body!;
    if (body.kind === "handshake") return body.payload;
    if (body.kind === "reset") throw new RendezvousError("Noise relay stream reset");
    if (body.kind === "data") {
      throw new RendezvousError("relay data before the handshake completed");
    }
  }
}

/**
 * A `transport` factory for `connect()`: each call is one physical
 * connection through the relay (the identity is kept across calls).
 */
export function rendezvousTransport(
  source: RendezvousSource,
  options: { identity?: NoiseIdentity } = {},
): () => Promise<OpenedTransport> {
  let identity = options.identity ?? null;
  let mint: RendezvousMinter;
  if (isProvider(source)) {
    const environmentId = checkEnvironmentId(source.environmentId);
    const endpoint = {
      url: source.registryUrl,
      bearer: source.token,
      ...(source.accountId ? { accountId: source.accountId } : {}),
    };
    mint = (key) => connectHarness(endpoint, environmentId, key);
  } else {
    mint = source;
  }
  const next = async (key: NoisePublicKey): Promise<ConnectBundle> => bundleOf(await mint(key));
  return async () => {
    await loadNoiseCrypto();
    // One identity for every connection of this source.
    identity ??= generateIdentity();
    let bundle = await next(identity.publicKey);
    let channel: WebSocketChannel;
    try {
      channel = await open(bundle);
    } catch (error) {
      // A stale URL signature: one more bundle, when the source can mint one.
      if (!(error instanceof WebSocketHandshakeError) || error.status !== 401) throw error;
      bundle = await next(identity.publicKey);
      channel = await open(bundle);
    }
    const streamId = crypto.randomUUID();
    const reader = channel.messages.getReader();
    const link = relayLink(channel);
    const send = (frame: RelayFrame) => link.send(frame);
    let stream;
    try {
      const hs = initiatorHandshake(
        identity,
        bundle.executorPublicKey,
        buildPrologue(bundle.environmentId, bundle.executorRegistrationId, streamId),
      );
      await send(frames.resume(streamId));
      await send(
        frames.handshake(
          streamId,
          hs.writeMessage(new TextEncoder().encode(bundle.harnessKeyAuthorization)),
        ),
      );
      const payload = hs.readMessage(await awaitMsg2(reader, streamId));
      if (payload.length > 0) {
        const text = new TextDecoder().decode(payload);
        throw new RendezvousError(
          text === AUTH_REJECTED_PAYLOAD
            ? "environment registry rejected executor credentials"
            : "handshake response payload must be empty",
        );
      }
      const { send: tx, receive: rx } = hs.split();
      stream = secureConnection(new RecordCipher(tx), new RecordCipher(rx), {
        sendData: (seq, ct, trace) => send(frames.data(streamId, seq, ct, trace)),
        sendDataBatch: (records, fill) => link.sendDataBatch(streamId, records, fill),
        end: () => {
          send(frames.reset(streamId)).catch(() => {});
          channel.close(1000, "").catch(() => {});
        },
      }, { label: `relay ${bundle.environmentId}`, inboundLimit: harnessInboundLimit });
    } catch (error) {
      channel.abort("handshake failed");
      throw error instanceof RendezvousError
        ? error
        : new RendezvousError(`relay handshake failed: ${(error as Error).message}`, {
          cause: error,
        });
    }
    const s = stream;
    // Pump frames for our stream into the secure connection (with backpressure).
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          if (typeof value === "string") throw new Error("unexpected text message from the relay");
          const frame = decodeRelayFrame(value);
          if (frame.streamId !== streamId) continue;
          if (relayFrameProblem(frame) !== null) throw new Error("malformed relay frame");
          const body = frame.body!;
          if (body.kind === "data") await s.acceptData(body.seq, body.payload);
          else if (body.kind === "reset") throw new Error("Noise relay stream reset");
        }
        s.terminate("relay connection closed");
      } catch (error) {
        s.terminate((error as Error).message);
      }
      channel.abort("stream ended");
    })();
    return {
      connection: s.connection,
      label: `relay ${bundle.environmentId}`,
      close() {
        s.connection.close("client closed");
        channel.abort("client closed");
        return Promise.resolve();
      },
    };
  };
}
