/**
 * The relay's state in Redis (or any Redis-protocol server: Valkey,
 * KeyDB…), so relay nodes on several machines share it. Every rule holds
 * across nodes through Redis's own atomicity: the URL-signing secret is set
 * once (`SET NX`); an authorization is consumed by a compare-and-delete
 * script, so of two nodes racing exactly one wins; a socket record is
 * cleared only by the node that holds it (compare-and-delete); records
 * expire with Redis's own TTLs (`PX`), never a sweeper.
 *
 * Commands are not queued while Redis is unreachable: they fail at once
 * with {@linkcode StoreUnavailableError} (the registry answers 503) and the
 * client reconnects by itself. The password (from the URL or given
 * separately) is never logged.
 *
 * @module
 */

import type { NoisePublicKey } from "../../noise/hybrid_ik.ts";
import { redactUrl } from "../../websocket/handshake.ts";
import {
  AUTHORIZATION_TTL_MS,
  type AuthorizationRecord,
  newAuthorizationId,
  newRegistration,
  newToken,
  type OpenStoreOptions,
  type RegistrationRecord,
  type RelayStore,
  SOCKET_TTL_MS,
  type SocketRecord,
  StoreUnavailableError,
  tokenDigest,
  type TokenRecord,
  type TokenRole,
} from "./store.ts";

type Redis = import("ioredis").Redis;

/** Deletes KEYS[1] when its value is ARGV[1]; 1 when it did. */
const DELETE_IF_EQUAL =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/** How long a command may take before the store counts as unavailable. */
const COMMAND_TIMEOUT_MS = 3000;

/** {@linkcode RelayStore} on Redis. */
export class RedisRelayStore implements RelayStore {
  /** See {@linkcode RelayStore.description}. */
  readonly description: string;
  readonly #redis: Redis;
  readonly #prefix: string;

  private constructor(redis: Redis, description: string, prefix: string) {
    this.#redis = redis;
    this.description = description;
    this.#prefix = prefix;
  }

  /** Connects to `url`; fails when Redis does not answer. */
  static async open(url: string, options: OpenStoreOptions = {}): Promise<RedisRelayStore> {
    const { Redis } = await import("ioredis");
    let shown: string;
    try {
      // Without credentials (or a query that could carry them).
      shown = redactUrl(url);
    } catch {
      throw new Error("the relay store URL does not parse");
    }
    const description = `redis ${shown}`;
    const redis = new Redis(url, {
      ...(options.password !== undefined ? { password: options.password } : {}),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: COMMAND_TIMEOUT_MS,
      commandTimeout: COMMAND_TIMEOUT_MS,
      // Reconnect forever, at most every 2 s.
      retryStrategy: (times: number) => Math.min(100 * times, 2000),
    }) as Redis;
    // Errors surface on commands; the client's own event would be unhandled.
    redis.on("error", () => {});
    try {
      await redis.connect();
      await redis.ping();
    } catch (error) {
      redis.disconnect();
      throw new StoreUnavailableError(
        `cannot reach the relay store (${description}): ${(error as Error).message}`,
        { cause: error },
      );
    }
    return new RedisRelayStore(redis, description, options.keyPrefix ?? "exec-server:relay:");
  }

  #key(...parts: string[]): string {
    return this.#prefix + parts.join(":");
  }

  async #run<T>(what: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (error) {
      throw new StoreUnavailableError(
        `relay store (${this.description}) failed to ${what}: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }

  async #getJson<T>(what: string, key: string): Promise<T | null> {
    const text = await this.#run(what, () => this.#redis.get(key));
    return text === null ? null : JSON.parse(text) as T;
  }

  async createToken(role: TokenRole, environmentId: string): Promise<string> {
    const token = newToken(role);
    const record: TokenRecord = { role, environmentId, createdAt: Date.now() };
    await this.#run(
      "store a token",
      async () =>
        await this.#redis.set(this.#key("token", await tokenDigest(token)), JSON.stringify(record)),
    );
    return token;
  }

  async token(bearer: string): Promise<(TokenRecord & { digest: string }) | null> {
    const digest = await tokenDigest(bearer);
    const record = await this.#getJson<TokenRecord>("look a token up", this.#key("token", digest));
    return record ? { ...record, digest } : null;
  }

  async secret(): Promise<Uint8Array> {
    const key = this.#key("secret");
    const fresh = crypto.getRandomValues(new Uint8Array(32)).toBase64();
    await this.#run("create the signing secret", () => this.#redis.set(key, fresh, "NX"));
    const stored = await this.#run("read the signing secret", () => this.#redis.get(key));
    if (stored === null) throw new StoreUnavailableError("the relay store lost its signing secret");
    return Uint8Array.fromBase64(stored);
  }

  async register(
    environmentId: string,
    executorPublicKey: NoisePublicKey,
  ): Promise<RegistrationRecord> {
    const record = newRegistration(executorPublicKey);
    await this.#run(
      "record a registration",
      () => this.#redis.set(this.#key("registration", environmentId), JSON.stringify(record)),
    );
    return record;
  }

  registration(environmentId: string): Promise<RegistrationRecord | null> {
    return this.#getJson("read a registration", this.#key("registration", environmentId));
  }

  async setSocket(environmentId: string, record: SocketRecord): Promise<void> {
    await this.#run(
      "record a socket",
      () =>
        this.#redis.set(
          this.#key("socket", environmentId),
          JSON.stringify(record),
          "PX",
          SOCKET_TTL_MS,
        ),
    );
  }

  async clearSocket(environmentId: string, nodeId: string): Promise<void> {
    const key = this.#key("socket", environmentId);
    const current = await this.#run("read a socket", () => this.#redis.get(key));
    if (current === null || (JSON.parse(current) as SocketRecord).nodeId !== nodeId) return;
    await this.#run("clear a socket", () => this.#redis.eval(DELETE_IF_EQUAL, 1, key, current));
  }

  socket(environmentId: string): Promise<SocketRecord | null> {
    return this.#getJson("read a socket", this.#key("socket", environmentId));
  }

  async authorize(record: AuthorizationRecord): Promise<string> {
    const id = newAuthorizationId();
    await this.#run(
      "issue an authorization",
      () =>
        this.#redis.set(this.#key("auth", id), JSON.stringify(record), "PX", AUTHORIZATION_TTL_MS),
    );
    return id;
  }

  async consume(
    id: string,
    owner: (record: AuthorizationRecord) => boolean = () => true,
  ): Promise<AuthorizationRecord | null> {
    const key = this.#key("auth", id);
    const text = await this.#run("read an authorization", () => this.#redis.get(key));
    if (text === null) return null;
    const record = JSON.parse(text) as AuthorizationRecord;
    if (!owner(record)) return null;
    const deleted = await this.#run(
      "consume an authorization",
      () => this.#redis.eval(DELETE_IF_EQUAL, 1, key, text),
    );
    return deleted === 1 ? record : null;
  }

  async health(): Promise<{ ok: boolean; detail: string }> {
    try {
      await this.#redis.ping();
      return { ok: true, detail: this.description };
    } catch (error) {
      return { ok: false, detail: `${this.description}: ${(error as Error).message}` };
    }
  }

  close(): void {
    this.#redis.disconnect();
  }

  /** Same as `close()`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
