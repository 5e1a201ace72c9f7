// Spans and log events pushed over OTLP/HTTP, side by side with the
// reference: the same Codex configuration (`[otel] trace_exporter` and
// `[otel] exporter`) and the same workload over stdio; the runtime span,
// a SERVER span per request (named after its method, `unknown` outside the
// protocol, with `method` and `result`), a `codex.exec_server.process` span
// per process under its `process/start` (`process.id`, `result`), and the
// process start and exit events must be the same — and the steps of a start
// (`codex.exec_server.process_prepare_sandbox`, `…_prepare_shell_snapshot`,
// `…_capture_shell_snapshot`, `codex.process.spawn`) under it.

import { assert, assertEquals } from "../helpers/assert.ts";
import {
  type OtlpAnyValue,
  type OtlpKeyValue,
  otlpLogRecords,
  otlpSpans,
  startOtlpReceiver,
} from "../helpers/otlp.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { eventually, ourStdioCommand, spawnCommandServer } from "../helpers/wire_client.ts";
import { metricsWorkload } from "../helpers/metrics_workload.ts";
import { collectProcess, startProcess } from "../helpers/wire_client.ts";
import { httpOrigin } from "../helpers/proxy.ts";
import { codexExecOnce, fakeModel } from "../helpers/fake_model.ts";
import { scratchRoot } from "../helpers/reference.ts";
import { startWsServer } from "../helpers/ws_server.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";

type AnyValue = OtlpAnyValue;
type KeyValue = OtlpKeyValue;

const value = (v: AnyValue) => String(v.stringValue ?? v.intValue ?? v.boolValue ?? "");
const attrs = (list: KeyValue[] = []) =>
  Object.fromEntries(list.map(({ key, value: v }) => [key, value(v)]));

async function run(which: "ours" | "reference", protocol: "json" | "binary" = "json") {
  await using rx = startOtlpReceiver();
  const origin = httpOrigin();
  const home = referenceHome();
  await Deno.writeTextFile(
    `${home}/config.toml`,
    `[otel]\ntrace_exporter = { otlp-http = { endpoint = "${rx.url}/v1/traces", protocol = "${protocol}" } }\n` +
      `exporter = { otlp-http = { endpoint = "${rx.url}/v1/logs", protocol = "json" } }\n`,
  );
  const [program, ...args] = which === "ours"
    ? ourStdioCommand()
    : [referenceBin()!, "exec-server", "--listen", "stdio"];
  {
    await using s = spawnCommandServer(program!, args, { CODEX_HOME: home });
    await metricsWorkload(s.client);
    // A spawn that fails, and an HTTP request from inside the environment.
    const failed = await startProcess(s.client, "nx", ["/nonexistent/command"]);
    assertEquals(failed.error?.data?.kind, "spawnNotFound", JSON.stringify(failed));
    // A login shell under Codex's shell snapshot: its capture is a span too.
    const snapped = await startProcess(s.client, "snap", ["/bin/bash", "-lc", "exit 0"], {
      env: { PATH: "/usr/bin:/bin", HOME: home },
      shellSnapshot: { scopeId: "s1", shell: { name: "bash", path: "/bin/bash" } },
    });
    assert(snapped.result, JSON.stringify(snapped));
    assertEquals((await collectProcess(s.client, "snap")).exitCode, 0);
    const fetched = await s.client.call("http/request", {
      requestId: "h1",
      method: "GET",
      url: `${origin.url}/x`,
      headers: [],
    });
    assertEquals(fetched.result?.status, 200, JSON.stringify(fetched));
  }
  const spans = () => otlpSpans(rx.bodies.get("/v1/traces"));
  const events = () =>
    otlpLogRecords(rx.bodies.get("/v1/logs")).map((l) =>
      JSON.stringify([l.scope, l.severityText, attrs(l.attributes)])
    );
  // Pushed at shutdown: the runtime span ends last.
  assert(
    await eventually(
      () => spans().some((s) => s.name === "codex.exec_server") && events().length >= 7,
      30_000,
    ),
    `${which}: no spans or events`,
  );
  const all = spans();
  const byId = new Map(all.map((s) => [s.spanId, s]));
  await origin.server.shutdown();
  const picked = [
    "method",
    "result",
    "process.id",
    "http.request.method",
    "server.address",
    "server.port",
    "http.response.status_code",
    "snapshot_requested",
  ];
  const summary = all
    // The steps of a start (sandbox and snapshot preparation, the
    // snapshot's capture, the spawn) are spans of both; the reference's
    // start-up file checks and its process reaper's span are its own.
    .filter((s) =>
      s.kind === 2 || s.kind === 3 || s.name === "codex.exec_server" ||
      /^codex\.exec_server\.process_(prepare|capture)_|^codex\.process\.spawn$/.test(s.name) ||
      (s.name === "codex.exec_server.process" && "process.id" in attrs(s.attributes))
    )
    .map((s) => {
      const a = attrs(s.attributes);
      const parent = s.parentSpanId ? byId.get(s.parentSpanId) : undefined;
      if (parent) assertEquals(parent.traceId, s.traceId);
      return JSON.stringify([
        s.name,
        s.kind,
        Object.fromEntries(
          picked.filter((k) => k in a).map((k) => [
            k,
            k === "server.port" ? (a[k] === String(origin.port) ? "ORIGIN" : a[k]) : a[k],
          ]),
        ),
        parent?.name ?? null,
      ]);
    })
    .sort();
  return { spans: summary, events: events().sort() };
}

