/**
 * The relay's state, shared by every relay node behind one address: tokens
 * (stored as SHA-256 digests), the URL-signing secret, registrations
 * (executor key and registration id per environment), which node holds each
 * executor's socket (refreshed while connected, expiring with the store's
 * own TTL otherwise), and single-use harness authorizations (60 s).
 *
 * Two implementations behind {@linkcode RelayStore}, chosen by
 * `openRelayStore`'s URL (`store_open.ts`): Deno KV (`store_kv.ts`; a local file or
 * in memory — the embedded default) and Redis or any Redis-protocol server
 * (`store_redis.ts`; `redis://` / `rediss://`) for nodes on several machines.
 *
 * @module
 */

import type { NoisePublicKey } from "../../noise/hybrid_ik.ts";

/** Who a token is for. */
export type TokenRole = "executor" | "harness";

/** A stored token. */
export interface TokenRecord {
  /** Role. */
  readonly role: TokenRole;
  /** The environment it is bound to. */
  readonly environmentId: string;
  /** Unix ms. */
  readonly createdAt: number;
}

/** A registration. */
export interface RegistrationRecord {
  /** The id bound into prologues. */
  readonly registrationId: string;
  /** The executor's public key. */
  readonly executorPublicKey: NoisePublicKey;
  /** Unix ms. */
  readonly at: number;
}

/** Where an executor socket lives. */
export interface SocketRecord {
  /** Registration served on it. */
  readonly registrationId: string;
  /** The node's public base URL. */
  readonly nodeUrl: string;
  /** The node's instance id. */
  readonly nodeId: string;
}

/** A harness authorization. */
export interface AuthorizationRecord {
  /** Environment. */
  readonly environmentId: string;
  /** Registration it was issued for. */
  readonly registrationId: string;
  /** The harness X25519 key (base64). */
  readonly x25519: string;
  /** The harness ML-KEM key (base64). */
  readonly mlkem: string;
}

/** How long a socket record lives without a refresh. */
export const SOCKET_TTL_MS = 90_000;
/** How long an authorization lives. */
export const AUTHORIZATION_TTL_MS = 60_000;

/** A store operation failed because the store is unreachable (answer 503, retry later). */
export class StoreUnavailableError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StoreUnavailableError";
  }
}

/** The relay's state (see the module documentation). */
export interface RelayStore extends Disposable {
  /** What it is, for logs and `/readyz` (never a password). */
  readonly description: string;
  /** Creates a token; returns it (only its digest is stored). */
  createToken(role: TokenRole, environmentId: string): Promise<string>;
  /** Looks a bearer up; `null` when unknown. Returns its digest too. */
  token(bearer: string): Promise<(TokenRecord & { digest: string }) | null>;
  /** The cluster's URL-signing secret (created once, shared by every node). */
  secret(): Promise<Uint8Array>;
  /** Records a registration (replacing the previous one, atomically). */
  register(environmentId: string, executorPublicKey: NoisePublicKey): Promise<RegistrationRecord>;
  /** The current registration. */
  registration(environmentId: string): Promise<RegistrationRecord | null>;
  /** Records (or refreshes) that this node holds the executor socket. */
  setSocket(environmentId: string, record: SocketRecord): Promise<void>;
  /** Forgets the socket record if it is still this node's (atomically). */
  clearSocket(environmentId: string, nodeId: string): Promise<void>;
  /** Where the executor socket is. */
  socket(environmentId: string): Promise<SocketRecord | null>;
  /** Issues a single-use authorization for a harness key. */
  authorize(record: AuthorizationRecord): Promise<string>;
  /**
   * Consumes an authorization (atomically: of two nodes racing, exactly one
   * gets it), only if `owner` accepts it; otherwise it stays, unused.
   */
  consume(
    id: string,
    owner?: (record: AuthorizationRecord) => boolean,
  ): Promise<AuthorizationRecord | null>;
  /** Whether the store answers now (for `/readyz`). */
  health(): Promise<{ ok: boolean; detail: string }>;
  /** Closes the store. */
  close(): void;
}

/** SHA-256 hex of a token (what is stored instead of it). */
export async function tokenDigest(text: string): Promise<string> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))
    .toHex();
}

/** A fresh token for `role`. */
export function newToken(role: TokenRole): string {
  return `${role === "executor" ? "exr" : "hns"}_${
    crypto.getRandomValues(new Uint8Array(24)).toHex()
  }`;
}

/** A fresh authorization id. */
export function newAuthorizationId(): string {
  return `hka_${crypto.getRandomValues(new Uint8Array(24)).toHex()}`;
}

/** A fresh registration. */
export function newRegistration(executorPublicKey: NoisePublicKey): RegistrationRecord {
  return { registrationId: `reg_${crypto.randomUUID()}`, executorPublicKey, at: Date.now() };
}

/** Options of `openRelayStore`. */
export interface OpenStoreOptions {
  /** Redis password (overrides one in the URL). */
  readonly password?: string;
  /** Prefix of every Redis key. Default `exec-server:relay:`. */
  readonly keyPrefix?: string;
}
