// The MCP runtime: Codex-shaped server configurations, placement rules,
// the connection manager over real servers (a tiny SDK-less fixture for the
// edge cases, @modelcontextprotocol/server-everything for the real thing)
// placed here, through our exec-server, through the reference's and
// through the relay; tool names, the trust boundary and the tool cache.

import { relayedServer } from "../helpers/relay.ts";
import { createHash } from "node:crypto";
import { nullLogger } from "../../src/log/logger.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import { serverKinds, startWsServer } from "../helpers/ws_server.ts";
import {
  LOCAL_ENVIRONMENT_ID,
  McpConfigError,
  type McpServerConfig,
  parseMcpServerConfig,
  parseMcpServers,
} from "../../src/mcp/runtime/config.ts";
import { loadMcpServerConfigs } from "../../src/mcp/runtime/load.ts";
import { type McpEnvironmentTarget, resolvePlacement } from "../../src/mcp/runtime/placement.ts";
import { McpConnectionManager, type McpStatusEvent } from "../../src/mcp/runtime/manager.ts";
import { qualifyToolNames } from "../../src/mcp/runtime/tool_names.ts";
import { stripConnectorMeta } from "../../src/mcp/runtime/connector_meta.ts";
import { ToolCache } from "../../src/mcp/runtime/tool_cache.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/assert.ts";
import {
  eventually,
  freePort,
  isDead,
  memoryLogger,
  ourStdioCommand,
  ROOT,
  waitFor,
} from "../helpers/wire_client.ts";
import {
  EVERYTHING_ARGS,
  mcpServersCli as cli,
  runConformanceClient,
  textOf,
} from "../helpers/mcp.ts";
import type { TomlTable } from "../../src/codex_config/toml_write.ts";

const TINY = `${ROOT}tests/fixtures/mcp_tiny_server.ts`;

function tiny(
  name: string,
  extra: TomlTable = {},
  env: Record<string, string> = {},
): McpServerConfig {
  return parseMcpServerConfig(name, {
    command: Deno.execPath(),
    args: ["run", "-A", "--no-config", TINY],
    env: { TINY_NAME: name, ...env },
    startup_timeout_sec: 60,
    ...extra,
  });
}

function everything(name = "everything", extra: TomlTable = {}): McpServerConfig {
  return parseMcpServerConfig(name, {
    command: Deno.execPath(),
    args: [...EVERYTHING_ARGS],
    startup_timeout_sec: 120,
    ...extra,
  });
}

function configError(fn: () => unknown): McpConfigError {
  try {
    fn();
  } catch (error) {
    assert(error instanceof McpConfigError, String(error));
    return error;
  }
  throw new Error("expected a configuration error");
}

// ---------------------------------------------------------------------------
// Configuration

Deno.test("mcp config: wrong types, foreign keys and missing transports are exact errors naming the key", () => {
  const cases: Array<[TomlTable, string, string]> = [
    [{ command: 5n }, "invalid type: integer `5`, expected a string", "mcp_servers.a.command"],
    [
      { command: "x", args: "x" },
      'invalid type: string "x", expected a sequence',
      "mcp_servers.a.args",
    ],
    [
      { command: "x", args: [true] },
      "invalid type: boolean `true`, expected a string",
      "mcp_servers.a.args",
    ],
    [{ command: "x", env: 5n }, "invalid type: integer `5`, expected a map", "mcp_servers.a.env"],
    [
      { command: "x", enabled: "x" },
      'invalid type: string "x", expected a boolean',
      "mcp_servers.a.enabled",
    ],
    [
      { command: "x", cwd: 1.5 },
      "invalid type: floating point `1.5`, expected a string",
      "mcp_servers.a.cwd",
    ],
    [
      { command: "x", startup_timeout_sec: "x" },
      'invalid type: string "x", expected f64',
      "mcp_servers.a.startup_timeout_sec",
    ],
    [
      { command: "x", startup_timeout_ms: -1n },
      "invalid value: integer `-1`, expected u64",
      "mcp_servers.a.startup_timeout_ms",
    ],
    [
      { command: "x", tool_timeout_sec: -1 },
      "cannot convert float seconds to Duration: value is negative",
      "mcp_servers.a.tool_timeout_sec",
    ],
    [
      { url: "http://x", http_headers: [] },
      "invalid type: sequence, expected a map",
      "mcp_servers.a.http_headers",
    ],
    [
      { command: "x", enabled_tools: [1n] },
      "invalid type: integer `1`, expected a string",
      "mcp_servers.a.enabled_tools",
    ],
    [
      { url: "http://x", args: ["a"] },
      "args is not supported for streamable_http",
      "mcp_servers.a",
    ],
    [
      { url: "http://x", bearer_token: "b" },
      "bearer_token is not supported for streamable_http",
      "mcp_servers.a",
    ],
    [{ command: "x", url: "http://y" }, "url is not supported for stdio", "mcp_servers.a"],
    [{ enabled: true }, "invalid transport", "mcp_servers.a"],
    [
      { command: "x", env_vars: [{ name: "A", source: "b" }] },
      "unsupported env_vars source `b`; expected `local` or `remote`",
      "mcp_servers.a",
    ],
    [
      { command: "x", env_vars: [5n] },
      "data did not match any variant of untagged enum McpServerEnvVar",
      "mcp_servers.a.env_vars",
    ],
  ];
  for (const [table, detail, path] of cases) {
    const error = configError(() => parseMcpServerConfig("a", table));
    assertEquals(
      [error.detail, error.path],
      [detail, path],
      JSON.stringify(table, (_, v) => typeof v === "bigint" ? `${v}n` : v),
    );
    assertEquals(error.message, `${detail}\nin \`${path}\``);
  }
  // Stricter than Codex (which ignores it): a key nobody knows names itself.
  const typo = configError(() => parseMcpServerConfig("a", { command: "x", enabled_tool: ["t"] }));
  assert(
    typo.detail.startsWith("unknown field `enabled_tool`, expected one of `command`"),
    typo.detail,
  );
  assertEquals(typo.path, "mcp_servers.a");
  // A bad entry is kept beside the good ones with its problem (it never
  // starts; the others do).
  const [bad, good] = parseMcpServers({
    mcp_servers: { "bad name": { command: "x" }, ok: { command: "y" } },
  });
  assertEquals(
    bad!.problem?.detail,
    "Invalid MCP server name 'bad name': must match pattern ^[a-zA-Z0-9_-]+$",
  );
  assertEquals([bad!.name, good!.name, good!.problem], ["bad name", "ok", undefined]);
  assertEquals(
    parseMcpServers({ mcp_servers: { a: 5n } })[0]!.problem?.detail,
    "invalid type: integer `5`, expected struct RawMcpServerConfig",
  );
});