Deno.test({
  name:
    "traces: the reference's runtime, request and process spans and its process events over OTLP/HTTP JSON — side by side",
  ignore: referenceBin() === null,
  async fn() {
    const [ours, reference] = await Promise.all([run("ours"), run("reference")]);
    assertEquals(ours.spans, reference.spans);
    assertEquals(ours.events, reference.events);
    // What the workload fixes, spelled out (both sides, equal above).
    assertEquals(ours.spans, [
      '["codex.exec_server",1,{},null]',
      '["codex.exec_server.http_request",3,{"http.request.method":"GET","server.address":"127.0.0.1","server.port":"ORIGIN","http.response.status_code":"200"},"http/request"]',
      '["codex.exec_server.process",1,{"result":"error","process.id":"bad"},"process/start"]',
      '["codex.exec_server.process",1,{"result":"success","process.id":"ok"},"process/start"]',
      '["codex.exec_server.process",1,{"result":"success","process.id":"snap"},"process/start"]',
      '["codex.exec_server.process_capture_shell_snapshot",1,{"process.id":"snap"},"codex.exec_server.process_prepare_shell_snapshot"]',
      '["codex.exec_server.process_prepare_sandbox",1,{"process.id":"bad"},"process/start"]',
      '["codex.exec_server.process_prepare_sandbox",1,{"process.id":"nx"},"process/start"]',
      '["codex.exec_server.process_prepare_sandbox",1,{"process.id":"ok"},"process/start"]',
      '["codex.exec_server.process_prepare_sandbox",1,{"process.id":"snap"},"process/start"]',
      '["codex.exec_server.process_prepare_shell_snapshot",1,{"process.id":"bad","snapshot_requested":"false"},"process/start"]',
      '["codex.exec_server.process_prepare_shell_snapshot",1,{"process.id":"nx","snapshot_requested":"false"},"process/start"]',
      '["codex.exec_server.process_prepare_shell_snapshot",1,{"process.id":"ok","snapshot_requested":"false"},"process/start"]',
      '["codex.exec_server.process_prepare_shell_snapshot",1,{"process.id":"snap","snapshot_requested":"true"},"process/start"]',
      '["codex.process.spawn",1,{},"process/start"]',
      '["codex.process.spawn",1,{},"process/start"]',
      '["codex.process.spawn",1,{},"process/start"]',
      '["codex.process.spawn",1,{},"process/start"]',
      '["fs/readFile",2,{"method":"fs/readFile","result":"error"},null]',
      '["http/request",2,{"method":"http/request","result":"success"},null]',
      '["initialize",2,{"method":"initialize","result":"success"},null]',
      '["process/start",2,{"method":"process/start","result":"error"},null]',
      '["process/start",2,{"method":"process/start","result":"success"},null]',
      '["process/start",2,{"method":"process/start","result":"success"},null]',
      '["process/start",2,{"method":"process/start","result":"success"},null]',
      '["unknown",2,{"method":"no/such/method","result":"error"},null]',
    ]);
    assertEquals(ours.events.length, 7);
  },
});

Deno.test({
  name:
    "traces: the same spans over OTLP/HTTP protobuf (Codex's default), decoded by OpenTelemetry's own decoder — side by side",
  ignore: referenceBin() === null,
  async fn() {
    const [ours, reference] = await Promise.all([
      run("ours", "binary"),
      run("reference", "binary"),
    ]);
    assertEquals(ours.spans, reference.spans);
    assertEquals(ours.spans.length, 26);
    assertEquals(ours.events, reference.events);
  },
});

