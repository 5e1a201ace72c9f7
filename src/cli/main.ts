/**
 * Subcommand dispatch for the `exec-server` command line.
 *
 * @module
 */

import { PROXY_BRIDGE_COMMAND } from "../sandbox/proxy_route.ts";
import { runProxyBridge } from "../sandbox/proxy_bridge.ts";
import { VERSION } from "../version.ts";
import { printUsage, UsageError } from "./common.ts";
import { parseServeArgs, runServe, SERVE_USAGE } from "./serve.ts";
import { runExec } from "./exec.ts";
import { runFs, runInfo } from "./fs_cmd.ts";
import { runResponsesProxy } from "./responses_proxy_cmd.ts";
import { runMcpBridge } from "./mcp_bridge_cmd.ts";
import { runMcp } from "./mcp_cmd.ts";
import { runProxy } from "./proxy_cmd.ts";
import { runRelay } from "./relay_cmd.ts";
import { runForward } from "./forward_cmd.ts";
import { runStdioToUds } from "./stdio_to_uds_cmd.ts";
import { runMcpServers } from "./mcp_servers_cmd.ts";

/** Top-level help. */
export const USAGE =
  `exec-server ${VERSION} — execution and integration sidecar servers for coding agents

Usage: exec-server [COMMAND] [OPTIONS]

Commands:
  serve            serve the exec-server protocol on stdio or WebSocket (default)
  exec             run a program on an exec-server (stdout/stderr here, stdin forwarded)
  fs               ls, cat, put, get, stat, rm, mkdir on an exec-server
  info             print an exec-server's environment/info
  relay            self-hostable environment registry + rendezvous relay (encrypted remote mode)
  forward          register a WebSocket exec-server as a remote environment behind a relay
  proxy            egress policy proxy (HTTP + SOCKS5, domain policy, limited mode, MITM)
  mcp              this machine (or an exec-server's environment) as MCP tools
  mcp-bridge       run an MCP stdio server (here or on an exec-server) for MCP clients
  mcp-servers      list, start and call the MCP servers of a Codex configuration
  responses-proxy  loopback Responses API proxy that adds the API key read from stdin
  stdio-to-uds     relay stdio to a Unix domain socket
  help             show this help, or a command's help

Run \`exec-server COMMAND --help\` for a command's options; \`--version\` with any command
prints the version.
`;

type Command = (args: string[]) => Promise<number>;

async function serve(args: string[]): Promise<number> {
  const config = parseServeArgs(args);
  if (config === "help") {
    printUsage(SERVE_USAGE);
    return 0;
  }
  return await runServe(config);
}

const COMMANDS: Record<string, Command> = {
  serve,
  exec: runExec,
  fs: runFs,
  info: runInfo,
  "responses-proxy": runResponsesProxy,
  "mcp-bridge": runMcpBridge,
  "mcp-servers": runMcpServers,
  mcp: runMcp,
  proxy: runProxy,
  relay: runRelay,
  forward: runForward,
  "stdio-to-uds": runStdioToUds,
  // Internal: runs inside a routed sandbox (compiled binaries only; see sandbox/proxy_route.ts).
  [PROXY_BRIDGE_COMMAND]: runProxyBridge,
};

/** Runs the command line; returns the exit status. */
export async function main(args: string[]): Promise<number> {
  const [first, ...rest] = args;
  try {
    // `--version` anywhere before `--` (every command takes it).
    const end = args.indexOf("--");
    const options = end === -1 ? args : args.slice(0, end);
    if (options.includes("--version") || first === "-V") {
      console.log(`exec-server ${VERSION}`);
      return 0;
    }
    if (first === "help" || first === "--help" || first === "-h") {
      const topic = first === "help" ? rest[0] : undefined;
      if (topic !== undefined && COMMANDS[topic]) return await COMMANDS[topic]!(["--help"]);
      console.log(USAGE);
      return 0;
    }
    if (first !== undefined && !first.startsWith("-")) {
      const command = COMMANDS[first];
      if (!command) {
        throw new UsageError(`unknown command \`${first}\`; run \`exec-server help\``, 2);
      }
      return await command(rest);
    }
    return await serve(args);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`Error: ${error.message}`);
      return error.exitCode;
    }
    // Our stdout was closed by a reader that had enough (`| head`).
    if (error instanceof Deno.errors.BrokenPipe) return 0;
    console.error(`Error: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}