Deno.test("mcp config: defaults and every supported key", () => {
  const stdio = parseMcpServerConfig("s", {
    command: "srv",
    args: ["1"],
    env: { K: "v" },
    env_vars: ["A", { name: "B", source: "remote" }],
    cwd: "/w",
    startup_timeout_ms: 2500n,
    tool_timeout_sec: 3.5,
    enabled_tools: ["t"],
    disabled_tools: ["u"],
    required: true,
    environment_id: "box",
    tools: { t: { approval_mode: "prompt" } },
  });
  assertEquals(stdio.transport, {
    type: "stdio",
    command: "srv",
    args: ["1"],
    env: { K: "v" },
    envVars: ["A", { name: "B", source: "remote" }],
    cwd: "/w",
  });
  assertEquals(
    [stdio.startupTimeoutMs, stdio.toolTimeoutMs, stdio.required, stdio.environmentId],
    [2500, 3500, true, "box"],
  );
  assertEquals(stdio.extra, { tools: { t: { approval_mode: "prompt" } } });
  const http = parseMcpServerConfig("h", {
    url: "http://h/mcp",
    startup_timeout_sec: 1n,
    startup_timeout_ms: 99n,
  });
  assertEquals(http.environmentId, LOCAL_ENVIRONMENT_ID);
  assertEquals([http.enabled, http.required, http.startupTimeoutMs, http.toolTimeoutMs], [
    true,
    false,
    1000,
    null,
  ]);
});

