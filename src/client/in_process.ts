/**
 * A client transport to a server in this same process: two in-memory byte
 * pipes carrying NDJSON, so the server sees an ordinary connection (limits,
 * backpressure and all) and nothing leaves the process.
 *
 * @module
 */

import type { Connection } from "../jsonrpc/connection.ts";
import { ndjsonConnection } from "../jsonrpc/ndjson.ts";
import type { OpenedTransport } from "./transports.ts";

/**
 * Returns a `transport` factory for `connect()`: each call opens a fresh
 * pipe pair and hands the server's end to `serve` (e.g.
 * `(c) => server.serve(c, "terminate")`).
 */
export function inProcessTransport(
  serve: (connection: Connection) => Promise<unknown>,
): () => Promise<OpenedTransport> {
  return () => {
    const up = new TransformStream<Uint8Array, Uint8Array>();
    const down = new TransformStream<Uint8Array, Uint8Array>();
    const serverSide = ndjsonConnection(up.readable, down.writable, { label: "in-process" });
    const served = serve(serverSide);
    const clientSide = ndjsonConnection(down.readable, up.writable, { label: "in-process" });
    return Promise.resolve({
      connection: clientSide,
      label: "in-process",
      async close() {
        clientSide.close("client closed");
        serverSide.close("client closed");
        await served.catch(() => {});
      },
    });
  };
}
