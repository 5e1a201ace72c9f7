// The harness side's metric: `exec_server_client_requests_total{method}`,
// every request a client attempts (failures before it left included). The
// real `codex exec`, driving our server, pushes it; ours pushes the same
// shape (name, kind, unit, description, temporality, scope, label names),
// and counts a fixed workload exactly.

import { assert, assertEquals } from "../helpers/assert.ts";
import { type OtlpPoint, startOtlpReceiver } from "../helpers/otlp.ts";
import { codexExecOnce, fakeModel } from "../helpers/fake_model.ts";
import { referenceBin, scratchRoot } from "../helpers/reference.ts";
import { startWsServer } from "../helpers/ws_server.ts";
import { freePort } from "../helpers/wire_client.ts";
import { connect, connectLazy, ExecClientMetrics } from "../../client.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { inProcessTransport } from "../../src/client/in_process.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { startTelemetry } from "../../src/telemetry/provider.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";

const NAME = "exec_server_client_requests_total";

const shape = (p: OtlpPoint) =>
  JSON.stringify([
    p.scope,
    p.name,
    p.kind,
    p.unit,
    p.description,
    p.temporality,
    p.monotonic,
    Object.keys(p.attributes).sort(),
  ]);

/** What `codex exec` itself pushes while it drives our server through one command. */
async function codexPush(): Promise<OtlpPoint[]> {
  const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "client-metrics-" });
  try {
    await Deno.mkdir(`${base}/ws`);
    await Deno.mkdir(`${base}/home`);
    await using rx = startOtlpReceiver();
    await using model = fakeModel([{ call: "exec_command", cmd: "echo hi" }, { message: "done" }]);
    await using server = await startWsServer("ours", {});
    await codexExecOnce({
      codex: referenceBin()!,
      home: `${base}/home`,
      ws: `${base}/ws`,
      model,
      serverUrl: server.url,
      otel: [
        `metrics_exporter = { otlp-http = { endpoint = "${rx.url}/v1/metrics", protocol = "json" } }`,
      ],
    });
    // Pushed at exit.
    return await rx.waitFor((p) => p.some((x) => x.name === NAME), 30_000);
  } finally {
    await Deno.remove(base, { recursive: true });
  }
}

Deno.test({
  name: "client metrics: our client pushes exec_server_client_requests_total as codex exec does",
  // codex exec runs its command in its default (bubblewrap) sandbox.
  ignore: referenceBin() === null || !sandboxSupport().available,
  async fn() {
    const codex = (await codexPush()).filter((p) => p.name === NAME);
    assert(codex.some((p) => p.attributes.method === "process/start"), JSON.stringify(codex));
    // Ours, pushed the same way (OTLP/HTTP JSON, deltas), after a small workload.
    await using rx = startOtlpReceiver();
    const metrics = new ExecClientMetrics();
    const telemetry = await startTelemetry({
      otlp: {
        endpoint: `${rx.url}/v1/metrics`,
        protocol: "json",
        headers: {},
        intervalMs: 60_000,
        environment: "dev",
      },
      producers: (t) => metrics.set.producer(t),
    });
    const server = new ExecServer({ logger: nullLogger });
    const client = await connect({ transport: inProcessTransport(server), metrics });
    await client.command("/bin/true").output();
    await client.close();
    await server.close();
    await telemetry.close();
    const ours = (await rx.waitFor((p) => p.some((x) => x.name === NAME))).filter((p) =>
      p.name === NAME
    );
    assertEquals([...new Set(ours.map(shape))], [...new Set(codex.map(shape))]);
  },
});

Deno.test("client metrics: every attempt counts by method — a request that never left, an unknown method, a refused one", async () => {
  const metrics = new ExecClientMetrics();
  const server = new ExecServer({ logger: nullLogger });
  const client = await connect({ transport: inProcessTransport(server), metrics });
  try {
    await client.command("/bin/true").output();
    await client.call("no/such/method").catch(() => {});
    await client.call("fs/readFile", { path: "relative" }).then(() => assert(false), () => {});
  } finally {
    await client.close();
    await server.close();
  }
  // Nothing listens there: the attempt fails before anything is sent.
  const lazy = connectLazy({
    url: `ws://127.0.0.1:${freePort()}`,
    connectTimeoutMs: 2_000,
    reconnect: false,
    metrics,
  });
  await lazy.request("environment/status").then(() => assert(false), () => {});
  await lazy.close();
  const counts = Object.fromEntries(
    [...metrics.requests.cells.values()].map((c) => [c.attributes.method, c.value]),
  );
  assertEquals(counts["initialize"], 1);
  assertEquals(counts["process/start"], 1);
  assertEquals(counts["unknown"], 1);
  assertEquals(counts["fs/readFile"], 1);
  assertEquals(counts["environment/status"], 1);
});