Deno.test("mcp config: read from the Codex layers with -c overrides; untrusted project layers are ignored", async () => {
  const home = await Deno.makeTempDir();
  const project = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${home}/config.toml`,
      `[mcp_servers.a]\ncommand = "a-user"\nargs = ["x"]\n\n[mcp_servers.b]\nurl = "http://b/mcp"\n`,
    );
    await Deno.mkdir(`${project}/.git`);
    await Deno.writeTextFile(`${project}/.git/HEAD`, "ref: refs/heads/main\n");
    await Deno.mkdir(`${project}/.codex`);
    await Deno.writeTextFile(
      `${project}/.codex/config.toml`,
      `[mcp_servers.a]\ncommand = "a-project"\n`,
    );
    const load = (overrides: string[] = []) =>
      loadMcpServerConfigs({ codexHome: home, cwd: project, overrides, systemDir: `${home}/none` });
    let servers = await load();
    assertEquals(servers.map((s) => s.name), ["a", "b"]);
    assertEquals((servers[0]!.transport as { command: string }).command, "a-user");
    // Trusted: the project layer wins key by key (args stays from the user layer).
    await Deno.writeTextFile(
      `${home}/config.toml`,
      `[projects."${project}"]\ntrust_level = "trusted"\n\n[mcp_servers.a]\ncommand = "a-user"\nargs = ["x"]\n`,
    );
    servers = await load();
    assertEquals(servers[0]!.transport, {
      type: "stdio",
      command: "a-project",
      args: ["x"],
      env: null,
      envVars: [],
      cwd: null,
    });
    servers = await load(["mcp_servers.a.enabled=false", "mcp_servers.c.command=hello world"]);
    assertEquals(servers.map((s) => [s.name, s.enabled]), [["a", false], ["c", true]]);
    assertEquals((servers[1]!.transport as { command: string }).command, "hello world");
    await assertRejects(() => load(["foo"]), Error, "Invalid override (missing '='): foo");
    await assertRejects(() => load(["=1"]), Error, "Empty key in override: =1");
    const typed = await load(["mcp_servers.a.args=5"]);
    assertEquals(
      typed.map((s) => [s.name, s.problem?.message ?? null]),
      [["a", "invalid type: integer `5`, expected a sequence\nin `mcp_servers.a.args`"]],
    );
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(project, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// Names and metadata

Deno.test("mcp tool names: sanitised, unique, at most 64 bytes, the same whatever the order", () => {
  const sha = (s: string) => createHash("sha1").update(s).digest("hex").slice(0, 12);
  const tools = [
    { server: "files", tool: "read.file" },
    { server: "files", tool: "read_file" },
    { server: "my-server", tool: "x" },
    { server: "my_server", tool: "x" },
    { server: "long", tool: "t".repeat(80) },
  ];
  const named = qualifyToolNames(tools);
  const byRaw = new Map(named.map((n) => [`${n.server}/${n.tool}`, n.qualifiedName]));
  // Two raw tools sanitising to one name: each gets the hash of its identity.
  const id = (server: string, tool: string) => `${server}\0mcp__${server}__\0\0${tool}\0${tool}`;
  assertEquals(
    byRaw.get("files/read.file"),
    `mcp__files__read_file_${sha(id("files", "read.file"))}`,
  );
  assertEquals(
    byRaw.get("files/read_file"),
    `mcp__files__read_file_${sha(id("files", "read_file"))}`,
  );
  // Two servers sanitising to one namespace: the namespace is suffixed.
  const ns = (server: string) => `${server}\0mcp__${server}__\0`;
  assertEquals(byRaw.get("my-server/x"), `mcp__my_server_${sha(ns("my-server"))}__x`);
  assertEquals(byRaw.get("my_server/x"), `mcp__my_server_${sha(ns("my_server"))}__x`);
  const long = byRaw.get(`long/${"t".repeat(80)}`)!;
  assertEquals(long.length, 64);
  assert(long.startsWith("mcp__long__tttt") && /_[0-9a-f]{12}$/.test(long), long);
  for (const n of named) assert(/^[A-Za-z0-9_]{1,64}$/.test(n.qualifiedName), n.qualifiedName);
  assertEquals(new Set(named.map((n) => n.qualifiedName)).size, named.length);
  assertEquals(qualifyToolNames(tools.toReversed()), named);
  // The same raw pair twice is one tool.
  assertEquals(qualifyToolNames([tools[0]!, tools[0]!]).length, 1);
  assertEquals(qualifyToolNames([{ server: "s", tool: "" }])[0]!.qualifiedName, "mcp__s___");
});

Deno.test("mcp trust boundary: connector identity keys go, bare or prefixed; look-alikes stay", () => {
  const tool = {
    name: "t",
    _meta: {
      connector_id: "x",
      connector_name: "x",
      connector_display_name: "x",
      connector_description: "x",
      connectorDescription: "x",
      "openai/connector_id": "x",
      "com.example/connector_name": "x",
      connectorFutureField: 1,
      CONNECTOR_UPPERCASE: 2,
      "openai/fileParams": 3,
    },
  };
  assertEquals(stripConnectorMeta(tool)._meta, {
    connectorFutureField: 1,
    CONNECTOR_UPPERCASE: 2,
    "openai/fileParams": 3,
  });
  assertEquals(tool._meta.connector_id, "x"); // not mutated
  const plain = { name: "p", _meta: { a: 1 } };
  assert(stripConnectorMeta(plain) === plain);
});

// ---------------------------------------------------------------------------
// Placement

Deno.test("mcp placement: Codex's rules, each with its message", () => {
  const stdio = (extra: TomlTable = {}) =>
    parseMcpServerConfig("stdio", { command: "x", ...extra });
  const http = (extra: TomlTable = {}) =>
    parseMcpServerConfig("web", { url: "http://h/mcp", ...extra });
  const remote = { environments: { remote: { url: "ws://127.0.0.1:8765" } } };
  assertThrows(
    () => resolvePlacement(stdio(), { localStdio: false }),
    Error,
    "local stdio MCP server `stdio` requires a local environment",
  );
  assertEquals(resolvePlacement(http(), { localStdio: false }), { kind: "local" });
  assertEquals(resolvePlacement(stdio(), {}), { kind: "local" });
  assertThrows(
    () => resolvePlacement(stdio({ environment_id: "remote" }), {}),
    Error,
    "MCP server `stdio` references unknown environment id `remote`",
  );
  assertThrows(
    () => resolvePlacement(stdio({ environment_id: "remote" }), remote),
    Error,
    "remote stdio MCP server `stdio` requires an absolute cwd",
  );
  assertThrows(
    () => resolvePlacement(stdio({ environment_id: "remote", cwd: "relative" }), remote),
    Error,
    "remote stdio MCP server `stdio` requires an absolute cwd, got `relative`",
  );
  assertEquals(
    resolvePlacement(stdio({ environment_id: "remote" }), { ...remote, fallbackCwd: "/srv" }),
    { kind: "remote", environmentId: "remote", cwd: "/srv" },
  );
  assertEquals(
    resolvePlacement(stdio({ environment_id: "remote", cwd: "file:///C:/plugins/demo" }), remote),
    { kind: "remote", environmentId: "remote", cwd: "file:///C:/plugins/demo" },
  );
  assertEquals(resolvePlacement(http({ environment_id: "remote" }), remote), {
    kind: "remote",
    environmentId: "remote",
    cwd: null,
  });
});

Deno.test({
  name:
    "mcp placement: a remote server gets only the variables it asked for, on an environment holding a secret",
  async fn() {
    const cwd = await Deno.makeTempDir();
    const [program, ...args] = ourStdioCommand();
    const manager = McpConnectionManager.start({
      servers: [tiny("remote", {
        environment_id: "box",
        cwd,
        env_vars: ["LOCAL_ONLY", { name: "REMOTE_TOKEN", source: "remote" }],
      })],
      environments: {
        box: {
          command: {
            program: program!,
            args,
            env: {
              UNREQUESTED_SECRET: "hunter2",
              REMOTE_TOKEN: "remote-value",
              LOCAL_ONLY: "remote-copy",
            },
          },
        },
      },
      hostEnv: { LOCAL_ONLY: "local-value", REMOTE_TOKEN: "must-not-travel", PATH: "/nowhere" },
    });
    try {
      assertEquals((await manager.startupComplete).ready, ["remote"]);
      const env = async (name: string) =>
        textOf(await manager.callTool({ server: "remote", tool: "env" }, { name }));
      assertEquals(await env("UNREQUESTED_SECRET"), "<unset>");
      assertEquals(await env("REMOTE_TOKEN"), "remote-value");
      assertEquals(await env("LOCAL_ONLY"), "local-value");
      assert((await env("PATH")) !== "/nowhere");
      assertEquals(textOf(await manager.callTool({ server: "remote", tool: "cwd" })), cwd);
    } finally {
      await manager.shutdown();
      await Deno.remove(cwd, { recursive: true });
    }
  },
});

// ---------------------------------------------------------------------------
// The manager

Deno.test("mcp manager: server-everything on stdio here; names, filters, resources, prompts, server info", async () => {
  const events: McpStatusEvent[] = [];
  const manager = McpConnectionManager.start({
    servers: [
      everything("everything", { disabled_tools: ["get-sum"] }),
      tiny("off", { enabled: false }),
    ],
    onStatus: (e) => events.push(e),
  });
  try {
    const summary = await manager.startupComplete;
    assertEquals(summary, { ready: ["everything"], failed: [], cancelled: [], requiredFailed: [] });
    assertEquals(events, [
      { server: "everything", state: "starting" },
      { server: "everything", state: "ready" },
    ]);
    const status = manager.status();
    assertEquals(status.map((s) => [s.name, s.state]), [["everything", "ready"], [
      "off",
      "disabled",
    ]]);
    assertEquals(status[0]!.serverInfo?.name, "mcp-servers/everything");
    const names = manager.listTools().map((t) => t.qualifiedName);
    assert(names.includes("mcp__everything__echo"), names.join());
    assert(!names.some((n) => n.includes("get_sum")), names.join());
    assertEquals(
      textOf(await manager.callTool("mcp__everything__echo", { message: "hi" })),
      "Echo: hi",
    );
    // The filter holds at call time too.
    await assertRejects(
      () => manager.callTool({ server: "everything", tool: "get-sum" }, { a: 1, b: 2 }),
      Error,
      "tool 'get-sum' is disabled for MCP server 'everything'",
    );
    await assertRejects(
      () => manager.callTool("mcp__everything__echo", [1]),
      Error,
      "MCP tool arguments must be a JSON object, got [1]",
    );
    await assertRejects(
      () => manager.callTool({ server: "nope", tool: "x" }),
      Error,
      "unknown MCP server 'nope'",
    );
    await assertRejects(() => manager.callTool({ server: "off", tool: "echo" }), Error, "disabled");
    const resources = (await manager.listResources("everything")).resources as Array<
      { uri: string }
    >;
    assert(resources.length > 0);
    const read = await manager.readResource("everything", resources[0]!.uri);
    assert(Array.isArray(read.contents) && read.contents.length > 0);
    const prompts = (await manager.listPrompts("everything")).prompts as Array<{ name: string }>;
    assert(prompts.some((p) => p.name === "simple-prompt"), JSON.stringify(prompts));
    const prompt = await manager.getPrompt("everything", "simple-prompt");
    assert(Array.isArray(prompt.messages));
  } finally {
    await manager.shutdown();
  }
});

// ---------------------------------------------------------------------------
// Lifecycles (the tiny fixture)

async function pids(file: string): Promise<number[]> {
  return await waitFor(async () => {
    try {
      const text = await Deno.readTextFile(file);
      const list = text.trim().split(" ").map(Number);
      return list.length === 2 ? list : null;
    } catch {
      return null;
    }
  });
}

Deno.test("mcp manager: a slow server's cached tools are offered while it starts, then the live ones", async () => {
  const dir = await Deno.makeTempDir();
  const gate = `${dir}/gate`;
  const toolsFile = `${dir}/tools`;
  const config = tiny("slow", {}, { TINY_GATE: gate, TINY_TOOLS_FILE: toolsFile });
  try {
    await Deno.writeTextFile(toolsFile, "alpha");
    const first = McpConnectionManager.start({ servers: [config], codexHome: dir });
    assertEquals((await first.startupComplete).ready, ["slow"]);
    await first.shutdown();
    const cacheFiles = [...Deno.readDirSync(`${dir}/cache/mcp_tools`)].map((e) => e.name);
    assertEquals(cacheFiles.length, 1);
    assert(/^slow-[0-9a-f]{16}\.json$/.test(cacheFiles[0]!), cacheFiles[0]);

    // Second start: held at initialize; the tools changed in the meantime.
    await Deno.writeTextFile(gate, "");
    await Deno.writeTextFile(toolsFile, "beta");
    let changes = 0;
    const second = McpConnectionManager.start({
      servers: [config],
      codexHome: dir,
      onToolsChanged: () => changes++,
    });
    try {
      const cached = await waitFor(() => {
        const tools = second.listTools();
        return tools.length > 0 ? tools : null;
      });
      assert(cached.every((t) => t.fromCache));
      assert(cached.some((t) => t.qualifiedName === "mcp__slow__alpha"));
      assertEquals(second.status()[0]!.state, "starting");
      assertEquals(second.status()[0]!.fromCache, true);
      // Server info, icons included, survives the cache.
      assertEquals(second.serverInfo("slow"), {
        name: "slow",
        version: "1.2.3",
        title: "Tiny slow",
        websiteUrl: "https://example.test",
        icons: [{ src: "https://example.test/icon.png", mimeType: "image/png", sizes: ["48x48"] }],
      });
      // A call waits for the live server.
      const call = second.callTool("mcp__slow__echo", { message: "waited" });
      await Deno.remove(gate);
      assertEquals(textOf(await call), "echo: waited");
      const live = second.listTools();
      assert(live.every((t) => !t.fromCache));
      assert(live.some((t) => t.qualifiedName === "mcp__slow__beta"));
      assert(!live.some((t) => t.qualifiedName === "mcp__slow__alpha"));
      assert(changes >= 2, String(changes));
    } finally {
      await second.shutdown();
    }
    // A different configuration never sees this cache.
    const other = tiny("slow", {}, { TINY_GATE: gate, TINY_TOOLS_FILE: toolsFile, OTHER: "1" });
    assertEquals(await ToolCache.inCodexHome(dir).read(other), null);
    assert((await ToolCache.inCodexHome(dir).read(config))!.tools.some((t) => t.name === "beta"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mcp manager: a server that never finishes starting fails with Codex's timeout text and is stopped", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/gate`, "");
    const manager = McpConnectionManager.start({
      servers: [
        tiny("stuck", { startup_timeout_sec: 1 }, {
          TINY_GATE: `${dir}/gate`,
          TINY_PID_FILE: `${dir}/pids`,
        }),
      ],
    });
    const [pid, child] = await pids(`${dir}/pids`);
    const summary = await manager.startupComplete;
    assertEquals(summary.failed, [{
      server: "stuck",
      error:
        "MCP client for `stuck` timed out after 1 seconds. Add or adjust `startup_timeout_sec` in your config.toml:\n[mcp_servers.stuck]\nstartup_timeout_sec = XX",
    }]);
    assert(
      await eventually(() => isDead(pid!) && isDead(child!)),
      "the stuck server's group lives",
    );
    await manager.shutdown();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mcp manager: shutdown cancels starts in progress and stops their processes", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/gate`, "");
    const events: McpStatusEvent[] = [];
    const manager = McpConnectionManager.start({
      servers: [tiny("held", {}, { TINY_GATE: `${dir}/gate`, TINY_PID_FILE: `${dir}/pids` })],
      onStatus: (e) => events.push(e),
    });
    const [pid, child] = await pids(`${dir}/pids`);
    await manager.shutdown();
    assertEquals(events.at(-1), { server: "held", state: "cancelled" });
    assertEquals((await manager.startupComplete).cancelled, ["held"]);
    // The group got SIGKILL before shutdown() resolved; the kernel finishes it.
    assert(await eventually(() => isDead(pid!) && isDead(child!)), "the held server's group lives");
    await assertRejects(
      () => manager.callTool({ server: "held", tool: "echo" }),
      Error,
      "shut down",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mcp manager: a server that dies during a call fails the call and is marked failed", async () => {
  const manager = McpConnectionManager.start({ servers: [tiny("fragile")] });
  try {
    await manager.startupComplete;
    await assertRejects(() => manager.callTool("mcp__fragile__die"), Error);
    assert(await eventually(() => manager.status()[0]!.state === "failed"), "not failed");
    assertEquals(manager.status()[0]!.error, "MCP server closed the connection");
    assertEquals(manager.listTools(), []);
    await assertRejects(() => manager.callTool("mcp__fragile__echo"), Error);
  } finally {
    await manager.shutdown();
  }
});

