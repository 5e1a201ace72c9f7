import { assert, assertEquals } from "../helpers/assert.ts";
import { ROOT } from "../helpers/wire_client.ts";

interface GraphModule {
  specifier: string;
  size?: number;
  dependencies?: Array<{ code?: { specifier: string }; isDynamic?: boolean }>;
  npmPackage?: string;
}

/** What importing `entry` loads: modules reached by static imports only. */
async function staticGraph(entry: string): Promise<{ modules: string[]; bytes: number }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "--config", `${ROOT}deno.json`, `${ROOT}${entry}`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: GraphModule[];
    redirects?: Record<string, string>;
  };
  const bySpecifier = new Map(graph.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const stack = [...graph.roots];
  let bytes = 0;
  while (stack.length > 0) {
    const raw = stack.pop()!;
    const s = graph.redirects?.[raw] ?? raw;
    if (seen.has(s)) continue;
    seen.add(s);
    const m = bySpecifier.get(s);
    bytes += m?.size ?? 0;
    for (const d of m?.dependencies ?? []) {
      if (!d.isDynamic && d.code?.specifier) stack.push(d.code.specifier);
    }
  }
  return { modules: [...seen], bytes };
}

Deno.test("exports: every subpath entry exists with a module doc", async () => {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  assertEquals(Object.keys(config.exports).sort(), [
    ".",
    "./cli",
    "./client",
    "./mcp",
    "./protocol",
    "./proxy",
    "./relay",
    "./server",
    "./sidecars",
  ]);
  for (const [name, file] of Object.entries(config.exports as Record<string, string>)) {
    const text = await Deno.readTextFile(`${ROOT}${file}`);
    assert(text.includes("@module"), `${name} has a module doc`);
  }
});

Deno.test("exports: the client loads no server, proxy, MCP or TOML code", async () => {
  const client = await staticGraph("client.ts");
  const forbidden = /modelcontextprotocol|zod|x509|smol-toml|\/src\/(server|proxy|mcp|sidecars)\//;
  const bad = client.modules.filter((m) => forbidden.test(m));
  assertEquals(bad, [], "the client must not load these");
  assert(!client.modules.some((m) => m.startsWith("npm:")), "no npm package at import time");
  // Against a server once its method families have loaded (their handlers
  // load on first use).
  const server = new Set((await staticGraph("mod.ts")).modules);
  for (const family of ["process", "fs", "http", "discovery"]) {
    for (const m of (await staticGraph(`src/server/handlers/${family}.ts`)).modules) server.add(m);
  }
  assert(client.modules.length < server.size / 2, `${client.modules.length} vs ${server.size}`);
});

Deno.test("exports: a plain `serve` loads no egress proxy, relay, Noise or Node networking code until asked", async () => {
  // The proxy, its MITM and SOCKS5 listeners, the relay and its crypto load
  // only for `--network-proxy`, `--remote` or a start with `networkProxy`;
  // Node's modules (megabytes of an idle server's memory) with the first
  // terminal, glob policy or collecting trim — none at start (the argument
  // parser and the path arithmetic are our own: importing any `node:`
  // module costs a first answer ~13 ms). The method families' handlers,
  // the WebSocket listener and Codex's configuration layers are evaluated
  // on first use, after the first `initialize` is answered.
  const serve = await staticGraph("src/cli/serve.ts");
  const forbidden =
    /\/src\/(relay|noise|socks5|websocket|discovery)\/|\/src\/codex_config\/(?!locations\.ts$)|\/src\/telemetry\/(?!address|requested|command)|\/src\/proxy\/(network_proxy|start|config_file|mitm\/)|\/src\/server\/(network_launch|listen_ws|handlers\/(process|fs|http|discovery))\.ts|npm:|node:/;
  assertEquals(serve.modules.filter((m) => forbidden.test(m)), []);
  // The command line's own graph, before `serve` is chosen, is smaller still.
  const cli = await staticGraph("cli.ts");
  assert(cli.modules.length < 20, `${cli.modules.length} modules before a command is chosen`);
});

