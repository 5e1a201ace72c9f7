/**
 * A relay node's metrics: registry requests by endpoint and result
 * (registrations, harness connects, validations), rendezvous upgrades by
 * role and outcome, executor sockets and harness streams open on this
 * node, bytes relayed each way, and the store's latency and unavailability
 * by operation. Label values come from fixed sets (the registry's and
 * rendezvous's own error codes); no environment, token, key or address is
 * ever one. Read through {@linkcode RelayMetrics.set} like any of this
 * package's metrics.
 *
 * @module
 */

import { MetricSet, type Series } from "../../telemetry/aggregate.ts";
import { type RelayStore, StoreUnavailableError } from "./store.ts";

/** A registry endpoint as a label. */
export type RegistryRoute = "register" | "validate" | "connect" | "readyz" | "other";

/** Store latency bounds, in seconds (a store answers in well under a second, or is failing). */
const STORE_BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** Operations of the store that are measured (every one a node makes). */
const STORE_OPERATIONS = [
  "createToken",
  "token",
  "secret",
  "register",
  "registration",
  "setSocket",
  "clearSocket",
  "socket",
  "authorize",
  "consume",
  "health",
] as const satisfies ReadonlyArray<keyof RelayStore>;

/**
 * A relay node's measurements (`startRelayServer({ metrics })`).
 *
 * @example
 * ```ts
 * import { RelayMetrics } from "./metrics.ts";
 * const m = new RelayMetrics();
 * m.registryRequest("register", "success");
 * console.log(m.registryRequests.total({ endpoint: "register" })); // 1
 * ```
 */
export class RelayMetrics {
  /** The metrics, in scope `exec-server.relay`. */
  readonly set: MetricSet = new MetricSet("exec-server.relay");
  /** Registry requests by `endpoint` and `result` (`success` or the error code answered). */
  readonly registryRequests: Series = this.set.counter(
    "relay_registry_requests_total",
    "Total number of environment registry requests, by endpoint and result.",
  );
  /** Rendezvous upgrades by `role` and `result` (`accepted` or the rejection reason). */
  readonly upgrades: Series = this.set.counter(
    "relay_rendezvous_upgrades_total",
    "Total number of rendezvous WebSocket upgrades, by role and result.",
  );
  /** Bytes relayed by `direction`. */
  readonly bytes: Series = this.set.counter(
    "relay_bytes_total",
    "Total number of relayed bytes (ciphertext frames), by direction.",
    "By",
  );
  /** Store operation durations by `operation` and `result`. */
  readonly storeDuration: Series = this.set.histogram(
    "relay_store_operation_duration_seconds",
    "Duration of relay store operations in seconds, by operation and result.",
    STORE_BOUNDS,
  );
  /** Store operations that found it unavailable, by `operation`. */
  readonly storeUnavailable: Series = this.set.counter(
    "relay_store_unavailable_total",
    "Total number of relay store operations that failed because the store was unavailable.",
  );

  #live: () => { executors: number; streams: number } = () => ({ executors: 0, streams: 0 });

  /** Starts measuring. */
  constructor() {
    this.set.gauge(
      "relay_executor_sockets",
      "Number of executor sockets connected to this relay node.",
      () => [[{}, this.#live().executors]],
    );
    this.set.gauge(
      "relay_harness_streams",
      "Number of harness streams open through this relay node.",
      () => [[{}, this.#live().streams]],
    );
  }

  /** Reads this node's open sockets from `live` at each collection (the node, once started). */
  track(live: () => { executors: number; streams: number }): void {
    this.#live = live;
  }

  /** A registry request was answered. */
  registryRequest(endpoint: RegistryRoute, result: string): void {
    this.registryRequests.add({ endpoint, result });
  }

  /** A rendezvous upgrade was accepted or refused. */
  upgrade(role: "executor" | "harness" | "unknown", result: string): void {
    this.upgrades.add({ role, result });
  }

  /** Bytes were relayed. */
  relayed(direction: "to_executor" | "to_harness", n: number): void {
    this.bytes.add({ direction }, n);
  }

  /** `store`, with every operation timed and its unavailability counted here. */
  measure(store: RelayStore): RelayStore {
    const timed = (operation: typeof STORE_OPERATIONS[number]) => {
      const original = store[operation] as (...args: unknown[]) => Promise<unknown>;
      return async (...args: unknown[]) => {
        const started = performance.now();
        let result = "success";
        try {
          return await original.apply(store, args);
        } catch (error) {
          result = "error";
          if (error instanceof StoreUnavailableError) this.storeUnavailable.add({ operation });
          throw error;
        } finally {
          this.storeDuration.record({ operation, result }, (performance.now() - started) / 1000);
        }
      };
    };
    return {
      ...Object.fromEntries(STORE_OPERATIONS.map((operation) => [operation, timed(operation)])),
      description: store.description,
      close: () => store.close(),
      [Symbol.dispose]: () => store[Symbol.dispose](),
    } as unknown as RelayStore;
  }
}