Deno.test("mcp manager: a server ignoring SIGTERM is killed with its whole group, a call in flight fails", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const manager = McpConnectionManager.start({
      servers: [tiny("stubborn", {}, { TINY_IGNORE_TERM: "1", TINY_PID_FILE: `${dir}/pids` })],
    });
    await manager.startupComplete;
    const [pid, child] = await pids(`${dir}/pids`);
    const call = manager.callTool("mcp__stubborn__slow", { ms: 600_000 });
    const failed = assertRejects(() => call);
    await manager.shutdown();
    await failed;
    // SIGKILLed before shutdown() resolved; the kernel finishes them.
    assert(await eventually(() => isDead(pid!)), "the server survived");
    assert(await eventually(() => isDead(child!)), "its child survived");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mcp manager: tool timeouts use Codex's wording; time spent waiting on the harness does not count", async () => {
  let asked: unknown = null;
  const manager = McpConnectionManager.start({
    servers: [tiny("asker", { tool_timeout_sec: 2 })],
    onElicitation: async ({ server, params }) => {
      asked = { server, message: params.message };
      await new Promise((r) => setTimeout(r, 3000));
      return { action: "accept", content: { name: "Grace" } };
    },
  });
  try {
    await manager.startupComplete;
    const answer = textOf(await manager.callTool("mcp__asker__elicit"));
    assertEquals(JSON.parse(answer), { action: "accept", content: { name: "Grace" } });
    assertEquals(asked, { server: "asker", message: "your name?" });
    await assertRejects(
      () => manager.callTool("mcp__asker__slow", { ms: 600_000 }, { timeoutMs: 300 }),
      Error,
      "timed out awaiting tools/call after 300ms",
    );
    // The server is still usable.
    assertEquals(textOf(await manager.callTool("mcp__asker__echo", { message: "x" })), "echo: x");
  } finally {
    await manager.shutdown();
  }
});

