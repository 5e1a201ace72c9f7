/**
 * `exec-server stdio-to-uds SOCKET`: relay stdio to a Unix domain socket.
 *
 * @module
 */

import { relayStdioToUnixSocket } from "../sidecars/stdio_to_uds.ts";
import { parseCommand, UsageError } from "./common.ts";

/** Help text. */
export const STDIO_TO_UDS_USAGE = `Usage: exec-server stdio-to-uds SOCKET_PATH

Relays stdin to the Unix domain socket at SOCKET_PATH and the socket to
stdout. At stdin EOF the socket's write half is shut down; the command exits
when both directions are done (0), or 1 when the socket cannot be reached or
a direction fails.

Example (an MCP client that can only launch stdio servers):
  exec-server stdio-to-uds /run/my-mcp.sock
`;

/** Runs `stdio-to-uds`; returns the exit status. */
export async function runStdioToUds(args: string[]): Promise<number> {
  const parsed = parseCommand({ args, allowPositionals: true, options: {} }, STDIO_TO_UDS_USAGE);
  if (!parsed) return 0;
  const paths = parsed.positionals;
  if (paths.length === 0) {
    throw new UsageError("stdio-to-uds needs SOCKET_PATH: exec-server stdio-to-uds SOCKET_PATH", 2);
  }
  if (paths.length > 1) {
    throw new UsageError(`stdio-to-uds takes one SOCKET_PATH, got ${paths.length} arguments`, 2);
  }
  await relayStdioToUnixSocket(paths[0]!);
  return 0;
}
