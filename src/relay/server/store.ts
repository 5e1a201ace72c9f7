/**
 * The relay's state in Deno KV — a local file by default, or a shared
 * remote KV so several relay nodes behind one address agree: tokens (stored
 * as SHA-256 digests), the URL-signing secret, registrations (executor key
 * and registration id per environment), which node holds each executor's
 * socket (refreshed while connected, expiring otherwise), and single-use
 * harness authorizations (60 s).
 *
 * Needs `--unstable-kv` (set in this package's `deno.json`).
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

async function digest(text: string): Promise<string> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))
    .toHex();
}

/** See the module documentation. */
export class RelayStore implements Disposable {
  /** The KV handle. */
  readonly kv: Deno.Kv;

  private constructor(kv: Deno.Kv) {
    this.kv = kv;
  }

  /** Opens `path` (a file or a remote KV URL; default an in-memory store). */
  static async open(path?: string): Promise<RelayStore> {
    if (typeof Deno.openKv !== "function") {
      throw new Error(
        "the relay's store needs Deno KV: run with --unstable-kv " +
          "(deno run -A --unstable-kv …, or deno install … --unstable-kv)",
      );
    }
    return new RelayStore(await Deno.openKv(path ?? ":memory:"));
  }

  /** Creates a token; returns it (only its digest is stored). */
  async createToken(role: TokenRole, environmentId: string): Promise<string> {
    const token = `${role === "executor" ? "exr" : "hns"}_${
      crypto.getRandomValues(new Uint8Array(24)).toHex()
    }`;
    await this.kv.set(
      ["token", await digest(token)],
      { role, environmentId, createdAt: Date.now() } satisfies TokenRecord,
    );
    return token;
  }

  /** Looks a bearer up; `null` when unknown. Returns its digest too. */
  async token(bearer: string): Promise<(TokenRecord & { digest: string }) | null> {
    const d = await digest(bearer);
    const entry = await this.kv.get<TokenRecord>(["token", d]);
    return entry.value ? { ...entry.value, digest: d } : null;
  }

  /** The cluster's URL-signing secret (created once, shared by every node). */
  async secret(): Promise<Uint8Array> {
    const existing = await this.kv.get<Uint8Array>(["secret"]);
    if (existing.value) return existing.value;
    const fresh = crypto.getRandomValues(new Uint8Array(32));
    const result = await this.kv.atomic().check(existing).set(["secret"], fresh).commit();
    if (result.ok) return fresh;
    return (await this.kv.get<Uint8Array>(["secret"])).value!;
  }

  /** Records a registration (replacing the previous one). */
  async register(
    environmentId: string,
    executorPublicKey: NoisePublicKey,
  ): Promise<RegistrationRecord> {
    const record: RegistrationRecord = {
      registrationId: `reg_${crypto.randomUUID()}`,
      executorPublicKey,
      at: Date.now(),
    };
    await this.kv.set(["registration", environmentId], record);
    return record;
  }

  /** The current registration. */
  async registration(environmentId: string): Promise<RegistrationRecord | null> {
    return (await this.kv.get<RegistrationRecord>(["registration", environmentId])).value;
  }

  /** Records (or refreshes) that this node holds the executor socket. */
  async setSocket(environmentId: string, record: SocketRecord): Promise<void> {
    await this.kv.set(["socket", environmentId], record, { expireIn: SOCKET_TTL_MS });
  }

  /** Forgets the socket record if it is still this node's. */
  async clearSocket(environmentId: string, nodeId: string): Promise<void> {
    const entry = await this.kv.get<SocketRecord>(["socket", environmentId]);
    if (entry.value?.nodeId === nodeId) {
      await this.kv.atomic().check(entry).delete(["socket", environmentId]).commit();
    }
  }

  /** Where the executor socket is. */
  async socket(environmentId: string): Promise<SocketRecord | null> {
    return (await this.kv.get<SocketRecord>(["socket", environmentId])).value;
  }

  /** Issues a single-use authorization for a harness key. */
  async authorize(record: AuthorizationRecord): Promise<string> {
    const id = `hka_${crypto.getRandomValues(new Uint8Array(24)).toHex()}`;
    await this.kv.set(["auth", id], record, { expireIn: AUTHORIZATION_TTL_MS });
    return id;
  }

  /**
   * Consumes an authorization (atomically: a second use finds nothing),
   * only if `owner` accepts it; otherwise it stays, unused.
   */
  async consume(
    id: string,
    owner: (record: AuthorizationRecord) => boolean = () => true,
  ): Promise<AuthorizationRecord | null> {
    const entry = await this.kv.get<AuthorizationRecord>(["auth", id]);
    if (!entry.value || !owner(entry.value)) return null;
    const result = await this.kv.atomic().check(entry).delete(["auth", id]).commit();
    return result.ok ? entry.value : null;
  }

  /** Closes the KV handle. */
  close(): void {
    this.kv.close();
  }

  /** Same as {@linkcode close}. */
  [Symbol.dispose](): void {
    this.close();
  }
}