Deno.test("mcp manager: a changed tool list is picked up", async () => {
  let changes = 0;
  const manager = McpConnectionManager.start({
    servers: [tiny("growing")],
    onToolsChanged: () => changes++,
  });
  try {
    await manager.startupComplete;
    const before = changes;
    await manager.callTool("mcp__growing__grow");
    assert(await eventually(() => changes > before), "no tools-changed callback");
    assert(manager.listTools().some((t) => t.qualifiedName.startsWith("mcp__growing__grown")));
  } finally {
    await manager.shutdown();
  }
});

Deno.test("mcp manager: connector identity _meta is stripped from every server but the trusted one", async () => {
  const meta = JSON.stringify({ connector_id: "gmail", "openai/connector_name": "Gmail", keep: 1 });
  const manager = McpConnectionManager.start({
    servers: [
      tiny("impostor", {}, { TINY_TOOL_META: meta }),
      tiny("codex_apps", {}, { TINY_TOOL_META: meta }),
    ],
  });
  try {
    await manager.startupComplete;
    const metaOf = (name: string) =>
      manager.listTools().find((t) => t.qualifiedName === name)!.definition._meta;
    assertEquals(metaOf("mcp__impostor__echo"), { keep: 1 });
    assertEquals(metaOf("mcp__codex_apps__echo"), JSON.parse(meta));
  } finally {
    await manager.shutdown();
  }
});

Deno.test("mcp manager: 20 servers start at once, each answers, names stay unique", async () => {
  const servers = Array.from({ length: 20 }, (_, i) => tiny(`s${i}`, { startup_timeout_sec: 120 }));
  const manager = McpConnectionManager.start({ servers });
  try {
    const summary = await manager.startupComplete;
    assertEquals(summary.ready.length, 20, JSON.stringify(summary.failed));
    const tools = manager.listTools();
    assertEquals(new Set(tools.map((t) => t.qualifiedName)).size, tools.length);
    const answers = await Promise.all(
      servers.map((s) => manager.callTool(`mcp__${s.name}__echo`, { message: s.name })),
    );
    assertEquals(answers.map(textOf), servers.map((s) => `echo: ${s.name}`));
  } finally {
    await manager.shutdown();
  }
});

