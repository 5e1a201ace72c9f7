// MCP servers inside an environment: the launcher (local and through an
// exec-server), the environment rules, and `mcp-bridge` on stdio and on
// Streamable HTTP (one server process per session), driven by the MCP SDK's
// own client.

import { Client } from "@modelcontextprotocol/sdk/client";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { connect } from "../../src/client/client.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { localMcpEnv, remoteMcpEnv } from "../../src/mcp/env.ts";
import { serveMcpBridgeHttp } from "../../src/mcp/bridge_server.ts";
import { launchMcpServer } from "../../src/mcp/launcher.ts";
import { validateMcpServerName } from "../../src/mcp/server_spec.ts";
import type { McpServerSpec } from "../../src/mcp/server_spec.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/assert.ts";
import { CLI, isDead, ROOT, waitFor } from "../helpers/wire_client.ts";
import { EVERYTHING_ARGS, textOf } from "../helpers/mcp.ts";

const MEMORY_SERVER = `${ROOT}tests/fixtures/mcp_memory_server.ts`;

function memorySpec(extra: Partial<McpServerSpec> = {}): McpServerSpec {
  return {
    name: "memory",
    command: Deno.execPath(),
    args: ["run", "-A", "--config", `${ROOT}deno.json`, MEMORY_SERVER],
    ...extra,
  };
}

function newClient(): Client {
  return new Client({ name: "bridge-test", version: "1.0.0" });
}

Deno.test("mcp: server names follow the runtime rule, with the reference's message", () => {
  validateMcpServerName("docs_server-2");
  const error = assertThrows(() => validateMcpServerName("bad name!"));
  assertEquals(
    error.message,
    "Invalid MCP server name 'bad name!': must match pattern ^[a-zA-Z0-9_-]+$",
  );
});

Deno.test("mcp: local and remote environments follow the reference's rules", () => {
  const host = { HOME: "/h", PATH: "/bin", API_KEY: "k", EXTRA: "e", OTHER: "o" };
  const spec: McpServerSpec = { name: "s", command: "x", envVars: ["EXTRA"], env: { PATH: "/p" } };
  assertEquals(localMcpEnv(spec, host), { HOME: "/h", PATH: "/p", EXTRA: "e" });
  const remote = remoteMcpEnv(spec, host);
  assertEquals(remote.env, { EXTRA: "e", PATH: "/p" });
  assertEquals(remote.envPolicy.inherit, "core");
  assertEquals(remote.envPolicy.ignoreDefaultExcludes, true);
  assertEquals(remote.envPolicy.includeOnly, []);
  const named = remoteMcpEnv({ ...spec, envVars: [{ name: "GPU_ID", source: "remote" }] }, host);
  assertEquals(named.envPolicy.inherit, "all");
  assert(
    named.envPolicy.includeOnly.includes("GPU_ID") && named.envPolicy.includeOnly.includes("PATH"),
  );
  assertEquals(named.env, { PATH: "/p" });
  const error = assertThrows(() =>
    localMcpEnv({ ...spec, envVars: [{ name: "GPU_ID", source: "remote" }] }, host)
  );
  assertEquals(
    error.message,
    "env_vars entry `GPU_ID` uses source `remote`, which requires remote MCP stdio",
  );
});

