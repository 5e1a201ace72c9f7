// MCP messages shared by the tests that speak MCP by hand, and runners for
// the MCP conformance suite and the `mcp-servers` CLI.

import { type CliRun, runCli } from "./cli.ts";

// A path of its own (not wire_client.ts's): importing this file loads no server.
const ROOT = new URL("../../", import.meta.url).pathname;

/** The MCP `initialize` request a test client sends first. */
export function mcpInitialize(id = 1, clientName = "t"): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: clientName, version: "1" },
    },
  };
}

/** The text of a tool result's content, joined. */
export function textOf(result: unknown): string {
  const content = (result as { content: Array<{ type: string; text?: string }> }).content;
  return content.map((c) => c.text ?? "").join("");
}

/**
 * `deno` arguments that run @modelcontextprotocol/server-everything — pinned
 * in deno.test.json/deno.test.lock and cached before the tests run (`tests/setup.sh`):
 * a missing cache fails at once instead of downloading.
 */
export const EVERYTHING_ARGS: readonly string[] = [
  "run",
  "-A",
  "--cached-only",
  "--config",
  new URL("../../deno.test.json", import.meta.url).pathname,
  "npm:@modelcontextprotocol/server-everything@2026.8.31",
];

/** One check the MCP conformance suite recorded for a scenario. */
export interface ConformanceCheck {
  id: string;
  status: string;
  description?: string;
  errorMessage?: string;
}

function checksIn(dir: string): ConformanceCheck[] {
  for (const entry of Deno.readDirSync(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      const found = checksIn(path);
      if (found.length > 0) return found;
    } else if (entry.name === "checks.json") {
      return JSON.parse(Deno.readTextFileSync(path));
    }
  }
  return [];
}

/**
 * Runs one client scenario of the official MCP conformance suite (pinned in
 * deno.test.json, cached by `tests/setup.sh`) against a client fixture, and
 * returns the checks it recorded with the suite's output for messages.
 */
export async function runConformanceClient(
  fixture: string,
  scenario: string,
  timeoutMs: number,
): Promise<{ checks: ConformanceCheck[]; output: string }> {
  const config = `${ROOT}deno.test.json`;
  const dir = await Deno.makeTempDir();
  try {
    const command = [Deno.execPath(), "run", "-A", "--cached-only", "--config", config, fixture]
      .map((a) => `'${a}'`).join(" ");
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--cached-only",
        "--config",
        config,
        "npm:@modelcontextprotocol/conformance@0.1.16",
        "client",
        "--command",
        command,
        "--scenario",
        scenario,
        "--timeout",
        String(timeoutMs),
        "--output-dir",
        `${dir}/results`,
      ],
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
    }).output();
    const output = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    return { checks: checksIn(`${dir}/results`), output };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Runs `exec-server mcp-servers <args> --config-home <home>` from the source
 * tree, with extra environment variables where given.
 */
export function mcpServersCli(
  args: string[],
  home: string,
  env: Record<string, string> = {},
): Promise<CliRun> {
  return runCli(["mcp-servers", ...args, "--config-home", home], { env });
}
