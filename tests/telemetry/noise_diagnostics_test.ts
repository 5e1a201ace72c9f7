// A remote executor's refused handshakes, side by side with the reference:
// ours (`serve --remote`) and the pinned reference (`exec-server --remote`)
// register through a registry that forwards to a relay of ours but answers
// `/validate` as the test scripts it; harnesses then send handshakes the
// executor must refuse — a message 1 for another executor key (it does not
// decrypt), the registry's 401, 500, `{"valid": false}`, a body that is not
// JSON, the registry gone, and enough failures for the cooldown. Each
// refusal is the reference's diagnostic: a root span
// `codex.exec_server.noise_handshake_diagnostic` and a WARN event "Noise
// executor handshake diagnostic", with the same reason and registry status.

import { assert, assertEquals } from "../helpers/assert.ts";
import { otlpLogRecords, otlpSpans, startOtlpReceiver } from "../helpers/otlp.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { eventually } from "../helpers/wire_client.ts";
import { spawnRemoteExecutor } from "../helpers/relay.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import { rendezvousTransport } from "../../src/client/rendezvous.ts";
import { connectHarness } from "../../src/relay/wire/registry_client.ts";
import { generateIdentity } from "../../src/noise/hybrid_ik.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";

await loadNoiseCrypto(); // once, outside the tests (a dynamic library stays loaded)

type KeyValue = { key: string; value: Record<string, unknown> };
const flat = (list: KeyValue[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, String(Object.values(value)[0])]));

// What each harness does, in order: `wrongkey` encrypts message 1 for another
// executor key; the others are the registry's answer to `/validate`.
const SCRIPT = [
  "wrongkey",
  "wrongkey",
  "401",
  "500",
  "false",
  "garbage",
  "down",
  "down",
  "down",
] as const;

async function run(which: "ours" | "reference") {
  await using rx = startOtlpReceiver();
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const answers = SCRIPT.filter((s) => s !== "wrongkey" && s !== "down");
  const registry = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    if (url.pathname.endsWith("/validate")) {
      await req.arrayBuffer();
      const answer = answers.shift() ?? "500";
      if (answer === "false") return Response.json({ valid: false });
      if (answer === "garbage") return new Response("not json");
      return Response.json({ error: { code: "refused", message: "no" } }, {
        status: Number(answer),
      });
    }
    const forwarded = await fetch(relay.url + url.pathname + url.search, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
    return new Response(forwarded.body, { status: forwarded.status, headers: forwarded.headers });
  });
  let registryUp = true;
  const home = referenceHome();
  await Deno.writeTextFile(
    `${home}/config.toml`,
    `[otel]\ntrace_exporter = { otlp-http = { endpoint = "${rx.url}/v1/traces", protocol = "json" } }\n` +
      `exporter = { otlp-http = { endpoint = "${rx.url}/v1/logs", protocol = "json" } }\n`,
  );
  const executor = await spawnRemoteExecutor(
    which,
    `http://127.0.0.1:${registry.addr.port}`,
    "env-d",
    await relay.store.createToken("executor", "env-d"),
    { CODEX_HOME: home },
  );
  try {
    assert(await eventually(() => relay.executorCount === 1, 60_000), `${which}: never registered`);
    const endpoint = { url: relay.url, bearer: await relay.store.createToken("harness", "env-d") };
    const outcomes: string[] = [];
    for (const step of [...SCRIPT, "cooldown"]) {
      if (step === "down" && registryUp) {
        await registry.shutdown();
        registryUp = false;
      }
      const transport = rendezvousTransport(async (key) => {
        const bundle = await connectHarness(endpoint, "env-d", key);
        return (step === "wrongkey"
          ? { ...bundle, executorPublicKey: generateIdentity().publicKey }
          : bundle) as never;
      });
      try {
        await transport();
        outcomes.push("connected");
      } catch (error) {
        outcomes.push((error as Error).message);
      }
    }
    // Spans and events are pushed at shutdown at the latest.
    await executor.stop();
    const logs = () =>
      otlpLogRecords(rx.bodies.get("/v1/logs")).filter((l) =>
        l.body?.stringValue === "Noise executor handshake diagnostic"
      );
    const spans = () =>
      otlpSpans(rx.bodies.get("/v1/traces")).filter((s) =>
        s.name === "codex.exec_server.noise_handshake_diagnostic"
      );
    assert(
      await eventually(
        () => logs().length >= SCRIPT.length + 1 && spans().length >= SCRIPT.length + 1,
        30_000,
      ),
      `${which}: ${logs().length} diagnostic events, ${spans().length} spans`,
    );
    const shape = (a: Record<string, string>) => {
      // Ids vary from run to run: their presence is compared.
      assertEquals(a.environment_id, "env-d");
      assert(/^reg_/.test(a.executor_registration_id ?? ""), JSON.stringify(a));
      assert(/^[0-9a-f-]{36}$/.test(a.stream_id ?? ""), JSON.stringify(a));
      return [a.noise_event, a.noise_outcome, a.noise_side, a.noise_reason, a.registry_status]
        .join(" ");
    };
    return {
      outcomes,
      events: logs().map((l) => {
        assertEquals([l.scope, l.severityText, l.severityNumber], [
          "codex_otel.log_only",
          "WARN",
          13,
        ]);
        return shape(flat(l.attributes));
      }),
      spans: spans().map((s) => {
        assertEquals([s.kind, s.parentSpanId || null], [1, null]);
        return shape(flat(s.attributes));
      }),
    };
  } finally {
    await executor.stop();
    if (registryUp) await registry.shutdown();
    await relay.close();
  }
}

Deno.test({
  name:
    "noise diagnostics: every refused handshake is the reference's diagnostic span and WARN event, with its reason and the registry's status — side by side",
  ignore: referenceBin() === null,
  async fn() {
    const [ours, reference] = await Promise.all([run("ours"), run("reference")]);
    assertEquals(ours.outcomes, reference.outcomes);
    assertEquals(ours.events, reference.events);
    assertEquals(ours.spans, reference.spans);
    const expected = [
      "handshake rejected executor handshake_request None",
      "handshake rejected executor handshake_request None",
      "handshake rejected executor registry_http Some(401)",
      "handshake rejected executor registry_http Some(500)",
      "handshake rejected executor validation_protocol None",
      "handshake rejected executor validation_protocol None",
      "handshake rejected executor registry_request None",
      "handshake rejected executor registry_request None",
      // Eight failures start the cooldown: the next handshakes are refused unread.
      "handshake rejected executor cooldown None",
      "handshake rejected executor cooldown None",
    ];
    assertEquals(ours.events, expected);
    assertEquals(ours.spans, expected);
  },
});
