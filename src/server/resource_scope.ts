/**
 * Per-connection state that handlers create on first use (file handles,
 * HTTP body streams, the missing-path watch) and that is released when the
 * connection ends.
 *
 * @module
 */

import type { RawJson } from "../jsonrpc/message.ts";
import type { NotificationName, NotificationParams } from "../protocol/spec.ts";

/** Something that holds resources until disposed. */
export interface Disposable {
  /** Releases everything; called once when the connection ends. */
  dispose(): void | Promise<void>;
}

/** What per-connection state may use of its connection. */
export interface ConnectionContext {
  /**
   * Sends a notification (its payload typed from the protocol's table, or
   * serialised ahead); resolves false when the connection is gone.
   */
  notify<N extends NotificationName>(
    method: N,
    params: NotificationParams<N> | RawJson,
  ): Promise<boolean>;
  /** Null when there is room for more output; else resolves when there is. */
  ready(): Promise<void> | null;
  /** Largest message the client accepts (declared, or the transport's). */
  readonly maxMessageBytes: number;
  /** Aborted when the connection ends. */
  readonly signal: AbortSignal;
}

/** Identifies one kind of per-connection state and how to create it. */
export class ResourceKey<T extends Disposable> {
  /** Creates a key; `create` runs on the first use in each connection. */
  constructor(readonly name: string, readonly create: (connection: ConnectionContext) => T) {}
}

/** The per-connection container. */
export class ResourceScope {
  #items = new Map<ResourceKey<Disposable>, Disposable>();
  #disposed = false;

  /** Creates the scope of one connection. */
  constructor(readonly connection: ConnectionContext) {}

  /** The state for `key`, created on first use. */
  use<T extends Disposable>(key: ResourceKey<T>): T {
    if (this.#disposed) throw new Error("connection resources already released");
    let item = this.#items.get(key as ResourceKey<Disposable>);
    if (!item) {
      item = key.create(this.connection);
      this.#items.set(key as ResourceKey<Disposable>, item);
    }
    return item as T;
  }

  /** Releases every state object. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    const items = [...this.#items.values()];
    this.#items.clear();
    await Promise.allSettled(items.map((i) => i.dispose()));
  }
}
