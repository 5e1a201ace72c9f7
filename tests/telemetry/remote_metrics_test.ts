// A remote executor's metrics, side by side with the reference: ours
// (`serve --remote`) and the pinned reference (`exec-server --remote`) each
// register with a relay of ours, serve one harness connection, lose their
// rendezvous socket (a TCP cut between them and the relay) and dial again;
// what each pushes over OTLP must have the same shapes and the same totals
// of registrations, rendezvous dials and reconnects by reason.

import { assert, assertEquals } from "../helpers/assert.ts";
import {
  type OtlpKeyValue,
  otlpLogRecords,
  type OtlpPoint,
  type OtlpSpan,
  otlpSpans,
  startOtlpReceiver,
} from "../helpers/otlp.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { tcpRelay } from "../helpers/tcp_relay.ts";
import { eventually } from "../helpers/wire_client.ts";
import { spawnRemoteExecutor } from "../helpers/relay.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import { connect } from "../../src/client/client.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";

await loadNoiseCrypto(); // once, outside the tests (a dynamic library stays loaded)

const REMOTE = /^exec_server_(remote_|connections_total)/;

function totals(points: OtlpPoint[]): Record<string, number> {
  const out = new Map<string, number>();
  for (const p of points) {
    if (!REMOTE.test(p.name)) continue;
    const key = `${p.name}${JSON.stringify(Object.entries(p.attributes).sort())}`;
    out.set(key, (out.get(key) ?? 0) + p.value); // deltas add up; a histogram's value is its count
  }
  return Object.fromEntries([...out].sort(([a], [b]) => a < b ? -1 : 1));
}

function shapes(points: OtlpPoint[]): string[] {
  return [
    ...new Set(
      points.filter((p) => REMOTE.test(p.name)).map((p) =>
        JSON.stringify([p.scope, p.name, p.kind, p.unit, p.description, p.temporality, p.bounds])
      ),
    ),
  ].sort();
}

type KeyValue = OtlpKeyValue;
// The reference's tracing adds where in its source and on which thread a span ran, and its
// busy and idle time: not part of what it reports.
const SOURCE_ATTRIBUTES = /^(code\.|thread\.|target$|busy_ns$|idle_ns$)/;
const attrs = (list: KeyValue[] = []) =>
  Object.fromEntries(
    list.filter(({ key }) => !SOURCE_ATTRIBUTES.test(key)).map(({ key, value: v }) => {
      const text = String(v.stringValue ?? v.intValue ?? v.boolValue ?? "");
      // Ids vary from run to run: their shape is what is compared.
      return [key, text.replace(/^reg_.*/, "REG").replace(/^req_[0-9a-f]+$/, "REQ")];
    }),
  );

/** The CLIENT spans (registry and rendezvous calls), as `[name, attributes]`, sorted. */
function clientSpans(bodies: unknown[]): string[] {
  return otlpSpans(bodies).filter((s) => s.kind === 3).map((s) =>
    JSON.stringify([s.name, attrs(s.attributes)])
  ).sort();
}

/**
 * The spans of serving harnesses over the relay, as `[name, kind, parent,
 * attributes]`, sorted: a `run_multiplexed_environment` per rendezvous
 * socket, the request spans under it (named by kind: over the relay the
 * reference names them all `unknown`, ours after their method), each with
 * its instant `noise_request_received`.
 */
function environmentSpans(bodies: unknown[]): string[] {
  type S = OtlpSpan;

  const all = otlpSpans(bodies);
  const byId = new Map(all.map((s) => [s.spanId, s]));
  const named = (s: S | undefined) => s === undefined ? null : s.kind === 2 ? "SERVER" : s.name;
  return all
    .filter((s) =>
      s.kind === 2 || s.name === "run_multiplexed_environment" ||
      s.name === "codex.exec_server.noise_request_received"
    )
    .map((s) => {
      const a = attrs(s.attributes);
      return JSON.stringify([
        named(s),
        s.kind,
        s.parentSpanId ? named(byId.get(s.parentSpanId)) ?? "?" : null,
        s.kind === 2 ? { method: a.method, result: a.result } : a,
      ]);
    })
    .sort();
}

/** The process events, with the executor's identity, sorted. */
function processEvents(bodies: unknown[]): string[] {
  return otlpLogRecords(bodies).map((l) => attrs(l.attributes))
    // The reference also exports a log line or two of its own: events have names.
    .filter((a) => "event.name" in a).map((a) => JSON.stringify(a)).sort();
}

