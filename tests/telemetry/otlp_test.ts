// Metrics pushed over OTLP/HTTP, side by side with the reference: the same
// Codex configuration (`[otel] metrics_exporter = { otlp-http = … }`) and
// the same workload over stdio for ours and the pinned reference, each
// pushing to a receiver of its own; the metric names, kinds, units,
// temporalities, label sets, bucket bounds, the counts the workload fixes
// and the resource must be the same. And the settings' own rules.

import { assert, assertEquals, assertThrows } from "../helpers/assert.ts";
import { type OtlpPoint, startOtlpReceiver } from "../helpers/otlp.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { ourStdioCommand, spawnCommandServer, type SpawnedServer } from "../helpers/wire_client.ts";
import { metricsWorkload } from "../helpers/metrics_workload.ts";
import { otlpMetricsSettings, OtlpSettingsError } from "../../src/telemetry/otlp_settings.ts";
import { osResource } from "../../src/telemetry/provider.ts";

async function workload(s: SpawnedServer): Promise<void> {
  await metricsWorkload(s.client);
  await s.client.call("environment/status", {});
}

/** Everything a client of the push can compare: shapes, label sets, totals per label set. */
function summary(points: OtlpPoint[]) {
  const shapes = new Set<string>();
  const totals = new Map<string, number>();
  const gauges = new Set<string>();
  for (const p of points) {
    shapes.add(
      JSON.stringify([
        p.scope,
        p.name,
        p.kind,
        p.unit,
        p.description,
        p.temporality ?? null,
        p.monotonic ?? null,
        p.bounds ?? null,
      ]),
    );
    const key = `${p.name}${JSON.stringify(Object.entries(p.attributes).sort())}`;
    if (p.kind === "gauge") gauges.add(key); // a gauge's label sets (its value is a moment's)
    else totals.set(key, (totals.get(key) ?? 0) + p.value); // deltas add up
  }
  return {
    shapes: [...shapes].sort(),
    gauges: [...gauges].sort(),
    totals: Object.fromEntries([...totals].sort(([a], [b]) => a < b ? -1 : 1)),
  };
}

async function run(which: "ours" | "reference") {
  await using rx = startOtlpReceiver();
  const home = referenceHome();
  await Deno.writeTextFile(
    `${home}/config.toml`,
    `[otel]\nmetrics_exporter = { otlp-http = { endpoint = "${rx.url}/v1/metrics", protocol = "json" } }\n`,
  );
  const [program, ...args] = which === "ours"
    ? ourStdioCommand()
    : [referenceBin()!, "exec-server", "--listen", "stdio"];
  {
    await using s = spawnCommandServer(program!, args, { CODEX_HOME: home });
    await workload(s);
  }
  // The default period is a minute: what arrives was pushed at shutdown.
  const points = await rx.waitFor((p) =>
    p.some((x) => x.name === "exec_server_processes_finished_total")
  );
  return { points, resource: rx.resources()[0]! };
}

Deno.test({
  name:
    "otlp: the reference's metrics over OTLP/HTTP JSON — names, kinds, units, temporality, labels, bounds, counts and resource — side by side",
  ignore: referenceBin() === null,
  async fn() {
    const [ours, reference] = await Promise.all([run("ours"), run("reference")]);
    const a = summary(ours.points);
    const b = summary(reference.points);
    assertEquals(a.shapes, b.shapes);
    assertEquals(a.gauges, b.gauges);
    assertEquals(a.totals, b.totals);
    // The counts the workload fixes, spelled out (both sides, equal above).
    const t = a.totals;
    assertEquals(t['exec_server_connections_total[["transport","stdio"]]'], 1);
    assertEquals(t['exec_server_processes_finished_total[["result","success"]]'], 1);
    assertEquals(t['exec_server_processes_finished_total[["result","error"]]'], 1);
    assertEquals(
      t['exec_server_requests_total[["method","process/start"],["result","success"]]'],
      2,
    );
    assertEquals(t['exec_server_requests_total[["method","unknown"],["result","error"]]'], 1);
    assertEquals(t['exec_server_requests_total[["method","fs/readFile"],["result","error"]]'], 1);
    for (const key of ["service.name", "service.version", "env", "os", "os_version"]) {
      assert(key in ours.resource, `resource ${key}`);
    }
    assertEquals(ours.resource["service.name"], "codex-exec-server");
    assertEquals(
      [ours.resource.env, ours.resource.os, ours.resource.os_version],
      [reference.resource.env, reference.resource.os, reference.resource.os_version],
    );
  },
});

Deno.test("otlp: the standard variables alone turn the push on (beyond the reference), in protobuf by default, with its headers, periodically", async () => {
  await using rx = startOtlpReceiver();
  const home = referenceHome(); // no config.toml: the variables decide
  const [program, ...args] = ourStdioCommand();
  {
    await using s = spawnCommandServer(program!, args, {
      CODEX_HOME: home,
      OTEL_METRICS_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
      OTEL_EXPORTER_OTLP_HEADERS: "x-tenant=t1",
      OTEL_METRIC_EXPORT_INTERVAL: "100",
    });
    await workload(s);
    // Periodic: pushed while the server still runs.
    await rx.waitFor((_, raw) => raw.length > 0);
  }
  const pushes = rx.raw.length;
  assert(
    rx.raw.every((r) => r.path === "/v1/metrics" && r.type === "application/x-protobuf"),
    JSON.stringify(rx.raw.map((r) => [r.path, r.type])),
  );
  assert(
    rx.raw.some((r) => new TextDecoder().decode(r.bytes).includes("exec_server_requests_total")),
  );
  assert(pushes >= 1);
  assert(rx.raw.every((r) => r.headers["x-tenant"] === "t1"), "OTEL_EXPORTER_OTLP_HEADERS sent");
});

