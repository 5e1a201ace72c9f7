/**
 * Subcommand dispatch for the `exec-server` command line.
 *
 * @module
 */

import { probeSandboxSupport } from "../sandbox/bwrap.ts";
import { PROXY_BRIDGE_COMMAND } from "../sandbox/self_command.ts";
import { VERSION } from "../version.ts";
import { printUsage, UsageError } from "./common.ts";

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
  // A server's first answer needs the sandbox probe (a bubblewrap run): it
  // runs while the server's modules are evaluated, not after.
  if (!args.includes("--help") && !args.includes("-h")) void probeSandboxSupport();
  const { parseServeArgs, runServe, SERVE_USAGE } = await import("./serve.ts");
  const config = parseServeArgs(args);
  if (config === "help") {
    printUsage(SERVE_USAGE);
    return 0;
  }
  return await runServe(config);
}

/**
 * Every command, loaded when it runs: `serve` (the default) like the
 * others, after its sandbox probe has started; the others' modules (the MCP
 * SDK among them) only for their own command — a server does not hold them
 * in memory or evaluate them. The specifiers are literal, so `deno compile`
 * still includes them.
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: () => Promise.resolve(serve),
  exec: async () => (await import("./exec.ts")).runExec,
  fs: async () => (await import("./fs_cmd.ts")).runFs,
  info: async () => (await import("./fs_cmd.ts")).runInfo,
  "responses-proxy": async () => (await import("./responses_proxy_cmd.ts")).runResponsesProxy,
  "mcp-bridge": async () => (await import("./mcp_bridge_cmd.ts")).runMcpBridge,
  "mcp-servers": async () => (await import("./mcp_servers_cmd.ts")).runMcpServers,
  mcp: async () => (await import("./mcp_cmd.ts")).runMcp,
  proxy: async () => (await import("./proxy_cmd.ts")).runProxy,
  relay: async () => (await import("./relay_cmd.ts")).runRelay,
  forward: async () => (await import("./forward_cmd.ts")).runForward,
  "stdio-to-uds": async () => (await import("./stdio_to_uds_cmd.ts")).runStdioToUds,
  // Internal: runs inside a routed sandbox (compiled binaries only; see sandbox/proxy_route.ts).
  [PROXY_BRIDGE_COMMAND]: async () => (await import("../sandbox/proxy_bridge.ts")).runProxyBridge,
};

/** The loader of command `name` (only the table's own entries: not `constructor`). */
function commandLoader(name: string): (() => Promise<Command>) | undefined {
  return Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
}

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
      const load = topic !== undefined ? commandLoader(topic) : undefined;
      if (load) return await (await load())(["--help"]);
      console.log(USAGE);
      return 0;
    }
    if (first !== undefined && !first.startsWith("-")) {
      const load = commandLoader(first);
      if (!load) {
        throw new UsageError(`unknown command \`${first}\`; run \`exec-server help\``, 2);
      }
      return await (await load())(rest);
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
