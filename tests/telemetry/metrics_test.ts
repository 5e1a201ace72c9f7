// Metrics as the reference names them, served on `--metrics-listen` in the
// Prometheus text format: a fixed workload over stdio, then the exact
// counts it implies. The listener's refusals (wrong path, wrong method)
// and the address parser's too.

import { assert, assertEquals, assertThrows } from "../helpers/assert.ts";
import { freePort, spawnStdioServer } from "../helpers/wire_client.ts";
import { metricsWorkload, samples } from "../helpers/metrics_workload.ts";
import { parseMetricsAddress } from "../../src/telemetry/address.ts";
import { DURATION_BOUNDS_SECONDS } from "../../src/telemetry/exec_metrics.ts";

Deno.test("metrics: serve --metrics-listen counts connections, requests by method and result, and processes by result, exactly", async () => {
  const port = freePort();
  await using s = spawnStdioServer([
    "serve",
    "--listen",
    "stdio",
    "--log-level",
    "error",
    "--metrics-listen",
    `127.0.0.1:${port}`,
  ]);
  await metricsWorkload(s.client);
  const url = `http://127.0.0.1:${port}/metrics`;
  const response = await fetch(url);
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  const text = await response.text();
  const got = samples(text);
  const want: Array<[string, number]> = [
    ['exec_server_connections_total{transport="stdio"}', 1],
    ['exec_server_connections_active{transport="stdio"}', 1],
    ['exec_server_connections_active{transport="websocket"}', 0],
    ['exec_server_connections_active{transport="relay"}', 0],
    ["exec_server_processes_active", 0],
    ['exec_server_requests_total{method="initialize",result="success"}', 1],
    ['exec_server_requests_total{method="process/start",result="success"}', 2],
    ['exec_server_requests_total{method="unknown",result="error"}', 1],
    ['exec_server_requests_total{method="fs/readFile",result="error"}', 1],
    ['exec_server_processes_finished_total{result="success"}', 1],
    ['exec_server_processes_finished_total{result="error"}', 1],
    ['exec_server_process_duration_seconds_count{result="success"}', 1],
    ['exec_server_request_duration_seconds_count{method="process/start",result="success"}', 2],
    ['exec_server_request_total_duration_seconds_count{method="initialize",result="success"}', 1],
    ['exec_server_request_queue_duration_seconds_count{method="process/start"}', 2],
  ];
  for (const [key, value] of want) assertEquals([key, got.get(key)], [key, value], text);
  // Every histogram has the reference's bounds.
  const bounds = [
    ...text.matchAll(
      /^exec_server_request_duration_seconds_bucket\{method="initialize",result="success",le="([^"]+)"\}/gm,
    ),
  ]
    .map((m) => m[1]);
  assertEquals(bounds, [...DURATION_BOUNDS_SECONDS.map(String), "+Inf"]);
  // Nothing names a process, a path or a session.
  for (const leak of ['"ok"', '"bad"', "relative", "no/such/method"]) {
    assert(!text.includes(leak), leak);
  }
  const wrongPath = await fetch(`http://127.0.0.1:${port}/`);
  assertEquals([wrongPath.status, await wrongPath.text()], [
    404,
    "not found: metrics are at /metrics\n",
  ]);
  const wrongMethod = await fetch(url, { method: "POST", body: "x" });
  assertEquals(wrongMethod.status, 405);
  assertEquals(wrongMethod.headers.get("allow"), "GET, HEAD");
  await wrongMethod.body?.cancel();
  // A huge request is refused unread, with an answer the client gets.
  const huge = await fetch(url, { method: "POST", body: "x".repeat(1 << 20) });
  assertEquals([huge.status, await huge.text()], [413, "a scrape has no body\n"]);
  // HEAD: a GET's head, no body.
  const head = await fetch(url, { method: "HEAD" });
  assertEquals([head.status, await head.text()], [200, ""]);
  assert(Number(head.headers.get("content-length")) > 1000);
  // A client that never finishes its head holds only its own connection.
  const stalled = await Deno.connect({ hostname: "127.0.0.1", port });
  await stalled.write(new TextEncoder().encode("GET /metrics HTTP/1.1\r\nhost: x\r\n"));
  const meanwhile = await fetch(url);
  assertEquals(meanwhile.status, 200);
  await meanwhile.body?.cancel();
  stalled.close();
});

