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
