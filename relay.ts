/**
 * Encrypted remote mode: the registry + rendezvous relay server, the
 * executor that registers an environment with it, and the Noise hybrid IK
 * handshake between harness and executor.
 *
 * @example Run a relay on loopback
 * ```ts ignore
 * import { startRelayServer } from "jsr:@org/exec-server/relay";
 *
 * const relay = await startRelayServer({ hostname: "127.0.0.1", port: 0 });
 * console.log(relay.url);
 * ```
 *
 * @module
 */

export {
  RendezvousError,
  type RendezvousProvider,
  rendezvousTransport,
} from "./src/client/rendezvous.ts";
export { RemoteExecutor, type RemoteExecutorOptions } from "./src/relay/executor/executor.ts";
export {
  type RelayServer,
  type RelayServerOptions,
  startRelayServer,
} from "./src/relay/server/relay_server.ts";
export {
  type AuthorizationRecord,
  type OpenStoreOptions,
  type RegistrationRecord,
  type RelayStore,
  type SocketRecord,
  StoreUnavailableError,
  type TokenRecord,
  type TokenRole,
} from "./src/relay/server/store.ts";
export { KvRelayStore } from "./src/relay/server/store_kv.ts";
export { openRelayStore } from "./src/relay/server/store_open.ts";
export {
  type ConnectBundle,
  type Registration,
  type RegistryEndpoint,
  RegistryError,
  type ValidationResult,
} from "./src/relay/wire/registry_client.ts";
export {
  decodePublicKey,
  encodePublicKey,
  generateIdentity,
  NOISE_PROTOCOL_NAME,
  NOISE_SUITE,
  type NoiseIdentity,
  type NoisePublicKey,
  SECURITY_PROFILE,
} from "./src/noise/hybrid_ik.ts";
export type { LocalKey, RemoteKey } from "./src/noise/handshake.ts";
export { type DhKeyPair, type KemKeyPair, loadNoiseCrypto } from "./src/noise/primitives.ts";
export {
  bridgeConnections,
  forwardingServer,
  type ForwardOptions,
  type StreamServer,
} from "./src/relay/executor/forward.ts";
export { type RegistryRoute, RelayMetrics } from "./src/relay/server/metrics.ts";