Deno.test("metrics: --metrics-listen addresses are parsed strictly", () => {
  assertEquals(parseMetricsAddress("9464"), { hostname: "127.0.0.1", port: 9464 });
  assertEquals(parseMetricsAddress("localhost:0"), { hostname: "127.0.0.1", port: 0 });
  assertEquals(parseMetricsAddress("0.0.0.0:9464"), { hostname: "0.0.0.0", port: 9464 });
  assertEquals(parseMetricsAddress("[::1]:9464"), { hostname: "::1", port: 9464 });
  for (
    const bad of [
      "",
      "host.example:9464",
      "127.0.0.1:65536",
      "127.0.0.1:",
      "::1:9464",
      "[::1]",
      ":9464",
      "127.0.0.1:9x",
    ]
  ) {
    assertThrows(() => parseMetricsAddress(bad), Error, "invalid --metrics-listen");
  }
});

Deno.test("metrics: a delta producer reports what changed since its own last collection; a cumulative one the totals", async () => {
  const { ExecServerMetrics } = await import("../../src/telemetry/exec_metrics.ts");
  const m = new ExecServerMetrics();
  const delta = m.producer("delta");
  const cumulative = m.producer("cumulative");
  type Metric = {
    descriptor: { name: string };
    aggregationTemporality: number;
    dataPoints: Array<
      {
        attributes: Record<string, string>;
        value: number | { count: number; sum: number; buckets: { counts: number[] } };
      }
    >;
  };
  const read = async (p: typeof delta) => {
    const { resourceMetrics } = await p.collect();
    const out: Record<string, unknown> = {};
    for (const metric of (resourceMetrics.scopeMetrics[0] as { metrics: Metric[] }).metrics) {
      for (const point of metric.dataPoints) {
        const v = point.value;
        out[`${metric.descriptor.name}${JSON.stringify(point.attributes)}`] = typeof v === "number"
          ? v
          : v.count;
      }
    }
    return out;
  };
  m.request("fs/readFile", "success", { queuedSeconds: 0.001, runSeconds: 0.002 });
  m.request("fs/readFile", "success", { queuedSeconds: 0.001, runSeconds: 0.3 });
  const first = await read(delta);
  assertEquals(first['exec_server_requests_total{"method":"fs/readFile","result":"success"}'], 2);
  assertEquals(first['codex.process.start{"originator":"other"}'], 1);
  m.request("no/such", "error", { queuedSeconds: 0, runSeconds: 0 });
  const second = await read(delta);
  // Only what changed: the fs/readFile series and the start counter are left out.
  assertEquals(second['exec_server_requests_total{"method":"unknown","result":"error"}'], 1);
  assertEquals(
    second['exec_server_requests_total{"method":"fs/readFile","result":"success"}'],
    undefined,
  );
  assertEquals(second['codex.process.start{"originator":"other"}'], undefined);
  // Gauges are always there.
  assertEquals(second["exec_server_processes_active{}"], 0);
  const totals = await read(cumulative);
  assertEquals(totals['exec_server_requests_total{"method":"fs/readFile","result":"success"}'], 2);
  assertEquals(
    totals['exec_server_request_duration_seconds{"method":"fs/readFile","result":"success"}'],
    2,
  );
  assertEquals(totals['codex.process.start{"originator":"other"}'], 1);
  // The buckets: 0.002 s in (0, 0.005], 0.3 s in (0.25, 0.5].
  const { resourceMetrics } = await cumulative.collect();
  const histogram = (resourceMetrics.scopeMetrics[0] as { metrics: Metric[] }).metrics.find((x) =>
    x.descriptor.name === "exec_server_request_duration_seconds"
  )!;
  const v = histogram.dataPoints[0]!.value as { sum: number; buckets: { counts: number[] } };
  assertEquals(v.buckets.counts[1], 1);
  assertEquals(v.buckets.counts[DURATION_BOUNDS_SECONDS.indexOf(0.5)], 1);
  assertEquals(Math.round(v.sum * 1000), 302);
});