Deno.test("otlp settings: Codex's [otel] table first, then the standard variables; off without either; bad values named", () => {
  const none = () => undefined;
  assertEquals(otlpMetricsSettings({}, none), null);
  assertEquals(otlpMetricsSettings({ otel: { metrics_exporter: "none" } }, none), null);
  const config = {
    otel: {
      environment: "staging",
      metrics_exporter: {
        "otlp-http": {
          endpoint: "http://127.0.0.1:4318/v1/metrics",
          protocol: "json",
          headers: { "X-Key": "k" },
        },
      },
    },
  };
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  assertEquals(otlpMetricsSettings(config, env({ OTEL_METRIC_EXPORT_INTERVAL: "250" })), {
    endpoint: "http://127.0.0.1:4318/v1/metrics",
    protocol: "json",
    headers: { "x-key": "k" },
    intervalMs: 250,
    environment: "staging",
  });
  // The configuration's endpoint wins over the variables (as the reference: it ignores them).
  assertEquals(
    otlpMetricsSettings(
      config,
      env({ OTEL_METRICS_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_ENDPOINT: "http://x:1" }),
    )
      ?.endpoint,
    "http://127.0.0.1:4318/v1/metrics",
  );
  // Beyond the reference: the standard variables alone.
  assertEquals(
    otlpMetricsSettings(
      {},
      env({
        OTEL_METRICS_EXPORTER: "otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
        OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc, x-tenant = t1",
      }),
    ),
    {
      endpoint: "http://collector:4318/v1/metrics",
      protocol: "binary",
      headers: { authorization: "Bearer abc", "x-tenant": "t1" },
      intervalMs: 60_000,
      environment: "dev",
    },
  );
  assertEquals(
    otlpMetricsSettings({}, env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })),
    null,
  );
  const refused: Array<[Record<string, unknown>, Record<string, string>, string]> = [
    [{ otel: { metrics_exporter: { "otlp-grpc": {} } } }, {}, "only { otlp-http"],
    [
      { otel: { metrics_exporter: { "otlp-http": { endpoint: "file:///x" } } } },
      {},
      "http or https",
    ],
    [
      { otel: { metrics_exporter: { "otlp-http": { endpoint: "http://a", protocol: "grpc" } } } },
      {},
      'protocol must be "json" or "binary"',
    ],
    [{}, { OTEL_METRICS_EXPORTER: "otlp" }, "needs OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"],
    [{}, {
      OTEL_METRICS_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://a",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
    }, "http/json or http/protobuf"],
    [{}, {
      OTEL_METRICS_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://a",
      OTEL_METRIC_EXPORT_INTERVAL: "soon",
    }, "positive number of milliseconds"],
    [{}, {
      OTEL_METRICS_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://a",
      OTEL_EXPORTER_OTLP_HEADERS: "novalue",
    }, "is not key=value"],
  ];
  for (const [c, vars, message] of refused) {
    assertThrows(() => otlpMetricsSettings(c, env(vars)), OtlpSettingsError, message);
  }
});

Deno.test("otlp: the configuration shown in docs/telemetry.md is read as it says", async () => {
  const page = await Deno.readTextFile(new URL("../../docs/telemetry.md", import.meta.url));
  const toml = /```toml\n([\s\S]*?)```/.exec(page)![1]!;
  const { parse } = await import("smol-toml");
  assertEquals(otlpMetricsSettings(parse(toml), () => undefined), {
    endpoint: "http://127.0.0.1:4318/v1/metrics",
    protocol: "json",
    headers: {},
    intervalMs: 60_000,
    environment: "staging",
  });
  // The spans and events block.
  const second = parse([...page.matchAll(/```toml\n([\s\S]*?)```/g)][1]![1]!);
  const { otlpExportSettings } = await import("../../src/telemetry/otlp_settings.ts");
  for (const signal of ["traces", "logs"] as const) {
    assertEquals(otlpExportSettings(second, signal, () => undefined), {
      endpoint: `http://127.0.0.1:4318/v1/${signal}`,
      protocol: "json",
      headers: {},
      environment: "dev",
    });
  }
});

Deno.test("otlp resource: os and os_version as the reference derives them from os-release", () => {
  if (Deno.build.os !== "linux") return;
  assertEquals(osResource('NAME="Debian GNU/Linux"\nID=debian\nVERSION_ID="12"\n'), {
    os: "Debian",
    os_version: "12.0.0",
  });
  assertEquals(osResource('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\n'), {
    os: "Ubuntu",
    os_version: "24.04.0",
  });
  assertEquals(osResource('NAME="Something"\nID=something\n'), {
    os: "Something",
    os_version: "Unknown",
  });
  assertEquals(osResource(null), { os: "Linux", os_version: "Unknown" });
});
