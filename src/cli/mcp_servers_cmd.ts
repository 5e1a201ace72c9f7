/**
 * `exec-server mcp-servers list|status|tools|call|login|logout`: the MCP
 * servers of a Codex configuration, run by the MCP runtime — here or in
 * environments named with `--environment` — and OAuth logins to them.
 *
 * @module
 */

import type { ConnectOptions } from "../client/client.ts";
import type { McpServerConfig } from "../mcp/runtime/config.ts";
import { loadMcpRuntimeConfig, type McpRuntimeConfig } from "../mcp/runtime/load.ts";
import { AUTH_STATUS_LABELS, type McpAuthStatus, mcpAuthStatus } from "../mcp/oauth/status.ts";
import { credentialStoreFor } from "../mcp/oauth/session.ts";
import { runMcpLogin, runMcpLogout } from "./mcp_login_cmd.ts";
import { McpConnectionManager, type McpStatusEvent } from "../mcp/runtime/manager.ts";
import type { McpEnvironmentTarget } from "../mcp/runtime/placement.ts";
import { splitCommand } from "./client_args.ts";
import {
  commandLogger,
  onTerminationSignal,
  parseCommand,
  printLine,
  printUsage,
  readSecretFile,
  UsageError,
} from "./common.ts";
import { defaultConfigLocations } from "../codex_config/layers.ts";

/** Help text. */
export const MCP_SERVERS_USAGE = `Usage: exec-server mcp-servers <COMMAND> [OPTIONS]

Runs the MCP servers of a Codex configuration ([mcp_servers.NAME] in config.toml,
with its project layers and -c overrides) the way Codex does: every enabled server
started at once, tools named mcp__SERVER__TOOL and filtered by enabled_tools /
disabled_tools, connector metadata stripped, servers with environment_id placed in
the environments given with --environment.

Commands:
  list                         the configured servers (nothing is started)
  status                       start the enabled servers; print each one's state
  tools [SERVER...]            start them; print the tools on offer
  call SERVER TOOL [JSON]      start SERVER and call TOOL with JSON arguments (default {})
  login SERVER                 log in to an OAuth server (Streamable HTTP); tokens are
                               kept in CODEX_HOME/.credentials.json, shared with Codex
  logout SERVER                remove the stored OAuth credentials of SERVER

Options:
  --config-home <DIR>          Codex home (default: $CODEX_HOME, else ~/.codex)
  -c, --config <key=value>     override a configuration value, like codex -c (repeatable)
  --cd <DIR>                   project directory: project layers, and the working
                               directory of servers without one (default: .)
  --environment <NAME=TARGET>  an exec-server for servers with environment_id = NAME:
                               ws://HOST:PORT[/…] or stdio:"CMD ARGS" (repeatable)
  --environment-token <NAME=FILE>
                               bearer token for a ws:// environment
  --no-cache                   neither read nor write the tool cache
  --json                       JSON on stdout
  --quiet                      no progress on stderr while servers start
  --log-level <LEVEL>          diagnostics on stderr (default warn)

Login options:
  --scopes <a,b>               scopes to ask for (default: the server's configured
                               scopes, else what it asks for, else what it supports)
  --browser-command <CMD>      run CMD URL to open the authorization page (default:
                               the desktop's opener; without one the URL is printed)
  --no-browser                 only print the URL; paste the callback URL back here
  --timeout <DURATION>         how long to wait for the browser (default 5m)
  --oauth-client-registration <auto|cimd|dcr>
                               how the client registers (default auto: a client ID
                               metadata document where supported, else dynamic)

Examples:
  exec-server mcp-servers list
  exec-server mcp-servers tools -c 'mcp_servers.fs.enabled_tools=["read_file"]'
  exec-server mcp-servers call everything echo '{"message":"hi"}'
  exec-server mcp-servers status --environment box=ws://10.0.0.5:7000
  exec-server mcp-servers login linear --scopes read,write
`;

function pairs(flag: string, values: readonly string[] = []): Map<string, string> {
  const out = new Map<string, string>();
  for (const value of values) {
    const eq = value.indexOf("=");
    if (eq <= 0) throw new UsageError(`--${flag} expects NAME=VALUE, got ${value}`, 2);
    out.set(value.slice(0, eq), value.slice(eq + 1));
  }
  return out;
}

function environments(
  targets: Map<string, string>,
  tokens: Map<string, string>,
): Record<string, McpEnvironmentTarget> {
  const out: Record<string, McpEnvironmentTarget> = {};
  for (const name of tokens.keys()) {
    if (!targets.has(name)) {
      throw new UsageError(`--environment-token names unknown environment ${name}`, 2);
    }
  }
  for (const [name, target] of targets) {
    let options: ConnectOptions;
    if (/^wss?:\/\//i.test(target)) {
      const file = tokens.get(name);
      options = {
        url: target,
        clientName: "exec-server-mcp-servers",
        ...(file !== undefined ? { token: readSecretFile("environment-token", file) } : {}),
      };
    } else if (target.startsWith("stdio:")) {
      const [program, ...args] = splitCommand(target.slice("stdio:".length));
      if (program === undefined) {
        throw new UsageError(`--environment ${name}: stdio: needs a command`, 2);
      }
      options = { command: { program, args }, clientName: "exec-server-mcp-servers" };
    } else {
      throw new UsageError(
        `--environment ${name}: expected ws://HOST:PORT or stdio:"CMD ARGS", got ${target}`,
        2,
      );
    }
    Object.defineProperty(out, name, { value: options, enumerable: true });
  }
  return out;
}

