/**
 * `exec-server mcp`: this machine (or a remote exec-server) as MCP tools.
 *
 * @module
 */

import { connect, type ExecServerClient } from "../client/client.ts";
import { inProcessTransport } from "../client/in_process.ts";
import { serveExecToolsHttp, serveExecToolsStdio } from "../mcp/tool_serve.ts";
import { ExecServer } from "../server/exec_server.ts";
import { CONNECTION_FLAGS, connectOptions } from "./client_args.ts";
import {
  commandLogger,
  parseCommand,
  parseDuration,
  parsePositiveInt,
  terminationSignal,
  UsageError,
} from "./common.ts";

/** Help text. */
export const MCP_USAGE = `Usage: exec-server mcp [OPTIONS]

An MCP server (stdio, or Streamable HTTP with --http) whose tools run
commands and work with files: exec_command, write_stdin, terminate_process,
read_text_file, write_file, edit_file, create_directory, list_directory,
search_files, get_file_info, move_file (and list_allowed_directories with
--root). By default the tools act on this machine through an in-process
exec-server; with --url, --remote or --stdio, on that exec-server's environment.

Backing (default: this machine):
  --url <ws://HOST:PORT>       a WebSocket exec-server
  --token-file <PATH>          bearer token for --url or --remote
  --remote <URL> --environment-id <ID>
                               an environment behind a registry + relay (end-to-end
                               encrypted; the harness token comes from --token-file)
  --stdio <"CMD ARGS">         an exec-server spawned with this command

Options:
  --root <DIR>                 confine file tools and command cwds to DIR (repeatable;
                               file operations run sandboxed: writes reach only the roots;
                               commands themselves are not sandboxed)
  --root-check-only            with --root on a server that cannot sandbox file access:
                               check paths only (a path swapped in a race can escape)
  --http <PORT>                Streamable HTTP on http://HOST:PORT/mcp instead of stdio
  --host <HOST>                interface for --http (default 127.0.0.1)
  --idle-timeout <DURATION>    close an idle HTTP session and its commands (default 10m)
  --log-level <LEVEL>          diagnostics on stderr (default warn)

Example (Claude Desktop, Codex, any MCP client):
  {"command": "exec-server", "args": ["mcp", "--root", "/home/me/project"]}
`;

/** Runs `mcp`; returns the exit status. */
export async function runMcp(args: string[]): Promise<number> {
  const parsed = parseCommand({
    args,
    options: {
      ...CONNECTION_FLAGS,
      root: { type: "string", multiple: true },
      "root-check-only": { type: "boolean" },
      http: { type: "string" },
      host: { type: "string" },
      "idle-timeout": { type: "string" },
    },
  }, MCP_USAGE);
  if (!parsed) return 0;
  const flags = parsed.values;
  const roots = flags.root ?? [];
  for (const root of roots) {
    if (!root.startsWith("/")) throw new UsageError(`--root must be absolute, got ${root}`, 2);
  }
  const logger = commandLogger(flags["log-level"], "warn");
  let local: ExecServer | null = null;
  let client: ExecServerClient;
  if (flags.url !== undefined || flags.stdio !== undefined || flags.remote !== undefined) {
    client = await connect(connectOptions(flags));
  } else {
    const server = local = new ExecServer({ logger });
    client = await connect({
      transport: inProcessTransport((c) => server.serve(c, "terminate")),
      clientName: "exec-server-mcp",
      logger,
    });
  }
  const rootsWithoutSandbox = flags["root-check-only"] ?? false;
  try {
    if (
      roots.length > 0 && !rootsWithoutSandbox &&
      !client.environmentInfo?.capabilities.sandboxedFileStreaming
    ) {
      throw new Error(
        "--root needs an exec-server that enforces sandboxed file access (bubblewrap on " +
          "Linux: apt-get install bubblewrap); pass --root-check-only to check paths only",
      );
    }
    if (flags.http === undefined) {
      await serveExecToolsStdio(client, { roots, rootsWithoutSandbox, logger });
      return 0;
    }
    const http = await serveExecToolsHttp(client, {
      roots,
      rootsWithoutSandbox,
      logger,
      port: flags.http === "0" ? 0 : parsePositiveInt("http", flags.http),
      ...(flags.host !== undefined ? { hostname: flags.host } : {}),
      ...(flags["idle-timeout"] !== undefined
        ? { idleTimeoutMs: parseDuration("idle-timeout", flags["idle-timeout"]) }
        : {}),
    });
    // Listen for the signal before saying we are up (a prompt SIGTERM exits 0).
    const signalled = terminationSignal();
    console.error(`exec-server mcp listening on ${http.url}`);
    await signalled;
    await http.close();
    return 0;
  } finally {
    await client.close();
    await local?.close();
  }
}
