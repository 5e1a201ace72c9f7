// The metrics of the package's other parts, scraped from `/metrics` after a
// workload whose counts they must show exactly: the egress proxy (`proxy
// --metrics-listen`: decisions, connections, upstream failures), a relay
// node (registry requests, upgrades, sockets, bytes — equal to what the
// relay forwarded — and its store), the MCP runtime (starts, tool calls,
// lost servers, states) and an mcp-bridge endpoint (sessions opened,
// refused at the cap, closed).

import { assert, assertEquals } from "../helpers/assert.ts";
import { CLI } from "../helpers/cli.ts";
import { assertSamples, scrape } from "../helpers/metrics_workload.ts";
import { curl, httpOrigin } from "../helpers/proxy.ts";
import { eventually, freePort } from "../helpers/wire_client.ts";
import { mcpInitialize } from "../helpers/mcp.ts";
import { startTelemetry } from "../../src/telemetry/provider.ts";
import { metricsUrl } from "../../src/telemetry/address.ts";
import type { MetricSet } from "../../src/telemetry/aggregate.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import { RelayMetrics } from "../../src/relay/server/metrics.ts";
import type { RelayStore } from "../../src/relay/server/store.ts";
import { StoreUnavailableError } from "../../src/relay/server/store.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { connect } from "../../src/client/client.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import { McpConnectionManager } from "../../src/mcp/runtime/manager.ts";
import { parseMcpServerConfig } from "../../src/mcp/runtime/config.ts";
import { McpRuntimeMetrics } from "../../src/mcp/runtime/metrics.ts";

await loadNoiseCrypto(); // once, outside the tests (a dynamic library stays loaded)

const TINY = new URL("../fixtures/mcp_tiny_server.ts", import.meta.url).pathname;

/** Serves `set` on a Prometheus listener of its own for the test's scrapes. */
async function served(set: MetricSet) {
  const telemetry = await startTelemetry({
    prometheus: { hostname: "127.0.0.1", port: 0 },
    producers: (t) => set.producer(t),
  });
  return { telemetry, url: metricsUrl(telemetry.prometheusAddr!) };
}

/** The first line of a child's stdout, parsed as JSON; the rest is dropped. */
async function firstJsonLine(stream: ReadableStream<Uint8Array>): Promise<Record<string, string>> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  try {
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`no line: ${text}`);
      text += value;
    }
  } finally {
    await reader.cancel();
  }
  return JSON.parse(text.slice(0, text.indexOf("\n")));
}

