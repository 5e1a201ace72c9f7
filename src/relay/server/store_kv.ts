/**
 * The relay's state in Deno KV: a local file, or in memory (single node).
 * Several nodes may share one file on one machine. Needs `--unstable-kv`
 * (set in this package's `deno.json`).
 *
 * @module
 */

import type { NoisePublicKey } from "../../noise/hybrid_ik.ts";
import {
  AUTHORIZATION_TTL_MS,
  type AuthorizationRecord,
  newAuthorizationId,
  newRegistration,
  newToken,
  type RegistrationRecord,
  type RelayStore,
  SOCKET_TTL_MS,
  type SocketRecord,
  tokenDigest,
  type TokenRecord,
  type TokenRole,
} from "./store.ts";

/** {@linkcode RelayStore} on Deno KV. */
export class KvRelayStore implements RelayStore {
  /** The KV handle. */
  readonly kv: Deno.Kv;
  /** See {@linkcode RelayStore.description}. */
  readonly description: string;

  private constructor(kv: Deno.Kv, description: string) {
    this.kv = kv;
    this.description = description;
  }

  /** Opens `path` (a file or a KV URL; default an in-memory store). */
  static async open(path?: string): Promise<KvRelayStore> {
    if (typeof Deno.openKv !== "function") {
      throw new Error(
        "the relay's store needs Deno KV: run with --unstable-kv " +
          "(deno run -A --unstable-kv …, or deno install … --unstable-kv)",
      );
    }
    return new KvRelayStore(
      await Deno.openKv(path ?? ":memory:"),
      path === undefined ? "deno-kv (in memory)" : `deno-kv ${path}`,
    );
  }

  async createToken(role: TokenRole, environmentId: string): Promise<string> {
    const token = newToken(role);
    await this.kv.set(
      ["token", await tokenDigest(token)],
      { role, environmentId, createdAt: Date.now() } satisfies TokenRecord,
    );
    return token;
  }

  async token(bearer: string): Promise<(TokenRecord & { digest: string }) | null> {
    const d = await tokenDigest(bearer);
    const entry = await this.kv.get<TokenRecord>(["token", d]);
    return entry.value ? { ...entry.value, digest: d } : null;
  }

  async secret(): Promise<Uint8Array> {
    const existing = await this.kv.get<Uint8Array>(["secret"]);
    if (existing.value) return existing.value;
    const fresh = crypto.getRandomValues(new Uint8Array(32));
    const result = await this.kv.atomic().check(existing).set(["secret"], fresh).commit();
    if (result.ok) return fresh;
    return (await this.kv.get<Uint8Array>(["secret"])).value!;
  }

  async register(
    environmentId: string,
    executorPublicKey: NoisePublicKey,
  ): Promise<RegistrationRecord> {
    const record = newRegistration(executorPublicKey);
    await this.kv.set(["registration", environmentId], record);
    return record;
  }

  async registration(environmentId: string): Promise<RegistrationRecord | null> {
    return (await this.kv.get<RegistrationRecord>(["registration", environmentId])).value;
  }

  async setSocket(environmentId: string, record: SocketRecord): Promise<void> {
    await this.kv.set(["socket", environmentId], record, { expireIn: SOCKET_TTL_MS });
  }

  async clearSocket(environmentId: string, nodeId: string): Promise<void> {
    const entry = await this.kv.get<SocketRecord>(["socket", environmentId]);
    if (entry.value?.nodeId === nodeId) {
      await this.kv.atomic().check(entry).delete(["socket", environmentId]).commit();
    }
  }

  async socket(environmentId: string): Promise<SocketRecord | null> {
    return (await this.kv.get<SocketRecord>(["socket", environmentId])).value;
  }

  async authorize(record: AuthorizationRecord): Promise<string> {
    const id = newAuthorizationId();
    await this.kv.set(["auth", id], record, { expireIn: AUTHORIZATION_TTL_MS });
    return id;
  }

  async consume(
    id: string,
    owner: (record: AuthorizationRecord) => boolean = () => true,
  ): Promise<AuthorizationRecord | null> {
    const entry = await this.kv.get<AuthorizationRecord>(["auth", id]);
    if (!entry.value || !owner(entry.value)) return null;
    const result = await this.kv.atomic().check(entry).delete(["auth", id]).commit();
    return result.ok ? entry.value : null;
  }

  async health(): Promise<{ ok: boolean; detail: string }> {
    try {
      await this.kv.get(["secret"]);
      return { ok: true, detail: this.description };
    } catch (error) {
      return { ok: false, detail: `${this.description}: ${(error as Error).message}` };
    }
  }

  close(): void {
    this.kv.close();
  }

  /** Same as `close()`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
