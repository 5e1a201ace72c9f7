// MCP messages shared by the tests that speak MCP by hand.

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