Deno.test("parts metrics: proxy --metrics-listen counts decisions by protocol, decision, source and reason, connections and upstream failures", async () => {
  const origin = httpOrigin();
  const closed = freePort(); // nothing listens there
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(
    `${dir}/proxy.toml`,
    `enabled = true\nallow_local_binding = true\n[domains]\n"127.0.0.1" = "allow"\n"denied.test" = "deny"\n`,
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "proxy",
      "--config",
      `${dir}/proxy.toml`,
      "--ephemeral",
      "--home",
      dir,
      "--metrics-listen",
      "0",
      "--log-level",
      "error",
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    const listening = await firstJsonLine(child.stdout);
    assert(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/.test(listening.metrics!), listening.metrics);
    const p = `http://${listening.http}`;
    assertEquals((await curl(["-x", p, `${origin.url}/one`])).status, 200);
    assertEquals((await curl(["-x", p, `${origin.url}/two`])).status, 200);
    assertEquals((await curl(["-x", p, "http://denied.test/"])).status, 403);
    assertEquals((await curl(["-x", p, `http://127.0.0.1:${closed}/`])).status, 502);
    const tunnel = await curl(["-p", "-x", p, `http://127.0.0.1:${closed}/`]);
    assert(tunnel.code !== 0, "the tunnel's upstream is down");
    // Each curl closed its connection; the proxy's side ends right after.
    const url = listening.metrics!;
    assert(
      await eventually(async () =>
        (await scrape(url)).got.get('network_proxy_connections_active{listener="http"}') === 0
      ),
      "connections never closed",
    );
    const scraped = await scrape(url);
    const allow = 'protocol="http",decision="allow",source="baseline_policy",reason="allow"';
    const connect =
      'protocol="https_connect",decision="allow",source="baseline_policy",reason="allow"';
    assertSamples(scraped, [
      ['network_proxy_connections_total{listener="http"}', 5],
      ['network_proxy_connections_active{listener="socks5"}', 0],
      [`network_proxy_decisions_total{${allow}}`, 3],
      [`network_proxy_decisions_total{${connect}}`, 1],
      [
        'network_proxy_decisions_total{protocol="http",decision="deny",source="baseline_policy",reason="denied"}',
        1,
      ],
      ['network_proxy_upstream_errors_total{protocol="http"}', 1],
      ['network_proxy_upstream_errors_total{protocol="https_connect"}', 1],
    ]);
    // Hosts, ports and clients never appear.
    for (const leak of ["denied.test", "127.0.0.1", String(closed)]) {
      assert(!scraped.text.includes(leak), leak);
    }
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await origin.server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("parts metrics: a relay node counts registry requests, upgrades, sockets, the bytes it relayed and its store's operations", async () => {
  const metrics = new RelayMetrics();
  const forwarded = { to_executor: 0, to_harness: 0 };
  const relay = await startRelayServer({
    port: 0,
    logger: nullLogger,
    metrics,
    onForward: (bytes, direction) => (forwarded[direction] += bytes.length),
  });
  const { telemetry, url } = await served(metrics.set);
  const server = new ExecServer({ logger: nullLogger });
  let executor: RemoteExecutor | null = null;
  try {
    // A registration with a harness's token is refused.
    const wrong = await fetch(`${relay.url}/cloud/environment/env-r/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${await relay.store.createToken("harness", "env-r")}` },
      body: "{}",
    });
    await wrong.body?.cancel();
    const refusedCode = wrong.status;
    assert(refusedCode >= 400, String(refusedCode));
    executor = await RemoteExecutor.start({
      registry: { url: relay.url, bearer: await relay.store.createToken("executor", "env-r") },
      environmentId: "env-r",
      server,
      logger: nullLogger,
    });
    await executor.connected;
    const client = await connect({
      rendezvous: {
        registryUrl: relay.url,
        environmentId: "env-r",
        token: await relay.store.createToken("harness", "env-r"),
      },
    });
    assertEquals((await client.run("echo relayed")).stdout, "relayed\n");
    const open = await scrape(url);
    assertSamples(open, [["relay_executor_sockets", 1], ["relay_harness_streams", 1]]);
    await client.close();
    assert(
      await eventually(async () => (await scrape(url)).got.get("relay_harness_streams") === 0),
      "the harness stream never closed",
    );
    const scraped = await scrape(url);
    assertSamples(scraped, [
      ['relay_registry_requests_total{endpoint="register",result="success"}', 1],
      ['relay_registry_requests_total{endpoint="connect",result="success"}', 1],
      ['relay_rendezvous_upgrades_total{role="executor",result="accepted"}', 1],
      ['relay_rendezvous_upgrades_total{role="harness",result="accepted"}', 1],
      ['relay_bytes_total{direction="to_executor"}', forwarded.to_executor],
      ['relay_bytes_total{direction="to_harness"}', forwarded.to_harness],
      [
        'relay_store_operation_duration_seconds_count{operation="register",result="success"}',
        1,
      ],
      ["relay_executor_sockets", 1],
    ]);
    assert(forwarded.to_executor > 0 && forwarded.to_harness > 0);
    const refused = [...scraped.got].filter(([k]) =>
      k.startsWith('relay_registry_requests_total{endpoint="register",result="') &&
      !k.includes('"success"')
    );
    assertEquals(refused.map(([, v]) => v), [1], scraped.text);
    assert(!scraped.text.includes("env-r"), "no environment id as a label");
  } finally {
    await executor?.close();
    await server.close();
    await relay.close();
    await telemetry.close();
  }
});

Deno.test("parts metrics: a relay store that is unavailable is counted by operation, and its answers still reach the caller", async () => {
  const metrics = new RelayMetrics();
  const down = () => Promise.reject(new StoreUnavailableError("connection refused"));
  const store = metrics.measure({
    description: "fake",
    registration: down,
    socket: () => Promise.resolve(null),
  } as unknown as RelayStore);
  await store.registration("e").then(() => assert(false), (e) => {
    assert(e instanceof StoreUnavailableError);
  });
  assertEquals(await store.socket("e"), null);
  assertEquals(store.description, "fake");
  assertEquals(metrics.storeUnavailable.total({ operation: "registration" }), 1);
  assertEquals(metrics.storeUnavailable.total({ operation: "socket" }), 0);
  assertEquals(
    metrics.storeDuration.total({ operation: "registration", result: "error" }),
    1,
  );
  assertEquals(metrics.storeDuration.total({ operation: "socket", result: "success" }), 1);
});

Deno.test("parts metrics: the MCP runtime counts starts by outcome, tool calls by outcome, lost servers and states", async () => {
  const dir = await Deno.makeTempDir();
  const failFile = `${dir}/fail`;
  await Deno.writeTextFile(failFile, "");
  const tiny = (name: string, env: Record<string, string> = {}) =>
    parseMcpServerConfig(name, {
      command: Deno.execPath(),
      args: ["run", "-A", "--no-config", TINY],
      env: { TINY_NAME: name, ...env },
      startup_timeout_sec: 60,
    });
  const metrics = new McpRuntimeMetrics();
  const manager = McpConnectionManager.start({
    servers: [tiny("good"), tiny("broken", { TINY_FAIL_FILE: failFile })],
    metrics,
  });
  const { telemetry, url } = await served(metrics.set);
  try {
    const summary = await manager.startupComplete;
    assertEquals(summary.ready, ["good"]);
    assertEquals(summary.failed.map((f) => f.server), ["broken"]);
    await manager.callTool({ server: "good", tool: "echo" }, { message: "a" });
    await manager.callTool({ server: "good", tool: "echo" }, { message: "b" });
    const unknown = await manager.callTool({ server: "good", tool: "nope" });
    assertEquals(unknown.isError, true);
    // The server exits mid-call: the call fails and the server is lost.
    await manager.callTool({ server: "good", tool: "die" }).then(
      () => assert(false, "the call succeeded"),
      () => {},
    );
    assert(
      await eventually(() => manager.status().find((s) => s.name === "good")?.state === "failed"),
      "the lost server never failed",
    );
    const scraped = await scrape(url);
    assertSamples(scraped, [
      ['mcp_server_startups_total{server="good",result="ready"}', 1],
      ['mcp_server_startups_total{server="broken",result="failed"}', 1],
      ['mcp_server_startup_duration_seconds_count{server="good",result="ready"}', 1],
      ['mcp_server_first_tool_list_duration_seconds_count{server="good"}', 1],
      ['mcp_tool_calls_total{server="good",result="success"}', 2],
      ['mcp_tool_calls_total{server="good",result="tool_error"}', 1],
      ['mcp_tool_calls_total{server="good",result="error"}', 1],
      ['mcp_tool_call_duration_seconds_count{server="good",result="success"}', 2],
      ['mcp_server_lost_total{server="good",reason="closed"}', 1],
      ['mcp_server_state{server="good",state="failed"}', 1],
      ['mcp_server_state{server="broken",state="failed"}', 1],
    ]);
    assert(
      !scraped.text.includes('"a"') && !scraped.text.includes("nope"),
      "no arguments or tools",
    );
  } finally {
    await manager.shutdown();
    await telemetry.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("parts metrics: mcp-bridge --http --metrics-listen counts sessions opened, refused at the cap and closed", async () => {
  const http = freePort();
  const metricsPort = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "mcp-bridge",
      "--http",
      String(http),
      "--max-sessions",
      "1",
      "--metrics-listen",
      String(metricsPort),
      "--",
      Deno.execPath(),
      "run",
      "-A",
      "--no-config",
      TINY,
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const endpoint = `http://127.0.0.1:${http}/mcp`;
  const initialize = () =>
    fetch(endpoint, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify(mcpInitialize()),
    });
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  try {
    // Up when it says so.
    let seen = "";
    while (!seen.includes("mcp-bridge listening on")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the bridge did not start: ${seen}`);
      seen += value;
    }
    const first = await initialize();
    assertEquals(first.status, 200);
    const session = first.headers.get("mcp-session-id")!;
    await first.body?.cancel();
    const second = await initialize();
    assertEquals(second.status, 503);
    await second.body?.cancel();
    const url = `http://127.0.0.1:${metricsPort}/metrics`;
    assertSamples(await scrape(url), [
      ["mcp_bridge_sessions_open", 1],
      ['mcp_bridge_sessions_total{result="opened"}', 1],
      ['mcp_bridge_sessions_total{result="refused"}', 1],
    ]);
    const deleted = await fetch(endpoint, {
      method: "DELETE",
      headers: { "mcp-session-id": session },
    });
    await deleted.body?.cancel();
    assert(
      await eventually(async () => (await scrape(url)).got.get("mcp_bridge_sessions_open") === 0),
      "the session never closed",
    );
    assertSamples(await scrape(url), [['mcp_bridge_sessions_closed_total{reason="deleted"}', 1]]);
  } finally {
    child.kill("SIGTERM");
    await reader.cancel();
    await child.status;
  }
});

Deno.test("parts metrics: mcp-bridge refuses --metrics-listen without --http, and every command refuses a bad address", async () => {
  const run = async (args: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, ...args],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
  };
  const stdio = await run(["mcp-bridge", "--metrics-listen", "0", "--", "true"]);
  assertEquals(stdio.code, 2);
  assert(stdio.stderr.includes("--metrics-listen needs --http"), stdio.stderr);
  for (
    const args of [
      ["relay", "--metrics-listen", "example.com:9"],
      ["proxy", "--config", "/nonexistent.toml", "--metrics-listen", "example.com:9"],
      ["mcp-bridge", "--http", "0", "--metrics-listen", "example.com:9", "--", "true"],
    ]
  ) {
    const r = await run(args);
    assertEquals(r.code, 2, `${args[0]}: ${r.stderr}`);
    assert(r.stderr.includes('invalid --metrics-listen "example.com:9"'), r.stderr);
  }
});

Deno.test("parts metrics: docs/telemetry.md's tables name every metric the package registers, and no other", async () => {
  const { ExecServerMetrics } = await import("../../src/telemetry/exec_metrics.ts");
  const { ProxyMetrics } = await import("../../src/proxy/metrics.ts");
  const { McpSessionMetrics } = await import("../../src/mcp/session_metrics.ts");
  const registered = [
    new ExecServerMetrics().set,
    new ProxyMetrics().set,
    new RelayMetrics().set,
    new McpRuntimeMetrics().set,
    new McpSessionMetrics().set,
    new (await import("../../src/telemetry/client_metrics.ts")).ExecClientMetrics().set,
  ].flatMap((set) => set.names);
  const page = await Deno.readTextFile(new URL("../../docs/telemetry.md", import.meta.url));
  const documented = [...page.matchAll(/^\| `([a-z_.]+)`/gm)].map((m) => m[1]!);
  assertEquals([...documented].sort(), [...registered].sort());
});
