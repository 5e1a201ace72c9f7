/**
 * The shape of a method implementation: a function from decoded params
 * (plus context) to a result, both typed from the protocol's table, whose
 * decoder it is registered with. Handlers know nothing of transports.
 *
 * @module
 */

import type { RequestContext } from "../jsonrpc/peer.ts";
import type { RawJson } from "../jsonrpc/message.ts";
import type { Decoder } from "../protocol/decode.ts";
import {
  type DecodedParams,
  type MethodName,
  type MethodResult,
  REQUESTS,
} from "../protocol/spec.ts";
import type { ResourceScope } from "./resource_scope.ts";
import type { ServerState } from "./server_state.ts";
import type { Session } from "./session.ts";

/** What happens to a session's processes when its connection drops. */
export type DisconnectPolicy = "terminate" | "detach";

/** What a handler may use of its connection (not the transport). */
export interface HandlerConnection {
  /** Per-connection state (file handles, HTTP streams, watches) and notifications. */
  readonly resources: ResourceScope;
  /** Whether the session outlives the connection. */
  readonly disconnectPolicy: DisconnectPolicy;
}

/** Everything a handler may use. */
export interface HandlerContext {
  /** The server (options, logger, environment). */
  readonly server: ServerState;
  /** The connection's own state (file handles, HTTP streams, watch). */
  readonly connection: HandlerConnection;
  /** The session the connection is attached to. */
  readonly session: Session;
  /** The request (signal, `idle` for long waits). */
  readonly rpc: RequestContext;
}

/** One method: decode, then handle. */
export interface MethodSpec {
  /** Decodes and validates params (throws `-32602`). */
  readonly decode: Decoder<unknown>;
  /** Produces the result (throws RpcError for protocol errors). */
  readonly handle: (params: unknown, ctx: HandlerContext) => unknown;
}

/**
 * The implementation of method `M`: its decoded params in, its result out
 * — both typed from the protocol's table (`protocol/spec.ts`).
 */
export type Handler<M extends MethodName> = (
  params: DecodedParams<M>,
  ctx: HandlerContext,
) => Answer<M> | Promise<Answer<M>>;

/** A result, or — for large payloads — the same result serialised ahead ({@linkcode RawJson}). */
export type Answer<M extends MethodName> = MethodResult<M> | RawJson;

/** Handlers by method name (a handler module's share of the table). */
export type Handlers = { readonly [M in MethodName]?: Handler<M> };

/** The methods `handlers` implement, each with its decoder from the protocol's table. */
export function defineMethods(handlers: Handlers): MethodTable {
  const table: Record<string, MethodSpec> = {};
  for (const [name, handle] of Object.entries(handlers)) {
    table[name] = {
      decode: REQUESTS[name as MethodName].decode,
      handle: handle as (params: unknown, ctx: HandlerContext) => unknown,
    };
  }
  return table;
}

/** A group of methods by name, as a handler module declares them. */
export type MethodTable = Readonly<Record<string, MethodSpec>>;

/**
 * The methods a connection dispatches to, by name. A `Map`, so a method
 * named after an `Object.prototype` member (`constructor`, `toString`,
 * `__proto__`) is unknown like any other name.
 */
export type MethodRegistry = ReadonlyMap<string, MethodSpec>;

/** A family of methods whose handlers load on first use ({@linkcode lazyMethods}). */
export interface LazyMethods {
  /** The family's methods, each loading the handlers on its first call. */
  readonly methods: MethodTable;
  /** Loads the handlers now (once). */
  load(): Promise<MethodTable>;
}

/**
 * Methods `names` whose handlers live in a module evaluated on the first
 * call of any of them (`load`, a literal dynamic import: prefetched with
 * the server's graph, compiled into a `deno compile` binary, but not
 * evaluated before a server's first answer). Calls that arrive while it
 * loads run, in arrival order, once it has. The loaded table must
 * implement exactly `names`.
 */
export function lazyMethods(
  family: string,
  names: readonly string[],
  load: () => Promise<MethodTable>,
): LazyMethods {
  let loaded: MethodTable | null = null;
  let loading: Promise<MethodTable> | null = null;
  const expected = [...names].sort().join(", ");
  const ensure = () =>
    loading ??= load().then((table) => {
      const got = Object.keys(table).sort().join(", ");
      if (got !== expected) {
        throw new Error(`the ${family} handlers implement ${got}, not ${expected}`);
      }
      return (loaded = table);
    });
  const methods: Record<string, MethodSpec> = {};
  for (const name of names) {
    methods[name] = {
      decode: REQUESTS[name as MethodName].decode,
      handle: (params, ctx) =>
        loaded
          ? loaded[name]!.handle(params, ctx)
          : ensure().then((table) => table[name]!.handle(params, ctx)),
    };
  }
  return { methods, load: ensure };
}