// ---------------------------------------------------------------------------
// Streamable HTTP

/** A stateless Streamable HTTP MCP server that wants `Bearer TOKEN`; records request headers. */
async function bearerServer(token: string) {
  const { McpServer } = await import("@modelcontextprotocol/sdk/server/mcp.js");
  const { WebStandardStreamableHTTPServerTransport } = await import(
    "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
  );
  const seen: Headers[] = [];
  const http = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    seen.push(req.headers);
    // Stateless: no standalone SSE stream (one would outlive the test's
    // graceful server shutdown, which waits for open responses).
    if (req.method === "GET") return new Response(null, { status: 405 });
    if (req.headers.get("authorization") !== `Bearer ${token}`) {
      return new Response("unauthorized", {
        status: 401,
        headers: { "www-authenticate": "Bearer" },
      });
    }
    const server = new McpServer({ name: "guarded", version: "2.0.0" });
    server.registerTool(
      "whoami",
      {},
      () => ({ content: [{ type: "text", text: "guarded tool" }] }),
    );
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    await server.connect(transport);
    return await transport.handleRequest(req);
  });
  return {
    url: `http://127.0.0.1:${http.addr.port}/mcp`,
    seen,
    async [Symbol.asyncDispose]() {
      await http.shutdown();
    },
  };
}

Deno.test("mcp http: bearer token and headers from variables; a missing or empty token fails before connecting", async () => {
  await using guarded = await bearerServer("s3cret");
  const web = (name: string, extra: TomlTable = {}) =>
    parseMcpServerConfig(name, {
      url: guarded.url,
      bearer_token_env_var: "GUARD_TOKEN",
      http_headers: { "X-Static": "static" },
      env_http_headers: { "X-From-Env": "HEADER_VALUE", "X-Blank": "BLANK" },
      ...extra,
    });
  const run = async (hostEnv: Record<string, string>) => {
    const manager = McpConnectionManager.start({ servers: [web("web")], hostEnv });
    try {
      return { summary: await manager.startupComplete, manager };
    } finally {
      await manager.shutdown();
    }
  };
  const before = guarded.seen.length;
  assertEquals((await run({})).summary.failed, [{
    server: "web",
    error:
      "MCP client for `web` failed to start: Environment variable GUARD_TOKEN for MCP server 'web' is not set",
  }]);
  assertEquals(
    (await run({ GUARD_TOKEN: "" })).summary.failed[0]!.error,
    "MCP client for `web` failed to start: Environment variable GUARD_TOKEN for MCP server 'web' is empty",
  );
  assertEquals(guarded.seen.length, before, "nothing may be sent without the token");
  const wrong = await run({ GUARD_TOKEN: "guess" });
  assertEquals(
    wrong.summary.failed[0]!.error,
    "MCP client for `web` failed to start: Auth required (HTTP 401): Error POSTing to endpoint: unauthorized",
  );

  const manager = McpConnectionManager.start({
    servers: [web("web")],
    hostEnv: { GUARD_TOKEN: "s3cret", HEADER_VALUE: "from-env", BLANK: "  " },
  });
  try {
    assertEquals((await manager.startupComplete).ready, ["web"]);
    assertEquals(textOf(await manager.callTool("mcp__web__whoami")), "guarded tool");
    assertEquals(manager.serverInfo("web")?.name, "guarded");
    const last = guarded.seen.at(-1)!;
    assertEquals(last.get("x-static"), "static");
    assertEquals(last.get("x-from-env"), "from-env");
    assertEquals(last.get("x-blank"), null);
  } finally {
    await manager.shutdown();
  }
});

/** Starts server-everything in Streamable HTTP mode on a free port (through `spawn`). */
async function everythingHttp(
  spawn: (argv: string[], env: Record<string, string>) => Promise<{
    stderr: ReadableStream<Uint8Array>;
    kill(): Promise<void>;
  }>,
  port: number,
) {
  const child = await spawn(
    [Deno.execPath(), ...EVERYTHING_ARGS, "streamableHttp"],
    { PORT: String(port) },
  );
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  while (!seen.includes(`listening on port ${port}`)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`server-everything did not start: ${seen}`);
    seen += value;
  }
  // Keep draining so it never blocks on stderr.
  (async () => {
    while (!(await reader.read().catch(() => ({ done: true }))).done) { /* drain */ }
  })();
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill() };
}

Deno.test({
  name: "mcp http: server-everything in Streamable HTTP mode, from here",
  async fn() {
    const server = await everythingHttp(async (argv, env) => {
      await Promise.resolve();
      const child = new Deno.Command(argv[0]!, {
        args: argv.slice(1),
        env,
        stdout: "null",
        stderr: "piped",
      }).spawn();
      return {
        stderr: child.stderr,
        kill: async () => {
          child.kill("SIGKILL");
          await child.status;
        },
      };
    }, freePort());
    const manager = McpConnectionManager.start({
      servers: [parseMcpServerConfig("web", { url: server.url })],
    });
    try {
      assertEquals((await manager.startupComplete).ready, ["web"]);
      assertEquals(
        textOf(await manager.callTool("mcp__web__echo", { message: "over http" })),
        "Echo: over http",
      );
      assertEquals(manager.serverInfo("web")?.name, "mcp-servers/everything");
    } finally {
      await manager.shutdown();
      await server.stop();
    }
  },
});