Deno.test("mcp launcher: a local server sees only its built environment and its cwd", async () => {
  Deno.env.set("MCP_TEST_SECRET_TOKEN", "leak");
  const dir = await Deno.makeTempDir();
  const transport = await launchMcpServer(
    memorySpec({ env: { GIVEN: "yes" } }),
    { fallbackCwd: dir, logger: nullLogger },
  );
  const client = newClient();
  try {
    await client.connect(transport);
    const env = async (name: string) =>
      textOf(await client.callTool({ name: "env", arguments: { name } }));
    assertEquals(await env("GIVEN"), "yes");
    assertEquals(await env("MCP_TEST_SECRET_TOKEN"), "<unset>");
    assertEquals(await env("HOME"), Deno.env.get("HOME"));
    assertEquals(textOf(await client.callTool({ name: "cwd" })), await Deno.realPath(dir));
  } finally {
    Deno.env.delete("MCP_TEST_SECRET_TOKEN");
    await client.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mcp launcher: a server that dies mid-call fails the call instead of hanging", async () => {
  const transport = await launchMcpServer(memorySpec(), { logger: nullLogger });
  const client = newClient();
  try {
    await client.connect(transport);
    await assertRejects(() => client.callTool({ name: "crash" }));
  } finally {
    await client.close();
  }
});

Deno.test("mcp launcher: an oversized message line closes the transport and stops the server", async () => {
  const transport = await launchMcpServer(memorySpec(), {
    logger: nullLogger,
    maxLineBytes: 64 * 1024,
  });
  const client = newClient();
  try {
    await client.connect(transport);
    assertEquals(
      textOf(await client.callTool({ name: "big", arguments: { bytes: 1000 } })).length,
      1000,
    );
    const pid = Number(textOf(await client.callTool({ name: "pid" })));
    await assertRejects(() => client.callTool({ name: "big", arguments: { bytes: 200_000 } }));
    assert(await waitFor(() => isDead(pid) ? true : null), "server still running");
  } finally {
    await client.close();
  }
});

Deno.test("mcp launcher: remote launches need an absolute cwd", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  const client = await connect({ url: listener.url });
  try {
    await assertRejects(
      () => launchMcpServer(memorySpec(), { client }),
      Error,
      "executor stdio server requires an explicit cwd",
    );
    await assertRejects(
      () => launchMcpServer(memorySpec({ cwd: "rel/dir" }), { client }),
      Error,
      "remote stdio MCP server `memory` requires an absolute cwd, got `rel/dir`",
    );
    await assertRejects(
      () => launchMcpServer(memorySpec({ name: "no spaces" }), { client }),
      Error,
      "Invalid MCP server name",
    );
  } finally {
    await client.close();
    await listener.close();
    await server.close();
  }
});

Deno.test({
  name: "mcp-bridge: server-everything on a remote exec-server, over stdio, with the SDK client",
  // The SDK's StdioClientTransport.close() leaves a kill timer behind.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = new ExecServer({ logger: nullLogger });
    const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
    const dir = await Deno.makeTempDir();
    const transport = new StdioClientTransport({
      command: Deno.execPath(),
      args: [
        "run",
        "-A",
        CLI,
        "mcp-bridge",
        "--url",
        listener.url,
        "--cwd",
        dir,
        "--name",
        "everything",
        "--",
        Deno.execPath(),
        ...EVERYTHING_ARGS,
      ],
      stderr: "ignore",
    });
    const client = newClient();
    try {
      await client.connect(transport);
      assertEquals(client.getServerVersion()?.name, "mcp-servers/everything");
      const tools = (await client.listTools()).tools.map((t) => t.name);
      assert(tools.includes("echo"), tools.join());
      assertEquals(
        textOf(
          await client.callTool({ name: "echo", arguments: { message: "through the bridge" } }),
        ),
        "Echo: through the bridge",
      );
      const sum = await client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } });
      assert(textOf(sum).includes("42"), textOf(sum));
      // The server really runs under the exec-server.
      assertEquals(server.sessionCount, 1);
    } finally {
      await client.close();
      await listener.close();
      await server.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("mcp-bridge --http: concurrent sessions get their own server and never see each other", async () => {
  const http = await serveMcpBridgeHttp(memorySpec(), { port: 0, logger: nullLogger });
  const a = newClient();
  const b = newClient();
  const logsA: string[] = [];
  const logsB: string[] = [];
  const { LoggingMessageNotificationSchema } = await import("@modelcontextprotocol/sdk/types.js");
  a.setNotificationHandler(
    LoggingMessageNotificationSchema,
    (n) => void logsA.push(String(n.params.data)),
  );
  b.setNotificationHandler(
    LoggingMessageNotificationSchema,
    (n) => void logsB.push(String(n.params.data)),
  );
  try {
    await Promise.all([
      a.connect(new StreamableHTTPClientTransport(new URL(http.url))),
      b.connect(new StreamableHTTPClientTransport(new URL(http.url))),
    ]);
    assertEquals(http.sessionCount, 2);
    await Promise.all([
      a.callTool({ name: "remember", arguments: { value: "alpha" } }),
      b.callTool({ name: "remember", arguments: { value: "beta" } }),
    ]);
    assertEquals(textOf(await a.callTool({ name: "recall" })), "alpha");
    assertEquals(textOf(await b.callTool({ name: "recall" })), "beta");
    const pidA = textOf(await a.callTool({ name: "pid" }));
    const pidB = textOf(await b.callTool({ name: "pid" }));
    assert(pidA !== pidB, "sessions share a process");
    assertEquals(logsA, ["remembered alpha"]);
    assertEquals(logsB, ["remembered beta"]);
    // Ending a session stops its server only.
    await (a.transport as StreamableHTTPClientTransport).terminateSession();
    assert(await waitFor(() => isDead(Number(pidA)) ? true : null));
    assert(!isDead(Number(pidB)));
    assertEquals(textOf(await b.callTool({ name: "recall" })), "beta");
  } finally {
    await a.close();
    await b.close();
    await http.close();
  }
});

Deno.test("mcp-bridge --http: idle sessions are closed and their servers stopped", async () => {
  // Idle means no request for this long: on a loaded machine the SDK's
  // own initialize → initialized → tools/call gaps took over 300 ms.
  const http = await serveMcpBridgeHttp(memorySpec(), {
    port: 0,
    idleTimeoutMs: 2000,
    logger: nullLogger,
  });
  const client = newClient();
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    const pid = Number(textOf(await client.callTool({ name: "pid" })));
    assert(await waitFor(() => http.sessionCount === 0 ? true : null));
    assert(await waitFor(() => isDead(pid) ? true : null));
    // A request on the forgotten session is a 404, which the SDK reports.
    await assertRejects(() => client.callTool({ name: "pid" }));
  } finally {
    await client.close();
    await http.close();
  }
});

