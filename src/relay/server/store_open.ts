/**
 * Opens the relay's store by location (see `store.ts`).
 *
 * @module
 */

import type { OpenStoreOptions, RelayStore } from "./store.ts";

/**
 * Opens the store `location` names: `redis://[user:password@]host:port/db`
 * or `rediss://…` (TLS) for Redis; otherwise a Deno KV path (a file, or
 * in memory when omitted).
 */
export async function openRelayStore(
  location?: string,
  options: OpenStoreOptions = {},
): Promise<RelayStore> {
  if (location !== undefined && /^rediss?:\/\//i.test(location)) {
    const { RedisRelayStore } = await import("./store_redis.ts");
    return await RedisRelayStore.open(location, options);
  }
  const { KvRelayStore } = await import("./store_kv.ts");
  return await KvRelayStore.open(location);
}
