// Startup of N configured MCP stdio servers through the MCP runtime (not a
// test: numbers only). For each round:
//   concurrent, cold   the manager starts all N at once, no tool cache:
//                      time to the first tool list (the first server ready)
//                      and to all ready
//   concurrent, cached the same with the cache of the previous run: time to
//                      the first tool list (served from the cache) and to all
//                      ready (live lists replace the cached ones)
//   one after another  each server started and listed before the next, the
//                      way a harness without a manager does it: time to all
//                      ready
//
//   deno run -A bench/mcp_startup_bench.ts [--servers 10] [--rounds 3] [--server tiny|everything]

import { parseMcpServerConfig } from "../src/mcp/runtime/config.ts";
import { McpConnectionManager } from "../src/mcp/runtime/manager.ts";
import { median } from "./helpers.ts";

function flag(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1]! : fallback;
}

const count = Number(flag("servers", "10"));
const rounds = Number(flag("rounds", "3"));
const kind = flag("server", "everything");
const root = new URL("../", import.meta.url).pathname;
const args = kind === "tiny"
  ? ["run", "-A", "--no-config", `${root}tests/fixtures/mcp_tiny_server.ts`]
  : [
    "run",
    "-A",
    "--cached-only",
    "--config",
    `${root}deno.test.json`,
    "npm:@modelcontextprotocol/server-everything@2026.8.31",
  ];
const servers = Array.from(
  { length: count },
  (_, i) =>
    parseMcpServerConfig(`s${i}`, {
      command: Deno.execPath(),
      args,
      startup_timeout_sec: 300,
    }),
);

async function concurrent(home: string | null): Promise<{ first: number; all: number }> {
  const t0 = performance.now();
  let first = -1;
  const manager = McpConnectionManager.start({
    servers,
    ...(home ? { codexHome: home } : { toolCache: null }),
    onToolsChanged: () => {
      if (first < 0 && manager.listTools().length > 0) first = performance.now() - t0;
    },
  });
  await manager.startupComplete;
  const all = performance.now() - t0;
  await manager.shutdown();
  return { first, all };
}

async function sequential(): Promise<{ first: number; all: number }> {
  const t0 = performance.now();
  let first = -1;
  const managers = [];
  for (const server of servers) {
    const manager = McpConnectionManager.start({ servers: [server], toolCache: null });
    await manager.startupComplete;
    if (first < 0) first = performance.now() - t0;
    managers.push(manager);
  }
  const all = performance.now() - t0;
  await Promise.all(managers.map((m) => m.shutdown()));
  return { first, all };
}

const results: Record<string, { first: number[]; all: number[] }> = {
  "concurrent, cold": { first: [], all: [] },
  "concurrent, cached": { first: [], all: [] },
  "one after another": { first: [], all: [] },
};
// Warm-up (module compilation caches for the servers).
await concurrent(null);
for (let round = 0; round < rounds; round++) {
  const home = await Deno.makeTempDir();
  try {
    const record = (name: string, r: { first: number; all: number }) => {
      results[name]!.first.push(r.first);
      results[name]!.all.push(r.all);
    };
    await concurrent(home); // fills the cache
    record("concurrent, cold", await concurrent(null));
    record("concurrent, cached", await concurrent(home));
    record("one after another", await sequential());
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}
console.log(
  `${count} × ${kind} stdio servers, ${rounds} rounds, median ms (${Deno.build.os}, ${navigator.hardwareConcurrency} CPUs)`,
);
for (const [name, r] of Object.entries(results)) {
  console.log(
    `${name.padEnd(20)} first tool list ${median(r.first).toFixed(0).padStart(6)}   all ready ${
      median(r.all).toFixed(0).padStart(6)
    }`,
  );
}