Deno.test("mcp-bridge --http: stray requests are refused without starting anything", async () => {
  const http = await serveMcpBridgeHttp(memorySpec(), { port: 0, logger: nullLogger });
  try {
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(http.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: JSON.stringify(body),
      });
    const list = await post({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    assertEquals(list.status, 400);
    await list.body?.cancel();
    const unknown = await post({ jsonrpc: "2.0", id: 1, method: "tools/list" }, {
      "mcp-session-id": "nope",
    });
    assertEquals(unknown.status, 404);
    await unknown.body?.cancel();
    const foreign = await post({ jsonrpc: "2.0", id: 1, method: "initialize" }, {
      origin: "https://evil.example",
    });
    assertEquals(foreign.status, 403);
    await foreign.body?.cancel();
    assertEquals(http.sessionCount, 0);
  } finally {
    await http.close();
  }
});

/** A raw `initialize` POST, as a client that never sends DELETE would send it. */
function initializePost(url: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "flood", version: "1" },
      },
    }),
  });
}

Deno.test("mcp-bridge --http: sessions are capped; past the cap a 503 with Retry-After, nothing in use is touched", async () => {
  const http = await serveMcpBridgeHttp(memorySpec(), {
    port: 0,
    maxSessions: 3,
    idleTimeoutMs: 60_000,
    logger: nullLogger,
  });
  const inUse = newClient();
  try {
    await inUse.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    const pid = Number(textOf(await inUse.callTool({ name: "pid" })));
    // A client that opens sessions and never ends them: 5 initializes at once.
    const floods = await Promise.all(Array.from({ length: 5 }, () => initializePost(http.url)));
    const statuses = floods.map((r) => r.status).sort();
    assertEquals(statuses, [200, 200, 503, 503, 503]);
    for (const r of floods) {
      if (r.status === 503) {
        const retry = Number(r.headers.get("retry-after"));
        assert(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
        const body = await r.json();
        assertEquals(body.error.code, -32000);
        assert(body.error.message.includes("3 sessions are open"), body.error.message);
      } else {
        await r.body?.cancel();
      }
    }
    assertEquals(http.sessionCount, 3);
    // The session in use still works, its server untouched.
    assert(!isDead(pid));
    assertEquals(Number(textOf(await inUse.callTool({ name: "pid" }))), pid);
    // Ending one makes room.
    const sessionId = floods.find((r) => r.status === 200)!.headers.get("mcp-session-id")!;
    const deleted = await fetch(http.url, {
      method: "DELETE",
      headers: { "mcp-session-id": sessionId },
    });
    assertEquals(deleted.status, 200);
    await deleted.body?.cancel();
    assert(await waitFor(() => http.sessionCount === 2 ? true : null));
    const again = await initializePost(http.url);
    assertEquals(again.status, 200);
    await again.body?.cancel();
  } finally {
    await inUse.close();
    await http.close();
  }
});

Deno.test("mcp-bridge --http: PUT and PATCH are 405 with Allow, with a session and without", async () => {
  const http = await serveMcpBridgeHttp(memorySpec(), { port: 0, logger: nullLogger });
  const client = newClient();
  try {
    const transport = new StreamableHTTPClientTransport(new URL(http.url));
    await client.connect(transport);
    for (const method of ["PUT", "PATCH"]) {
      for (const session of [null, transport.sessionId!]) {
        const r = await fetch(http.url, {
          method,
          headers: session ? { "mcp-session-id": session } : {},
          body: "{}",
        });
        assertEquals([r.status, r.headers.get("allow")], [405, "GET, POST, DELETE"], method);
        await r.body?.cancel();
      }
    }
    assertEquals(http.sessionCount, 1);
  } finally {
    await client.close();
    await http.close();
  }
});