async function run(which: "ours" | "reference") {
  await using rx = startOtlpReceiver();
  const ports: number[] = [];
  // The executor reaches the rendezvous through this relay of TCP (the registry directly).
  await using cable = tcpRelay(() => ports);
  const relay = await startRelayServer({
    port: 0,
    logger: nullLogger,
    publicUrl: `http://127.0.0.1:${cable.port}`,
  });
  ports.push(relay.addr.port);
  const home = referenceHome();
  await Deno.writeTextFile(
    `${home}/config.toml`,
    `[otel]\nmetrics_exporter = { otlp-http = { endpoint = "${rx.url}/v1/metrics", protocol = "json" } }\n` +
      `trace_exporter = { otlp-http = { endpoint = "${rx.url}/v1/traces", protocol = "json" } }\n` +
      `exporter = { otlp-http = { endpoint = "${rx.url}/v1/logs", protocol = "json" } }\n`,
  );
  const executor = await spawnRemoteExecutor(
    which,
    relay.url,
    "env-m",
    await relay.store.createToken("executor", "env-m"),
    { CODEX_HOME: home, OTEL_METRIC_EXPORT_INTERVAL: "200" },
  );
  try {
    assert(await eventually(() => relay.executorCount === 1, 60_000), `${which}: never registered`);
    const client = await connect({
      rendezvous: {
        registryUrl: relay.url,
        environmentId: "env-m",
        token: await relay.store.createToken("harness", "env-m"),
      },
    });
    await client.command("/bin/true").output();
    await client.close();
    // The socket is lost (no close frame); the next dial gets through.
    cable.cut();
    cable.restore();
    const dialled = 'exec_server_remote_rendezvous_connect_total[["result","success"]]';
    const points = await rx.waitFor((p) => (totals(p)[dialled] ?? 0) >= 2, 60_000);
    // Spans and events are pushed at shutdown at the latest.
    await executor.stop();
    const traced = () => clientSpans(rx.bodies.get("/v1/traces") ?? []);
    assert(await eventually(() => traced().length >= 4, 30_000), `${which}: no remote spans`);
    assert(
      await eventually(() => processEvents(rx.bodies.get("/v1/logs") ?? []).length >= 2, 30_000),
      `${which}: no process events`,
    );
    return {
      totals: totals(points),
      shapes: shapes(points),
      spans: traced(),
      environment: environmentSpans(rx.bodies.get("/v1/traces") ?? []),
      events: processEvents(rx.bodies.get("/v1/logs") ?? []),
    };
  } finally {
    await executor.stop();
    await relay.close();
  }
}

Deno.test({
  name:
    "remote telemetry: registrations, rendezvous dials and reconnects by reason, the registry calls as spans and the executor on its events, as the reference pushes them — side by side",
  ignore: referenceBin() === null,
  async fn() {
    const [ours, reference] = await Promise.all([run("ours"), run("reference")]);
    assertEquals(ours.shapes, reference.shapes);
    assertEquals(ours.totals, reference.totals);
    // The registry and rendezvous calls as CLIENT spans, and the executor named on its events.
    assertEquals(ours.spans, reference.spans);
    assertEquals(ours.events, reference.events);
    // The harness's requests under the rendezvous socket's span, as the reference's.
    assertEquals(ours.environment, reference.environment);
    assertEquals(ours.environment, [
      '["SERVER",2,"run_multiplexed_environment",{"method":"initialize","result":"success"}]',
      '["SERVER",2,"run_multiplexed_environment",{"method":"process/start","result":"success"}]',
      '["codex.exec_server.noise_request_received",1,"SERVER",{}]',
      '["codex.exec_server.noise_request_received",1,"SERVER",{}]',
      '["run_multiplexed_environment",1,null,{"noise_side":"executor"}]',
      '["run_multiplexed_environment",1,null,{"noise_side":"executor"}]',
    ]);
    assertEquals(ours.spans, [
      '["codex.exec_server.remote.environment_registry.validate_harness_key",{"environment_id":"env-m","executor_registration_id":"REG"}]',
      '["codex.exec_server.remote.register",{"result":"success"}]',
      '["codex.exec_server.remote.rendezvous.connect",{"request_id":"REQ","result":"success"}]',
      '["codex.exec_server.remote.rendezvous.connect",{"request_id":"REQ","result":"success"}]',
    ]);
    assertEquals(ours.totals, {
      'exec_server_connections_total[["transport","relay"]]': 1,
      'exec_server_remote_reconnects_total[["reason","read_error"]]': 1,
      'exec_server_remote_registration_duration_seconds[["result","success"]]': 1,
      'exec_server_remote_registration_total[["result","success"]]': 1,
      'exec_server_remote_rendezvous_connect_duration_seconds[["result","success"]]': 2,
      'exec_server_remote_rendezvous_connect_total[["result","success"]]': 2,
    });
  },
});