Deno.test({
  name: "mcp http: a server only reachable inside an environment is used through its http/request",
  async fn() {
    // The environment: our exec-server in its own network namespace (bwrap
    // gives it a loopback of its own), so its 127.0.0.1 is not ours.
    const [program, ...args] = ourStdioCommand();
    const box = {
      command: {
        program: "bwrap",
        args: [
          "--dev-bind",
          "/",
          "/",
          "--unshare-net",
          "--die-with-parent",
          "--",
          program!,
          ...args,
        ],
      },
    };
    const { connect } = await import("../../src/client/client.ts");
    const client = await connect(box);
    const port = freePort();
    const server = await everythingHttp(async (argv, env) => {
      const p = await client.spawn(argv, { env, cwd: "/" });
      return { stderr: p.stderr, kill: () => p.terminate(2000).then(() => {}) };
    }, port);
    const config = (name: string, extra: TomlTable = {}) =>
      parseMcpServerConfig(name, { url: server.url, startup_timeout_sec: 30, ...extra });
    const manager = McpConnectionManager.start({
      servers: [
        config("inside", { environment_id: "box" }),
        config("outside", { startup_timeout_sec: 10 }),
      ],
      environments: { box: client },
    });
    try {
      const summary = await manager.startupComplete;
      assertEquals(summary.ready, ["inside"]);
      // From here the same URL reaches nothing.
      assertEquals(summary.failed.map((f) => f.server), ["outside"]);
      assertEquals(
        textOf(await manager.callTool("mcp__inside__echo", { message: "in the box" })),
        "Echo: in the box",
      );
    } finally {
      await manager.shutdown();
      await server.stop();
      await client.close();
    }
  },
});

// ---------------------------------------------------------------------------
// stdio servers inside environments

async function everythingIn(environment: McpEnvironmentTarget, label: string): Promise<void> {
  const cwd = await Deno.makeTempDir();
  const manager = McpConnectionManager.start({
    servers: [everything("remote", { environment_id: "env", cwd })],
    environments: { env: environment },
  });
  try {
    const summary = await manager.startupComplete;
    assertEquals(summary.ready, ["remote"], `${label}: ${JSON.stringify(summary.failed)}`);
    assertEquals(
      textOf(await manager.callTool("mcp__remote__echo", { message: label })),
      `Echo: ${label}`,
    );
    const sum = await manager.callTool("mcp__remote__get_sum", { a: 2, b: 40 });
    assert(textOf(sum).includes("42"), textOf(sum));
  } finally {
    await manager.shutdown();
    await Deno.remove(cwd, { recursive: true });
  }
}

for (const kind of serverKinds()) {
  Deno.test(`mcp remote stdio: server-everything through ${kind === "ours" ? "our" : "the reference's"} exec-server`, async () => {
    await using server = await startWsServer(kind);
    await everythingIn({ url: server.url }, kind);
  });
}

// Loaded before the tests: libcrypto (FFI) stays open for the process.
await loadNoiseCrypto();

Deno.test("mcp remote stdio: server-everything through the relay, end-to-end encrypted", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const executorToken = await relay.store.createToken("executor", "env-mcp");
  const harnessToken = await relay.store.createToken("harness", "env-mcp");
  const served = await relayedServer(relay.url, executorToken, "env-mcp");
  try {
    await served.executor.connected;
    await everythingIn({
      rendezvous: { registryUrl: relay.url, environmentId: "env-mcp", token: harnessToken },
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    }, "relay");
  } finally {
    await served[Symbol.asyncDispose]();
    await relay.close();
  }
});

// ---------------------------------------------------------------------------
// The CLI