Deno.test("architecture: no import cycles, and dependencies point inward", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "--config", `${ROOT}deno.json`, `${ROOT}mod.ts`],
    stdout: "piped",
    stderr: "null",
  }).output();
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: Array<{
      specifier: string;
      dependencies?: Array<{ code?: { specifier: string }; type?: { specifier: string } }>;
    }>;
  };
  const src = `file://${ROOT}src/`;
  const edges = new Map<string, string[]>();
  for (const m of graph.modules) {
    if (!m.specifier.startsWith(src)) continue;
    const deps = (m.dependencies ?? []).flatMap((d) => [d.code?.specifier, d.type?.specifier])
      .filter((s): s is string => s !== undefined && s.startsWith(src));
    edges.set(m.specifier.slice(src.length), [...new Set(deps)].map((s) => s.slice(src.length)));
  }
  // Cycles (type-only imports included): depth-first search with colours.
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (node: string, path: string[]) => {
    state.set(node, "open");
    for (const next of edges.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...path, node, next].join(" → "));
      else if (!state.has(next)) visit(next, [...path, node]);
    }
    state.set(node, "done");
  };
  for (const node of edges.keys()) if (!state.has(node)) visit(node, []);
  assertEquals(cycles, []);
  // Layers that must not know the ones above them.
  const forbidden: Array<[string, RegExp]> = [
    ["websocket/", /^(jsonrpc|server|client|relay)\//],
    ["http1/", /^(jsonrpc|server|client|relay|proxy|sidecars|mcp|http)\//],
    ["util/", /^http1\//],
    // Filesystem operations speak in their own error kinds, not protocol codes.
    ["fs/", /^(server|client|relay|jsonrpc|sandbox|protocol\/errors\.ts)/],
    ["sandbox/", /^(server|client|relay|proxy|mcp)\//],
    ["jsonrpc/", /^(server|client|relay|process|fs|http|mcp|proxy)\//],
    ["relay/", /^client\//],
    ["relay/wire/", /^relay\/(executor|server)\//],
    ["relay/executor/", /^relay\/server\//],
    ["relay/server/", /^relay\/executor\//],
    ["server/handler.ts", /^server\/connection\.ts$/],
    ["util/", /^(server|client|relay|jsonrpc|mcp|proxy)\//],
    ["protocol/", /^(server|client|relay)\//],
    // Logging is below everything that logs: its own minimal types.
    ["log/", /^(jsonrpc|protocol|server|client|relay|process|websocket|mcp|proxy|sidecars)\//],
  ];
  const upward: string[] = [];
  for (const [from, deps] of edges) {
    for (const [prefix, bad] of forbidden) {
      if (!from.startsWith(prefix)) continue;
      for (const d of deps) if (bad.test(d)) upward.push(`${from} → ${d}`);
    }
  }
  assertEquals(upward, []);
});

Deno.test("protocol: one method map types the client's requests", async () => {
  const { connect, ExecServer, inProcessTransport, Method } = await import("../../mod.ts");
  await using server = new ExecServer();
  await using client = await connect({ transport: inProcessTransport(server) });
  const meta = await client.request(Method.FsGetMetadata, { path: "file:///" });
  const isDirectory: boolean = meta.isDirectory; // the result type comes from the map
  assert(isDirectory);
  const status = await client.request(Method.EnvironmentStatus);
  assertEquals(status.status, "ready");
  // @ts-expect-error: fs/getMetadata takes a `path`, not a `file`
  await client.request(Method.FsGetMetadata, { file: "/" }).catch(() => {});
});

Deno.test("packages only tests use stay out of the package's import map and lock; the tests' config carries the package's unchanged", async () => {
  const pkg = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  const tests = JSON.parse(await Deno.readTextFile(`${ROOT}deno.test.json`));
  for (const [name, target] of Object.entries(pkg.imports as Record<string, string>)) {
    assertEquals(tests.imports[name], target, `deno.test.json must map ${name} as deno.json does`);
  }
  const lock = await Deno.readTextFile(`${ROOT}deno.lock`);
  for (const testOnly of ["@modelcontextprotocol/conformance", "server-everything", "npm:socks"]) {
    assert(!Object.values(pkg.imports).some((t) => String(t).includes(testOnly)), testOnly);
    assert(!lock.includes(testOnly), `deno.lock holds ${testOnly}`);
  }
  assertEquals(tests.compilerOptions, pkg.compilerOptions);
});
