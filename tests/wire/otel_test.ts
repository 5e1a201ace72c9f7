import { assert, assertEquals } from "../helpers/assert.ts";
import { spawnStdioServer } from "../helpers/wire_client.ts";
import { parseTraceparent } from "../../src/log/otel.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

/** A fake OTLP/HTTP collector (JSON encoding) on 127.0.0.1. */
function collector() {
  const traces: Json[] = [];
  const logs: Json[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const body = await req.json();
    const path = new URL(req.url).pathname;
    if (path === "/v1/traces") traces.push(body);
    if (path === "/v1/logs") logs.push(body);
    return Response.json({});
  });
  const spans = () =>
    traces.flatMap((t) =>
      t.resourceSpans.flatMap((r: Json) => r.scopeSpans.flatMap((s: Json) => s.spans))
    );
  const logBodies = () =>
    logs.flatMap((l) =>
      l.resourceLogs.flatMap((r: Json) =>
        r.scopeLogs.flatMap((s: Json) => s.logRecords.map((x: Json) => x.body?.stringValue ?? ""))
      )
    );
  return { url: `http://127.0.0.1:${server.addr.port}`, spans, logBodies, server };
}

const attr = (span: Json, key: string) =>
  span.attributes.find((a: Json) => a.key === key)?.value as Json;

Deno.test("otel: a span per request continues the caller's traceparent; logs are exported", async () => {
  const otlp = collector();
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const parentId = "00f067aa0ba902b7";
  let failedCode = 0;
  try {
    {
      await using server = spawnStdioServer(["serve", "--listen", "stdio"], {
        OTEL_DENO: "true",
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "exec-server-test",
      });
      const client = server.client;
      await client.initialize();
      await client.send({
        id: 7,
        method: "fs/getMetadata",
        params: { path: "/" },
        trace: { traceparent: `00-${traceId}-${parentId}-01`, tracestate: "vendor=x" },
      });
      await client.take((m) => m.id === 7);
      const failed = await client.call("fs/readFile", { path: "/nonexistent-otel" });
      assert(failed.error);
      failedCode = failed.error.code;
    }
    // The server flushed on exit; the export is an HTTP POST that may still
    // be in our queue.
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && otlp.spans().length < 3) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const spans = otlp.spans();
    const meta = spans.find((s: Json) => s.name === "fs/getMetadata");
    assert(meta, JSON.stringify(spans.map((s: Json) => s.name)));
    assertEquals([meta.traceId, meta.parentSpanId], [traceId, parentId], "continues the trace");
    assertEquals(attr(meta, "rpc.system").stringValue, "jsonrpc");
    assertEquals(attr(meta, "rpc.jsonrpc.request_id").stringValue, "7");
    assertEquals(meta.kind, 2, "SPAN_KIND_SERVER");
    const read = spans.find((s: Json) => s.name === "fs/readFile");
    assert(read);
    assert(read.traceId !== traceId, "a request without trace context starts its own trace");
    assertEquals(read.status.code, 2, "STATUS_CODE_ERROR");
    const code = attr(read, "rpc.jsonrpc.error_code");
    assertEquals(Number(code?.intValue ?? code?.doubleValue), failedCode);
    assert(
      otlp.logBodies().some((b: string) => b.includes('"event":"server.stopping"')),
      "the JSON log lines are exported as log records",
    );
  } finally {
    await otlp.server.shutdown();
  }
});

Deno.test("otel: malformed traceparents are ignored", () => {
  assertEquals(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), {
    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    spanId: "00f067aa0ba902b7",
    traceFlags: 1,
  });
  for (
    const bad of [
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "garbage",
    ]
  ) assertEquals(parseTraceparent(bad), null, bad);
});