Deno.test("mcp-servers CLI: list, status, tools, call against a Codex config, a server placed with --environment", async () => {
  const home = await Deno.makeTempDir();
  const work = await Deno.makeTempDir();
  try {
    const deno = JSON.stringify(Deno.execPath());
    await Deno.writeTextFile(
      `${home}/config.toml`,
      `[mcp_servers.here]
command = ${deno}
args = ["run", "-A", "--no-config", ${JSON.stringify(TINY)}]
disabled_tools = ["die"]

[mcp_servers.there]
command = ${deno}
args = ["run", "-A", "--no-config", ${JSON.stringify(TINY)}]
environment_id = "box"
cwd = ${JSON.stringify(work)}
env = { TINY_NAME = "there" }

[mcp_servers.off]
url = "http://127.0.0.1:9/mcp"
enabled = false
`,
    );
    const list = await cli(["list", "--json"], home);
    assertEquals(list.code, 0, list.stderr);
    const listed = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
    assertEquals(listed.map((s) => [s.name, s.enabled, s.environment_id]), [
      ["here", true, "local"],
      ["there", true, "box"],
      ["off", false, "local"],
    ]);
    const box = `box=stdio:${ourStdioCommand().map((a) => JSON.stringify(a)).join(" ")}`;
    const tools = await cli(["tools", "--json", "--environment", box], home);
    assertEquals(tools.code, 0, tools.stderr);
    const names = (JSON.parse(tools.stdout) as Array<{ name: string }>).map((t) => t.name);
    assert(names.includes("mcp__here__echo") && names.includes("mcp__there__cwd"), names.join());
    assert(!names.includes("mcp__here__die"), names.join());
    assert(tools.stderr.includes("✓ there ready"), tools.stderr);

    const call = await cli(["call", "there", "cwd", "--environment", box, "--quiet"], home);
    assertEquals([call.code, call.stdout.trim(), call.stderr], [0, work, ""]);
    const echo = await cli(["call", "here", "echo", '{"message":"from the CLI"}', "--json"], home);
    assertEquals(JSON.parse(echo.stdout).content[0].text, "echo: from the CLI");

    // Without the environment the placed server fails, and status says why.
    const status = await cli(["status", "--json"], home);
    assertEquals(status.code, 1);
    const states = JSON.parse(status.stdout) as Array<
      { name: string; state: string; error?: string }
    >;
    assertEquals(states.map((s) => [s.name, s.state]), [["here", "ready"], ["there", "failed"], [
      "off",
      "disabled",
    ]]);
    assertEquals(
      states[1]!.error,
      "MCP client for `there` failed to start: MCP server `there` references unknown environment id `box`",
    );
    const unknown = await cli(["call", "nope", "x"], home);
    assertEquals([unknown.code, unknown.stderr.trim()], [1, "Error: unknown MCP server 'nope'"]);
    const disabled = await cli(["call", "here", "die"], home);
    assertEquals([disabled.code, disabled.stderr.trim().split("\n").at(-1)], [
      1,
      "Error: tool 'die' is disabled for MCP server 'here'",
    ]);
    // A server whose table does not parse fails with the error naming the
    // key, before anything of it runs; the others are unaffected.
    const bad = await cli(["status", "--json", "-c", "mcp_servers.here.args=5"], home);
    assertEquals(bad.code, 1);
    const badStates = JSON.parse(bad.stdout) as Array<
      { name: string; state: string; error?: string }
    >;
    assertEquals(badStates.map((s) => [s.name, s.state, s.error ?? null]), [
      [
        "here",
        "failed",
        "invalid type: integer `5`, expected a sequence\nin `mcp_servers.here.args`",
      ],
      ["there", "failed", states[1]!.error],
      ["off", "disabled", null],
    ]);
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// The official conformance suite's client scenarios for an HTTP client
// without OAuth (the auth/* scenarios run in mcp_oauth_conformance_test.ts).

const CONFORMANCE_CLIENT = `${ROOT}tests/fixtures/conformance_client.ts`;

for (
  const scenario of ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
) {
  Deno.test(`mcp conformance: client scenario ${scenario}`, async () => {
    const { checks, output } = await runConformanceClient(CONFORMANCE_CLIENT, scenario, 120_000);
    // Judge by the recorded checks. The one timing check (sse-retry:
    // reconnect within retry + 200 ms) belongs in a benchmark, not in a
    // test that must pass on a loaded machine; it is reported, not judged.
    assert(checks.length > 0, output);
    const judged = checks.filter((c) => c.id !== "client-sse-retry-timing");
    assertEquals(judged.filter((c) => c.status === "FAILURE"), [], output);
    assert(judged.some((c) => c.status === "SUCCESS"), output);
  });
}

Deno.test("mcp manager: sampling requests reach the harness callback; without one, sampling is not offered", async () => {
  const seen: unknown[] = [];
  const manager = McpConnectionManager.start({
    servers: [tiny("sampler")],
    onSampling: ({ server, params }) => {
      seen.push({ server, maxTokens: params.maxTokens });
      return { role: "assistant", content: { type: "text", text: "hi" }, model: "harness-model" };
    },
  });
  const plain = McpConnectionManager.start({ servers: [tiny("plain")] });
  try {
    await manager.startupComplete;
    await plain.startupComplete;
    const answer = JSON.parse(textOf(await manager.callTool("mcp__sampler__sample")));
    assertEquals(answer, {
      role: "assistant",
      content: { type: "text", text: "hi" },
      model: "harness-model",
    });
    assertEquals(seen, [{ server: "sampler", maxTokens: 10 }]);
    // The server gets an error answer, not silence.
    const refused = JSON.parse(textOf(await plain.callTool("mcp__plain__sample")));
    assert(typeof refused.code === "number" && refused.code < 0, JSON.stringify(refused));
  } finally {
    await manager.shutdown();
    await plain.shutdown();
  }
});

Deno.test("mcp manager: startup durations reported, Codex's sandbox-state metadata where declared, a failed start still offers its cached tools", async () => {
  const dir = await Deno.makeTempDir();
  const failFile = `${dir}/fail`;
  const declares = tiny("box", {}, {
    TINY_FAIL_FILE: failFile,
    TINY_EXPERIMENTAL: JSON.stringify({ "codex/sandbox-state-meta": {} }),
  });
  const plain = tiny("plain");
  const sandbox = { sandboxPolicy: { type: "workspace-write" }, sandboxCwd: "/w" };
  try {
    const { logger, lines } = memoryLogger("info");
    {
      await using m = McpConnectionManager.start({
        servers: [declares, plain],
        codexHome: dir,
        sandboxState: () => sandbox,
        logger,
      });
      assertEquals((await m.startupComplete).failed, []);
      const [box, other] = m.status();
      assertEquals([box!.sandboxStateMeta, other!.sandboxStateMeta], [true, false]);
      for (const s of [box!, other!]) {
        assert(typeof s.startupMs === "number" && s.startupMs >= 0, JSON.stringify(s));
        assert(typeof s.firstListMs === "number" && s.firstListMs >= 0, JSON.stringify(s));
      }
      const started = lines.map((l) => JSON.parse(l)).filter((e) =>
        e.event === "mcp.server_started"
      );
      assertEquals(started.map((e) => [e.server, e.sandbox_state_meta]).sort(), [
        ["box", true],
        ["plain", false],
      ]);
      assert(started.every((e) => typeof e.startup_ms === "number"));
      // Only the server that declared it gets the harness's sandbox state.
      const meta = JSON.parse(textOf(await m.callTool("mcp__box__meta", {}, { meta: { k: 1 } })));
      assertEquals(meta, { k: 1, "codex/sandbox-state-meta": sandbox });
      assertEquals(JSON.parse(textOf(await m.callTool("mcp__plain__meta", {}))), null);
    }
    // Now the server fails at start: its cached tools are still offered, marked.
    await Deno.writeTextFile(failFile, "");
    await using m = McpConnectionManager.start({ servers: [declares], codexHome: dir });
    const summary = await m.startupComplete;
    assertEquals(summary.failed.map((f) => f.server), ["box"]);
    const [status] = m.status();
    assertEquals([status!.state, status!.fromCache], ["failed", true]);
    assert(status!.toolCount > 0);
    const tools = m.listTools();
    assert(tools.length > 0 && tools.every((t) => t.fromCache), JSON.stringify(tools));
    assert(tools.some((t) => t.qualifiedName === "mcp__box__echo"));
    await assertRejects(() => m.callTool("mcp__box__echo", {}), Error, "MCP client for `box`");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
