/**
 * The shape of the protocol's one table: each family file
 * (`lifecycle.ts`, `process.ts`, `fs.ts`, `http.ts`, `network.ts`) declares
 * its rows — a method's params and result as types (and, where its decoder
 * gives more than the params as sent, the decoded params), its decoder,
 * lane and ordering as values — and `spec.ts` merges them. The
 * server's handlers and the client's calls are typed from the merged table.
 *
 * @module
 */

import type { Decoder } from "./decode.ts";

/** One request method's types: what the client sends, what the server answers. */
export interface Row<Params, Result> {
  /** What the client sends. */
  params: Params;
  /** What the server answers. */
  result: Result;
}

/** How the server treats one request method. */
export interface RequestRow<Decoded> {
  /** Decodes and validates its params (serde's messages, `-32602`). */
  readonly decode: Decoder<Decoded>;
  /** `control`: never waits behind ordinary work (status, signals, closing handles). */
  readonly lane?: "control";
  /**
   * The member naming what the request is about: requests about the same
   * process or handle take effect in arrival order, across lanes.
   */
  readonly orderedBy?: "processId" | "handleId";
  /**
   * The params member whose string is base64 data: in a large message the
   * transport may decode it straight from the bytes, and the decoder then
   * meets a `Base64Part` there (`jsonrpc/large_message.ts`).
   */
  readonly base64?: string;
}

/**
 * A family's rows as values, checked against its rows as types: each
 * decoder gives what `Decoded` names for its method (defaults applied,
 * paths resolved, bytes decoded), or else the params as sent.
 */
export type RequestTable<
  Rows extends { [M in keyof Rows]: Row<unknown, unknown> },
  Decoded = object,
> = {
  readonly [M in keyof Rows]: RequestRow<M extends keyof Decoded ? Decoded[M] : Rows[M]["params"]>;
};

/** An empty object (`{}`), the result of methods that only succeed or fail. */
export type EmptyResult = Record<string, never>;
