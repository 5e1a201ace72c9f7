/**
 * The shape of a method implementation: a decoder for its params and a
 * function from decoded params (plus context) to a result. Handlers know
 * nothing of transports.
 *
 * @module
 */

import type { RequestContext } from "../jsonrpc/peer.ts";
import type { Decoder } from "../protocol/decode.ts";
import type { ServerConnection } from "./connection.ts";
import type { ServerState } from "./server_state.ts";
import type { Session } from "./session.ts";

/** Everything a handler may use. */
export interface HandlerContext {
  /** The server (options, logger, environment). */
  readonly server: ServerState;
  /** The connection's own state (file handles, HTTP streams, watch). */
  readonly connection: ServerConnection;
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

/** Declares a method with typed params. */
export function defineMethod<P>(
  decode: Decoder<P>,
  handle: (params: P, ctx: HandlerContext) => unknown,
): MethodSpec {
  return { decode, handle: handle as (params: unknown, ctx: HandlerContext) => unknown };
}

/** A table of methods by name. */
export type MethodTable = Readonly<Record<string, MethodSpec>>;