Deno.test("traces settings: trace_exporter and exporter as Codex writes them, else OTEL_TRACES_EXPORTER / OTEL_LOGS_EXPORTER with their endpoints", async () => {
  const { otlpExportSettings, OtlpSettingsError } = await import(
    "../../src/telemetry/otlp_settings.ts"
  );
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const config = {
    otel: {
      environment: "staging",
      trace_exporter: { "otlp-http": { endpoint: "http://c:4318/v1/traces", protocol: "json" } },
      exporter: { "otlp-http": { endpoint: "http://c:4318/v1/logs" } },
    },
  };
  assertEquals(otlpExportSettings(config, "traces", env({})), {
    endpoint: "http://c:4318/v1/traces",
    protocol: "json",
    headers: {},
    environment: "staging",
  });
  assertEquals(otlpExportSettings(config, "logs", env({}))?.protocol, "binary");
  assertEquals(otlpExportSettings({}, "traces", env({})), null);
  assertEquals(
    otlpExportSettings(
      {},
      "logs",
      env({
        OTEL_LOGS_EXPORTER: "otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/",
        OTEL_EXPORTER_OTLP_LOGS_HEADERS: "x-key=a%20b",
      }),
    ),
    {
      endpoint: "http://c:4318/v1/logs",
      protocol: "binary",
      headers: { "x-key": "a b" },
      environment: "dev",
    },
  );
  let message = "";
  try {
    otlpExportSettings({ otel: { trace_exporter: { "otlp-grpc": {} } } }, "traces", env({}));
  } catch (error) {
    assert(error instanceof OtlpSettingsError);
    message = error.message;
  }
  assert(message.startsWith("[otel] trace_exporter: only { otlp-http"), message);
  assert(message.includes("…/v1/traces"), message);
});

/** The process events a server pushes while `codex exec` has it run a write its sandbox refuses. */
async function deniedWriteEvents(kind: "ours" | "reference"): Promise<string[]> {
  const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "denied-events-" });
  try {
    await Deno.mkdir(`${base}/ws`);
    await Deno.mkdir(`${base}/home`);
    await Deno.mkdir(`${base}/server-home`);
    await using rx = startOtlpReceiver();
    await Deno.writeTextFile(
      `${base}/server-home/config.toml`,
      `[otel]\nexporter = { otlp-http = { endpoint = "${rx.url}/v1/logs", protocol = "json" } }\n`,
    );
    await using model = fakeModel([
      { call: "exec_command", cmd: "echo x > written.txt" },
      { message: "done" },
    ]);
    {
      await using server = await startWsServer(kind, {
        env: { CODEX_HOME: `${base}/server-home` },
      });
      await codexExecOnce({
        codex: referenceBin()!,
        home: `${base}/home`,
        ws: `${base}/ws`,
        model,
        serverUrl: server.url,
      });
    }
    const events = () =>
      otlpLogRecords(rx.bodies.get("/v1/logs")).map((l) => attrs(l.attributes)).filter((a) =>
        "event.name" in a
      );
    assert(
      await eventually(
        () => events().some((e) => e["event.name"]?.endsWith("process_exit")),
        30_000,
      ),
      `${kind}: no process events`,
    );
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    return events().map((e) =>
      JSON.stringify(
        Object.fromEntries(
          Object.entries(e).map((
            [k, v],
          ) => [k, k === "conversation.id" && uuid.test(v) ? "UUID" : v]),
        ),
      )
    );
  } finally {
    await Deno.remove(base, { recursive: true });
  }
}

Deno.test({
  name:
    "traces: codex exec's denied write — process_start, sandbox_denied and process_exit with the conversation and tool call, as the reference reports them",
  ignore: referenceBin() === null || !sandboxSupport().available,
  async fn() {
    const ours = await deniedWriteEvents("ours");
    const reference = await deniedWriteEvents("reference");
    assertEquals(ours, reference);
    const common = '"conversation.id":"UUID","tool.call_id":"call_0","sandbox.type":"LinuxSeccomp"';
    assertEquals(ours, [
      `{"event.name":"codex.exec_server.process_start",${common}}`,
      `{"event.name":"codex.exec_server.sandbox_denied",${common},"reason":"inferred_denial"}`,
      `{"event.name":"codex.exec_server.process_exit",${common},"process.exit_code":"1","process.termination_requested":"false"}`,
    ]);
  },
});