/** Codex's `mcp list --json` shape for one server (and `error` when it does not parse). */
function describe(config: McpServerConfig, auth: McpAuthStatus): Record<string, unknown> {
  const t = config.transport;
  return {
    name: config.name,
    enabled: config.enabled,
    ...(config.problem ? { error: config.problem.message } : {}),
    environment_id: config.environmentId,
    transport: t.type === "stdio"
      ? {
        type: "stdio",
        command: t.command,
        args: t.args,
        env: t.env,
        env_vars: t.envVars,
        cwd: t.cwd,
      }
      : {
        type: "streamable_http",
        url: t.url,
        bearer_token_env_var: t.bearerTokenEnvVar,
        http_headers: t.httpHeaders,
        env_http_headers: t.envHttpHeaders,
      },
    startup_timeout_sec: config.startupTimeoutMs === null ? null : config.startupTimeoutMs / 1000,
    tool_timeout_sec: config.toolTimeoutMs === null ? null : config.toolTimeoutMs / 1000,
    enabled_tools: config.enabledTools,
    disabled_tools: config.disabledTools,
    required: config.required,
    auth_status: auth,
  };
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()).join(
    "\n",
  );
}

function progress(quiet: boolean): (event: McpStatusEvent) => void {
  const started = new Map<string, number>();
  const write = (line: string) => {
    if (quiet) return;
    try {
      Deno.stderr.writeSync(new TextEncoder().encode(line + "\n"));
    } catch { /* stderr gone */ }
  };
  return (event) => {
    if (event.state === "starting") {
      started.set(event.server, performance.now());
      write(`… ${event.server} starting`);
      return;
    }
    const ms = Math.round(performance.now() - (started.get(event.server) ?? performance.now()));
    if (event.state === "ready") write(`✓ ${event.server} ready (${ms} ms)`);
    else if (event.state === "failed") write(`✗ ${event.server} failed: ${event.error}`);
    else if (event.state === "cancelled") write(`✗ ${event.server} cancelled`);
  };
}

function textOf(result: Record<string, unknown>): string {
  const content = Array.isArray(result.content) ? result.content : [];
  return content.map((c: Record<string, unknown>) =>
    c.type === "text" ? String(c.text) : JSON.stringify(c)
  ).join("\n");
}

