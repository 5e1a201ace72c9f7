/**
 * Codex's Noise channel: `Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256` (the
 * name that is hashed; the JSON label says `X25519`), the four-part
 * prologue with 8-byte big-endian lengths, identities (an X25519 pair and
 * an independent ML-KEM-768 pair, in memory only), the public-key JSON with
 * its strict validation, and both handshake roles.
 *
 * @module
 */

import { HandshakeError, HandshakeState, type LocalKey, type RemoteKey } from "./handshake.ts";
import { parsePattern } from "./patterns.ts";
import { AESGCM, concat, MLKEM768, X25519 } from "./primitives.ts";

/** The suite label published in key JSON. */
export const NOISE_SUITE = "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256";
/** The Noise protocol name that is hashed. */
export const NOISE_PROTOCOL_NAME = "Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256";
/** The registry security profile. */
export const SECURITY_PROFILE = "noise_hybrid_ik_v1";
/** The prologue's first part. */
export const PROLOGUE_DOMAIN = "codex-exec-server-relay-noise/v1";
/** msg 2 payload after a 401 from `/validate`. */
export const AUTH_REJECTED_PAYLOAD = "codex-registry-authentication-rejected/v1";
/** Largest msg 1 payload (the harness key authorization). */
export const MAX_AUTHORIZATION_BYTES = 4096;
/** msg 1 length without payload. */
export const MSG1_OVERHEAD = 3568;

const PATTERN = parsePattern("hybridIK");
const encoder = new TextEncoder();

/** A Noise identity (X25519 + ML-KEM-768), never persisted. */
export interface NoiseIdentity {
  /** The key pairs. */
  readonly key: Required<LocalKey>;
  /** The public half. */
  readonly publicKey: NoisePublicKey;
}

/** A public key as the registry carries it. */
export interface NoisePublicKey {
  /** Always {@linkcode NOISE_SUITE}. */
  readonly suite: string;
  /** Standard padded base64 of 32 bytes. */
  readonly x25519_public_key: string;
  /** Standard padded base64 of 1184 bytes. */
  readonly mlkem768_public_key: string;
}

/** A fresh random identity (or one from seeds, for tests). */
export function generateIdentity(
  seeds: { x25519?: Uint8Array; mlkem?: Uint8Array } = {},
): NoiseIdentity {
  const key = { dh: X25519.keyPair(seeds.x25519), kem: MLKEM768.keyPair(seeds.mlkem) };
  return { key, publicKey: encodePublicKey({ dh: key.dh.publicKey, kem: key.kem.publicKey }) };
}

/** The key JSON for a public key. */
export function encodePublicKey(key: RemoteKey): NoisePublicKey {
  return {
    suite: NOISE_SUITE,
    x25519_public_key: key.dh.toBase64(),
    mlkem768_public_key: key.kem!.toBase64(),
  };
}

/** A key object that is not acceptable; messages are the reference's. */
export class NoiseKeyError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "NoiseKeyError";
  }
}

function decodeComponent(value: unknown, bytes: number, what: string): Uint8Array {
  if (typeof value !== "string") throw new NoiseKeyError(`invalid ${what} public key`);
  const encodedLength = Math.ceil(bytes / 3) * 4;
  if (value.length > encodedLength) throw new NoiseKeyError(`invalid ${what} public key length`);
  let decoded: Uint8Array;
  try {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0) {
      throw new Error("not base64");
    }
    decoded = Uint8Array.fromBase64(value);
  } catch {
    throw new NoiseKeyError(`invalid ${what} public key`);
  }
  if (decoded.length !== bytes) throw new NoiseKeyError(`invalid ${what} public key length`);
  return decoded;
}

/** Validates key JSON (exact suite, no extra fields, exact lengths). */
export function decodePublicKey(value: unknown): RemoteKey {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new NoiseKeyError("invalid Noise channel public key");
  }
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== "suite" && k !== "x25519_public_key" && k !== "mlkem768_public_key") {
      throw new NoiseKeyError(`unknown field \`${k}\` in Noise channel public key`);
    }
  }
  if (o.suite !== NOISE_SUITE) throw new NoiseKeyError("unsupported Noise channel suite");
  return {
    dh: decodeComponent(o.x25519_public_key, 32, "X25519"),
    kem: decodeComponent(o.mlkem768_public_key, MLKEM768.publicKeyBytes, "ML-KEM-768"),
  };
}

/** The prologue: four parts, each an 8-byte big-endian length then the bytes. */
export function buildPrologue(
  environmentId: string,
  registrationId: string,
  streamId: string,
): Uint8Array {
  const parts = [PROLOGUE_DOMAIN, environmentId, registrationId, streamId].map((s) =>
    encoder.encode(s)
  );
  return concat(...parts.flatMap((p) => {
    const len = new Uint8Array(8);
    new DataView(len.buffer).setBigUint64(0, BigInt(p.length), false);
    return [len, p];
  }));
}

/** Deterministic inputs for tests (ephemeral keys, encapsulation randomness). */
export interface HandshakeTestInputs {
  /** Ephemeral key. */
  readonly e?: Required<LocalKey>;
  /** Encapsulation randomness, in the order encapsulations happen. */
  readonly encapsulations?: Uint8Array[];
}

function hybridHandshake(
  identity: NoiseIdentity,
  prologue: Uint8Array,
  executorKey: RemoteKey | null,
  test: HandshakeTestInputs,
): HandshakeState {
  const randomness = [...(test.encapsulations ?? [])];
  return new HandshakeState({
    protocolName: NOISE_PROTOCOL_NAME,
    pattern: PATTERN,
    initiator: executorKey !== null,
    prologue,
    aead: AESGCM,
    hybrid: true,
    s: identity.key,
    ...(executorKey ? { rs: executorKey } : {}),
    ...(test.e ? { e: test.e } : {}),
    encapsulationRandomness: () => randomness.shift(),
  });
}

/** The harness (initiator) side of a handshake. */
export function initiatorHandshake(
  identity: NoiseIdentity,
  executorKey: RemoteKey,
  prologue: Uint8Array,
  test: HandshakeTestInputs = {},
): HandshakeState {
  return hybridHandshake(identity, prologue, executorKey, test);
}

/** The executor (responder) side of a handshake. */
export function responderHandshake(
  identity: NoiseIdentity,
  prologue: Uint8Array,
  test: HandshakeTestInputs = {},
): HandshakeState {
  return hybridHandshake(identity, prologue, null, test);
}

/** Checks a msg 1 payload is an acceptable authorization (UTF-8, ≤ 4096 bytes). */
export function authorizationFromPayload(payload: Uint8Array): string {
  if (payload.length > MAX_AUTHORIZATION_BYTES) {
    throw new HandshakeError("harness key authorization is too long");
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(payload);
  } catch {
    throw new HandshakeError("harness key authorization is not UTF-8");
  }
}

export { HandshakeError };
