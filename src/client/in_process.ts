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

/** What {@linkcode inProcessTransport} needs of a server. */
export interface InProcessServer {
  /** Serves one connection (see `ExecServer.serve`). */
  serve(connection: Connection, onClose: "terminate" | "detach"): Promise<unknown>;
}

/**
 * Returns a `transport` factory for `connect()`: each call opens a fresh
 * pipe pair and hands the server's end to `server` (its processes end with
 * the connection), or to a `serve` function of your own.
 *
 * @example
 * ```ts
 * import { connect, ExecServer, inProcessTransport } from "jsr:@org/exec-server";
 *
 * await using server = new ExecServer();
 * await using client = await connect({ transport: inProcessTransport(server) });
 * const { stdout } = await client.command("echo", { args: ["hi"] }).output();
 * console.log(new TextDecoder().decode(stdout));
 * ```
 */
export function inProcessTransport(
  server: InProcessServer | ((connection: Connection) => Promise<unknown>),
): () => Promise<OpenedTransport> {
  const serve = typeof server === "function"
    ? server
    : (connection: Connection) => server.serve(connection, "terminate");
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