/** Runs `mcp-servers`; returns the exit status. */
export async function runMcpServers(args: string[]): Promise<number> {
  const parsed = parseCommand({
    args,
    allowPositionals: true,
    options: {
      "config-home": { type: "string" },
      config: { type: "string", short: "c", multiple: true },
      cd: { type: "string" },
      environment: { type: "string", multiple: true },
      "environment-token": { type: "string", multiple: true },
      "no-cache": { type: "boolean" },
      json: { type: "boolean" },
      quiet: { type: "boolean" },
      "log-level": { type: "string" },
      scopes: { type: "string" },
      "browser-command": { type: "string" },
      "no-browser": { type: "boolean" },
      timeout: { type: "string" },
      "oauth-client-registration": { type: "string" },
    },
  }, MCP_SERVERS_USAGE);
  if (!parsed) return 0;
  const flags = parsed.values;
  const [command, ...rest] = parsed.positionals;
  if (command === undefined) {
    printUsage(MCP_SERVERS_USAGE);
    return 2;
  }
  if (!["list", "status", "tools", "call", "login", "logout"].includes(command)) {
    throw new UsageError(`unknown mcp-servers command: ${command}`, 2);
  }
  const cwd = flags.cd ?? Deno.cwd();
  const codexHome = flags["config-home"] ?? defaultConfigLocations().codexHome;
  let runtime: McpRuntimeConfig;
  try {
    runtime = await loadMcpRuntimeConfig({ codexHome, cwd, overrides: flags.config ?? [] });
  } catch (error) {
    console.error(`Error: ${(error as Error).message}`);
    return 1;
  }
  const servers = runtime.servers;
  const json = flags.json ?? false;

  if (command === "login" || command === "logout") {
    if (rest.length !== 1) throw new UsageError(`${command} needs SERVER`, 2);
    const server = servers.find((s) => s.name === rest[0]);
    if (!server) {
      console.error(`Error: No MCP server named '${rest[0]}' found.`);
      return 1;
    }
    if (command === "logout") return await runMcpLogout(server, runtime.oauth, codexHome);
    return await runMcpLogin(server, runtime.oauth, codexHome, {
      ...(flags.scopes !== undefined ? { scopes: flags.scopes } : {}),
      ...(flags["browser-command"] !== undefined
        ? { browserCommand: flags["browser-command"] }
        : {}),
      ...(flags["no-browser"] ? { noBrowser: true } : {}),
      ...(flags.timeout !== undefined ? { timeout: flags.timeout } : {}),
      ...(flags["oauth-client-registration"] !== undefined
        ? { registration: flags["oauth-client-registration"] }
        : {}),
    });
  }

  if (command === "list") {
    let store: ReturnType<typeof credentialStoreFor> | null = null;
    try {
      store = credentialStoreFor(codexHome, runtime.oauth);
    } catch { /* every HTTP server's auth is then unknown */ }
    const auth = await Promise.all(
      servers.map((s) =>
        s.problem ? "unknown" as const : store ? mcpAuthStatus(s, { store }) : Promise.resolve(
          s.transport.type === "stdio" ? "unsupported" as const : "unknown" as const,
        )
      ),
    );
    if (json) {
      await printLine(JSON.stringify(servers.map((s, i) => describe(s, auth[i]!)), null, 2));
    } else if (servers.length === 0) await printLine("No MCP servers configured.");
    else {
      await printLine(table([
        ["Name", "Transport", "Command / URL", "Environment", "Status", "Auth"],
        ...servers.map((s, i) => [
          s.name,
          s.transport.type,
          s.transport.type === "stdio"
            ? [s.transport.command, ...s.transport.args].join(" ")
            : s.transport.url,
          s.environmentId,
          s.problem ? "invalid" : s.enabled ? "enabled" : "disabled",
          AUTH_STATUS_LABELS[auth[i]!],
        ]),
      ]));
      const invalid = servers.filter((s) => s.problem);
      if (invalid.length > 0) await printLine("");
      for (const s of invalid) {
        await printLine(`${s.name}: ${s.problem!.message.replace(/\s*\n\s*/g, " ")}`);
      }
    }
    return 0;
  }

  let selected = servers;
  if (command === "call" || (command === "tools" && rest.length > 0)) {
    const wanted = command === "call" ? rest.slice(0, 1) : rest;
    if (wanted.length === 0) throw new UsageError("call needs SERVER TOOL [JSON]", 2);
    for (const name of wanted) {
      if (!servers.some((s) => s.name === name)) {
        console.error(`Error: unknown MCP server '${name}'`);
        return 1;
      }
    }
    selected = servers.filter((s) => wanted.includes(s.name));
  }
  let callArgs: unknown = {};
  if (command === "call") {
    if (rest.length < 2 || rest.length > 3) {
      throw new UsageError("call needs SERVER TOOL [JSON]", 2);
    }
    try {
      callArgs = rest[2] === undefined ? {} : JSON.parse(rest[2]);
    } catch (error) {
      throw new UsageError(`the tool arguments are not JSON: ${(error as Error).message}`, 2);
    }
  }

  const logger = commandLogger(flags["log-level"], "warn");
  const manager = McpConnectionManager.start({
    servers: selected,
    environments: environments(
      pairs("environment", flags.environment),
      pairs("environment-token", flags["environment-token"]),
    ),
    fallbackCwd: cwd,
    codexHome,
    ...(flags["no-cache"] ? { toolCache: null } : {}),
    onStatus: progress(flags.quiet ?? false),
    oauth: { settings: runtime.oauth },
    logger,
  });
  const removeSignals = onTerminationSignal(() => void manager.shutdown());
  try {
    const summary = await manager.startupComplete;
    if (command === "status") {
      const status = manager.status();
      if (json) await printLine(JSON.stringify(status, null, 2));
      else {
        await printLine(table([
          ["Name", "State", "Auth", "Tools", "Server", "Detail"],
          ...status.map((s) => [
            s.name,
            s.state,
            s.auth,
            s.fromCache ? `${s.toolCount} (cached)` : String(s.toolCount),
            s.serverInfo ? `${s.serverInfo.name ?? ""} ${s.serverInfo.version ?? ""}`.trim() : "",
            (s.error ?? "").split("\n")[0]!,
          ]),
        ]));
      }
      return summary.failed.length > 0 ? 1 : 0;
    }
    if (command === "tools") {
      const tools = manager.listTools();
      if (json) {
        await printLine(JSON.stringify(
          tools.map((t) => ({
            name: t.qualifiedName,
            server: t.server,
            tool: t.tool,
            description: t.definition.description ?? null,
            inputSchema: t.definition.inputSchema ?? null,
          })),
          null,
          2,
        ));
      } else {
        for (const t of tools) {
          const description = String(t.definition.description ?? "").split("\n")[0]!;
          await printLine(description ? `${t.qualifiedName}  ${description}` : t.qualifiedName);
        }
      }
      return summary.requiredFailed.length > 0 ? 1 : 0;
    }
    const [server, tool] = rest as [string, string];
    if (summary.failed.length > 0) {
      console.error(`Error: ${summary.failed[0]!.error}`);
      return 1;
    }
    try {
      const result = await manager.callTool({ server, tool }, callArgs);
      await printLine(json ? JSON.stringify(result, null, 2) : textOf(result));
      return result.isError === true ? 1 : 0;
    } catch (error) {
      console.error(`Error: ${(error as Error).message}`);
      return 1;
    }
  } finally {
    removeSignals();
    await manager.shutdown();
  }
}
