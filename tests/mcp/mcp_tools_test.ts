// `exec-server mcp`: every tool through the MCP SDK's client, backed by an
// exec-server (in process, over WebSocket, and as the real command).

import "../helpers/libc_preload.ts";
import { Client } from "@modelcontextprotocol/sdk/client";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { connect, type ExecServerClient } from "../../src/client/client.ts";
import { inProcessTransport } from "../../src/client/in_process.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { serveExecToolsHttp } from "../../src/mcp/tool_serve.ts";
import { createExecToolServer, type ExecToolServerOptions } from "../../src/mcp/tool_server.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, jsonLines } from "../helpers/wire_client.ts";
import { mcpInitialize } from "../helpers/mcp.ts";

interface ToolResult {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

interface Harness extends AsyncDisposable {
  call(name: string, args?: Record<string, unknown>): Promise<ToolResult>;
  /** Text of a successful call. */
  ok(name: string, args?: Record<string, unknown>): Promise<string>;
  /** Text of a failed call. */
  fails(name: string, args?: Record<string, unknown>): Promise<string>;
  mcp: Client;
  dir: string;
}

const textOf = (r: ToolResult) => r.content.map((c) => c.text ?? "").join("");

async function harness(
  options: (dir: string) => ExecToolServerOptions = () => ({}),
): Promise<Harness> {
  const dir = await Deno.realPath(await Deno.makeTempDir());
  const server = new ExecServer({ logger: nullLogger });
  const client = await connect({
    transport: inProcessTransport((c) => server.serve(c, "terminate")),
  });
  const tools = await createExecToolServer(client, options(dir));
  const [a, b] = InMemoryTransport.createLinkedPair();
  await tools.connect(a);
  const mcp = new Client({ name: "tools-test", version: "1.0.0" });
  await mcp.connect(b);
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    (await mcp.callTool({ name, arguments: args })) as ToolResult;
  return {
    mcp,
    dir,
    call,
    async ok(name, args) {
      const r = await call(name, args);
      assert(!r.isError, `${name} failed: ${textOf(r)}`);
      return textOf(r);
    },
    async fails(name, args) {
      const r = await call(name, args);
      assertEquals(r.isError, true, `${name} should fail: ${textOf(r)}`);
      return textOf(r);
    },
    async [Symbol.asyncDispose]() {
      await mcp.close();
      await tools.close();
      await client.close();
      await server.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("mcp tools: the tool list, with schemas and annotations", async () => {
  await using h = await harness();
  const { tools } = await h.mcp.listTools();
  const byName = new Map(tools.map((t) => [t.name, t]));
  for (
    const name of [
      "exec_command",
      "write_stdin",
      "terminate_process",
      "read_text_file",
      "write_file",
      "edit_file",
      "create_directory",
      "list_directory",
      "search_files",
      "get_file_info",
      "move_file",
    ]
  ) assert(byName.has(name), `missing ${name}`);
  assert(!byName.has("list_allowed_directories"));
  assertEquals(byName.get("read_text_file")!.annotations?.readOnlyHint, true);
  assertEquals(byName.get("write_file")!.annotations?.destructiveHint, true);
  assertEquals(byName.get("create_directory")!.annotations?.destructiveHint, false);
  assert(byName.get("exec_command")!.outputSchema, "exec_command has an output schema");
  assert(
    (byName.get("exec_command")!.inputSchema.required ?? []).includes("cwd"),
    "cwd is required",
  );
});

Deno.test("mcp tools: exec_command reports exit code, output, env and stdin", async () => {
  await using h = await harness();
  const r = await h.call("exec_command", {
    command: 'echo "out:$GREETING"; cat; echo err >&2; exit 3',
    cwd: h.dir,
    env: { GREETING: "hi" },
    stdin: "from stdin\n",
  });
  assert(!r.isError, textOf(r));
  const s = r.structuredContent!;
  assertEquals(s.exit_code, 3);
  assertEquals(s.stdout, "out:hi\nfrom stdin\n");
  assertEquals(s.stderr, "err\n");
  assertEquals(s.running, false);
  assertEquals(s.session_id, null);
  assertStringIncludes(textOf(r), "exit code 3");
  const argv = await h.call("exec_command", { argv: ["pwd"], cwd: h.dir });
  assertEquals(argv.structuredContent!.stdout, `${h.dir}\n`);
});

Deno.test("mcp tools: exec_command deadlines, output limits and refusals", async () => {
  await using h = await harness();
  const slow = await h.call("exec_command", { command: "sleep 30", cwd: h.dir, timeout_ms: 200 });
  assertEquals(slow.structuredContent!.timed_out, true);
  assertEquals(slow.structuredContent!.exit_code, 137);
  const loud = await h.call("exec_command", {
    command: "head -c 100000 /dev/zero | tr '\\0' a; printf END",
    cwd: h.dir,
    max_output_bytes: 1000,
  });
  const out = loud.structuredContent!.stdout as string;
  assertEquals(out.length, 1000);
  assert(out.endsWith("END"), "the newest output is kept");
  assertEquals(loud.structuredContent!.stdout_omitted_bytes, 100003 - 1000);
  assertStringIncludes(textOf(loud), "[99003 earlier bytes omitted]");
  assertStringIncludes(await h.fails("exec_command", { cwd: h.dir }), "exactly one of");
  assertStringIncludes(
    await h.fails("exec_command", { command: "true", argv: ["true"], cwd: h.dir }),
    "exactly one of",
  );
  assertStringIncludes(await h.fails("exec_command", { command: "true", cwd: "rel" }), "absolute");
  assertStringIncludes(
    await h.fails("exec_command", { argv: ["/no/such/program"], cwd: h.dir }),
    "cannot start /no/such/program",
  );
});

Deno.test("mcp tools: sessions — yield, write_stdin, poll, EOF, terminate", async () => {
  await using h = await harness();
  const started = await h.call("exec_command", { command: "cat", cwd: h.dir, yield_time_ms: 100 });
  const id = started.structuredContent!.session_id as string;
  assertMatch(id, /^s\d+$/);
  assertEquals(started.structuredContent!.running, true);
  assertStringIncludes(textOf(started), `still running as session ${id}`);
  const echoed = await h.call("write_stdin", {
    session_id: id,
    chars: "hello\n",
    yield_time_ms: 300,
  });
  assertEquals(echoed.structuredContent!.stdout, "hello\n");
  const poll = await h.call("write_stdin", { session_id: id, chars: "", yield_time_ms: 50 });
  assertEquals(poll.structuredContent!.stdout, "");
  const ended = await h.call("write_stdin", {
    session_id: id,
    chars: "bye\n",
    close_stdin: true,
    yield_time_ms: 5000,
  });
  assertEquals(ended.structuredContent!.running, false);
  assertEquals(ended.structuredContent!.exit_code, 0);
  assertEquals(ended.structuredContent!.stdout, "bye\n");
  assertStringIncludes(
    await h.fails("write_stdin", { session_id: id, chars: "" }),
    "unknown session",
  );

  const sleeper = await h.call("exec_command", {
    command: "sleep 60",
    cwd: h.dir,
    yield_time_ms: 0,
  });
  const sid = sleeper.structuredContent!.session_id as string;
  const killed = await h.call("terminate_process", { session_id: sid });
  assertEquals(killed.structuredContent!.running, false);
  assert((killed.structuredContent!.exit_code as number) > 128, JSON.stringify(killed));
});

Deno.test("mcp tools: read, write, edit, list, search, info, mkdir, move", async () => {
  await using h = await harness();
  const file = `${h.dir}/a.txt`;
  await h.ok("write_file", { path: file, content: "one\ntwo\nthree\nfour\n" });
  assertEquals(await h.ok("read_text_file", { path: file }), "one\ntwo\nthree\nfour\n");
  assertEquals(await h.ok("read_text_file", { path: file, head: 2 }), "one\ntwo");
  assertEquals(await h.ok("read_text_file", { path: file, tail: 1 }), "four");
  assertStringIncludes(await h.fails("read_text_file", { path: file, head: 1, tail: 1 }), "either");
  assertStringIncludes(await h.fails("read_text_file", { path: `${h.dir}/none` }), "none");

  const code = `${h.dir}/code.py`;
  await h.ok("write_file", { path: code, content: "def f():\n    if x:\n        return 1\n" });
  const diff = await h.ok("edit_file", {
    path: code,
    edits: [{ oldText: "if x:\n    return 1", newText: "if y:\n    return 2" }],
  });
  assertStringIncludes(diff, "-    if x:\n-        return 1\n+    if y:\n+        return 2\n");
  assertEquals(await Deno.readTextFile(code), "def f():\n    if y:\n        return 2\n");
  const dry = await h.ok("edit_file", {
    path: code,
    edits: [{ oldText: "return 2", newText: "return 3" }],
    dryRun: true,
  });
  assertStringIncludes(dry, "+        return 3");
  assertEquals(await Deno.readTextFile(code), "def f():\n    if y:\n        return 2\n");
  await h.ok("write_file", { path: code, content: "x = 1\nx = 1\n" });
  assertStringIncludes(
    await h.fails("edit_file", { path: code, edits: [{ oldText: "x = 1", newText: "x = 2" }] }),
    "more than once",
  );
  assertStringIncludes(
    await h.fails("edit_file", { path: code, edits: [{ oldText: "nope", newText: "" }] }),
    "could not find",
  );

  await h.ok("create_directory", { path: `${h.dir}/src/deep/er` });
  await h.ok("create_directory", { path: `${h.dir}/src/deep/er` });
  await Deno.writeTextFile(`${h.dir}/src/deep/er/test_x.ts`, "");
  await Deno.writeTextFile(`${h.dir}/src/main.ts`, "");
  await Deno.mkdir(`${h.dir}/node_modules`);
  await Deno.writeTextFile(`${h.dir}/node_modules/dep.ts`, "");
  assertEquals(
    await h.ok("list_directory", { path: h.dir }),
    "[FILE] a.txt\n[FILE] code.py\n[DIR] node_modules\n[DIR] src",
  );
  assertEquals(
    (await h.ok("search_files", {
      path: h.dir,
      pattern: "*.ts",
      excludePatterns: ["node_modules/**"],
    })).split("\n").sort(),
    [`${h.dir}/src/deep/er/test_x.ts`, `${h.dir}/src/main.ts`],
  );
  assertEquals(
    await h.ok("search_files", { path: h.dir, pattern: "src/**/test_*" }),
    `${h.dir}/src/deep/er/test_x.ts`,
  );
  assertEquals(await h.ok("search_files", { path: h.dir, pattern: "*.rs" }), "no matches");
  const info = await h.ok("get_file_info", { path: file });
  assertStringIncludes(info, "type: file");
  assertStringIncludes(info, "size: 19");
  await h.ok("move_file", { source: file, destination: `${h.dir}/b.txt` });
  assertEquals(await Deno.readTextFile(`${h.dir}/b.txt`), "one\ntwo\nthree\nfour\n");
  assertStringIncludes(
    await h.fails("move_file", { source: `${h.dir}/b.txt`, destination: code }),
    "already exists",
  );
});

Deno.test("mcp tools: --root confines paths, including through symlinks", async () => {
  const outside = await Deno.realPath(await Deno.makeTempDir());
  try {
    await using h = await harness((dir) => ({ roots: [`${dir}/allowed`] }));
    await Deno.mkdir(`${h.dir}/allowed`);
    await Deno.writeTextFile(`${outside}/secret`, "s");
    await Deno.symlink(outside, `${h.dir}/allowed/escape`);
    assertEquals(await h.ok("list_allowed_directories"), `${h.dir}/allowed`);
    await h.ok("write_file", { path: `${h.dir}/allowed/new/../f.txt`, content: "ok" });
    assertStringIncludes(
      await h.fails("read_text_file", { path: `${outside}/secret` }),
      "outside the allowed directories",
    );
    assertStringIncludes(
      await h.fails("read_text_file", { path: `${h.dir}/allowed/escape/secret` }),
      "outside the allowed directories",
    );
    assertStringIncludes(
      await h.fails("write_file", { path: `${h.dir}/allowed/escape/new.txt`, content: "x" }),
      "outside the allowed directories",
    );
    assertStringIncludes(
      await h.fails("exec_command", { command: "true", cwd: outside }),
      "outside the allowed directories",
    );
  } finally {
    await Deno.remove(outside, { recursive: true });
  }
});

Deno.test("mcp tools over HTTP on a remote exec-server: sessions are per MCP session", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  let client: ExecServerClient | null = null;
  const a = new Client({ name: "a", version: "1" });
  const b = new Client({ name: "b", version: "1" });
  const http = await serveExecToolsHttp(client = await connect({ url: listener.url }), {
    port: 0,
    logger: nullLogger,
  });
  try {
    await a.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    await b.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    const started = (await a.callTool({
      name: "exec_command",
      arguments: { command: "cat", cwd: "/", yield_time_ms: 0 },
    })) as ToolResult;
    const id = started.structuredContent!.session_id as string;
    const fromB = (await b.callTool({
      name: "write_stdin",
      arguments: { session_id: id, chars: "" },
    })) as ToolResult;
    assertEquals(fromB.isError, true);
    const fromA = (await a.callTool({
      name: "write_stdin",
      arguments: { session_id: id, chars: "x", close_stdin: true, yield_time_ms: 5000 },
    })) as ToolResult;
    assertEquals(fromA.structuredContent!.stdout, "x");
  } finally {
    await a.close();
    await b.close();
    await http.close();
    await client?.close();
    await listener.close();
    await server.close();
  }
});

Deno.test("exec-server mcp: the real command over stdio", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "mcp"],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  const lines = jsonLines(child.stdout);
  const next = () => lines.next();
  const send = (m: unknown) => writer.write(new TextEncoder().encode(JSON.stringify(m) + "\n"));
  await send(mcpInitialize());
  const init = await next();
  assertEquals(init.result.serverInfo.name, "exec-server");
  await send({ jsonrpc: "2.0", method: "notifications/initialized" });
  await send({
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: { name: "exec_command", arguments: { argv: ["echo", "via stdio"], cwd: "/" } },
  });
  const call = await next();
  assertEquals(call.id, 2);
  assertEquals(call.result.structuredContent.stdout, "via stdio\n");
  await writer.close();
  assertEquals((await child.status).code, 0);
  await lines.cancel();
});

Deno.test("exec-server mcp: requests piped with end of input are all answered before exit", async () => {
  const script = [
    mcpInitialize(),
    { jsonrpc: "2.0", method: "notifications/initialized" },
    {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: {
        name: "exec_command",
        arguments: { argv: ["sh", "-c", "sleep 0.3; echo late"], cwd: "/" },
      },
    },
  ].map((m) => JSON.stringify(m) + "\n").join("");
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "mcp"],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(script));
  await writer.close(); // end of input right after the requests
  const out = await child.output();
  assertEquals(out.code, 0);
  const answers = new TextDecoder().decode(out.stdout).trim().split("\n").map((l) => JSON.parse(l));
  assertEquals(answers.map((a) => a.id), [1, 2]);
  assertEquals(answers[1].result.structuredContent.stdout, "late\n");
});
