/**
 * Serving one connection over stdin/stdout. Logs never go to stdout. At
 * EOF (or an over-long line, or invalid UTF-8) the session's processes are
 * killed and the returned promise resolves.
 *
 * @module
 */

import type { CloseInfo } from "../jsonrpc/connection.ts";
import { ndjsonConnection } from "../jsonrpc/ndjson.ts";
import { BASE64_MEMBERS } from "../protocol/spec.ts";
import type { ByteReader } from "../util/conn_io.ts";
import type { ExecServer } from "./exec_server.ts";

/** Options for {@linkcode serveStdio}. */
export interface StdioServeOptions {
  /** Input bytes. Default: `Deno.stdin` (read directly). */
  readonly input?: ReadableStream<Uint8Array> | ByteReader;
  /** Output bytes. Default: `Deno.stdout.writable`. */
  readonly output?: WritableStream<Uint8Array>;
}

/** Serves `server` over stdio until the input ends. */
export async function serveStdio(
  server: ExecServer,
  options: StdioServeOptions = {},
): Promise<CloseInfo> {
  const connection = ndjsonConnection(
    options.input ?? Deno.stdin,
    options.output ?? Deno.stdout.writable,
    {
      label: "stdio",
      parseErrorPrefix: "failed to parse JSON-RPC message from exec-server stdio",
      outputIsResource: options.output === undefined,
      base64Members: BASE64_MEMBERS,
      // Deno.stdin is fd 0; a long upload grows its pipe.
      ...(options.input === undefined ? { pipeFd: 0 } : {}),
    },
  );
  return await server.serve(connection, "terminate");
}
