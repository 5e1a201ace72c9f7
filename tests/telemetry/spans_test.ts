// The span recorder and its OTLP encodings: the protobuf written here is
// decoded by OpenTelemetry's own generated decoder and must say what the
// JSON encoding says, for generated spans (long and non-ASCII strings,
// negative and large integers, doubles, empty and zero values); the
// recorder's parent-based sampling, tracestate, flags, batching, queue
// bound and shutdown; the sink's retries against a real HTTP server.

import { assert, assertEquals } from "../helpers/assert.ts";
import { decodeTracesProtobuf } from "../helpers/otlp.ts";
import { ProtoWriter } from "../../src/util/protobuf.ts";
import {
  type AttributeValue,
  cleanTraceState,
  type SpanData,
  SpanKind,
  SpanRecorder,
} from "../../src/telemetry/spans.ts";
import {
  encodeTracesJson,
  encodeTracesProtobuf,
  otlpSpanSink,
} from "../../src/telemetry/otlp_traces.ts";

// A small seeded generator: the same cases on every run.
function rng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
}

const hexOf = (random: () => number, bytes: number) =>
  Array.from({ length: bytes }, () => Math.floor(random() * 256).toString(16).padStart(2, "0"))
    .join("");

function randomString(random: () => number): string {
  const alphabets = ["abc.xyz/_-", "é€😀中\u0000\u007f", '"\\\n\t{}'];
  const length = [0, 1, 5, 60, 127, 128, 300, 20_000][Math.floor(random() * 8)]!;
  let s = "";
  for (let i = 0; i < length; i++) {
    const alphabet = alphabets[random() < 0.8 ? 0 : Math.floor(random() * 3)]!;
    s += [...alphabet][Math.floor(random() * [...alphabet].length)];
  }
  return s;
}

function randomValue(random: () => number): AttributeValue {
  const pick = random();
  if (pick < 0.4) return randomString(random);
  if (pick < 0.5) return random() < 0.5;
  const ints = [
    0,
    1,
    -1,
    127,
    128,
    -32602,
    2 ** 31,
    -(2 ** 31),
    Number.MAX_SAFE_INTEGER,
    -Number.MAX_SAFE_INTEGER,
  ];
  if (pick < 0.85) return ints[Math.floor(random() * ints.length)]!;
  return [0.5, -1.25, 1e300, 2 ** 53 + 2, -0.001][Math.floor(random() * 5)]!;
}

function randomSpan(random: () => number): SpanData {
  const attributes: Record<string, AttributeValue> = {};
  const n = Math.floor(random() * 12);
  for (let i = 0; i < n; i++) {
    attributes[`k${i}.${randomString(random).slice(0, 8)}`] = randomValue(random);
  }
  const start = 1_796_000_000_000 + random() * 1e9;
  const error = random() < 0.3;
  return {
    name: randomString(random) || "span",
    kind: ([1, 2, 3] as const)[Math.floor(random() * 3)]!,
    traceId: hexOf(random, 16),
    spanId: hexOf(random, 8),
    parentSpanId: random() < 0.5 ? hexOf(random, 8) : undefined,
    traceState: random() < 0.3 ? "a=b,c@d=e" : undefined,
    flags: [0x101, 0x301, 0x100][Math.floor(random() * 3)]!,
    startMs: start,
    endMs: start + random() * 1000,
    attributes,
    statusCode: error ? 2 : 0,
    statusMessage: error ? randomString(random) : "",
  };
}

// OTLP/JSON with every default spelled out the way the decoder leaves it out.
function normalized(value: unknown): unknown {
  if (Array.isArray(value)) {
    const list = value.map(normalized);
    return list.length ? list : undefined;
  }
  if (value === null || typeof value !== "object") {
    return value === 0 || value === "" || value === false ? undefined : value;
  }
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    // AnyValue's oneof member is present whatever its value.
    const kept = ["stringValue", "boolValue", "intValue", "doubleValue"].includes(key)
      ? (key === "doubleValue" ? v : v)
      : normalized(v);
    if (kept !== undefined) out[key] = kept;
  }
  return Object.keys(out).length ? out : undefined;
}

Deno.test("otlp traces: protobuf decoded by OpenTelemetry's decoder says what the JSON says — 300 generated spans", () => {
  const random = rng(7);
  const source = {
    resource: { "service.name": "codex-exec-server", "service.version": "1.2.3", n: 5, on: true },
    scope: { name: "codex-exec-server", version: "1.2.3" },
  };
  for (let round = 0; round < 30; round++) {
    const spans = Array.from({ length: 10 }, () => randomSpan(random));
    const decoded = decodeTracesProtobuf(encodeTracesProtobuf(spans, source));
    const json = JSON.parse(encodeTracesJson(spans, source));
    // The decoder writes doubles as numbers and int64 as decimal strings, as the JSON does.
    assertEquals(normalized(decoded), normalized(json), `round ${round}`);
  }
});

Deno.test("otlp traces: timestamps in nanoseconds, ids in hex, negative integers, an empty string value", () => {
  const span: SpanData = {
    name: "n",
    kind: SpanKind.SERVER,
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    parentSpanId: undefined,
    traceState: undefined,
    flags: 0x101,
    startMs: 1_796_656_470_669.543945,
    endMs: 1_796_656_470_671,
    attributes: { code: -32602, empty: "", zero: 0, no: false },
    statusCode: 2,
    statusMessage: "bad",
  };
  const source = { resource: {}, scope: { name: "s" } };
  const decoded = decodeTracesProtobuf(encodeTracesProtobuf([span], source)) as {
    resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>;
  };
  const s = decoded.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
  assertEquals(s.traceId, span.traceId);
  assertEquals(s.spanId, span.spanId);
  assertEquals(s.startTimeUnixNano, "1796656470669543945");
  assertEquals(s.endTimeUnixNano, "1796656470671000000");
  assertEquals(s.kind, 2);
  assertEquals(s.flags, 0x101);
  assertEquals(s.status, { message: "bad", code: 2 });
  assertEquals(s.attributes, [
    { key: "code", value: { intValue: "-32602" } },
    { key: "empty", value: { stringValue: "" } },
    { key: "zero", value: { intValue: "0" } },
    { key: "no", value: { boolValue: false } },
  ]);
});

Deno.test("protobuf writer: nested lengths across one, two and three bytes, strings ASCII or not", () => {
  for (const size of [0, 1, 127, 128, 16_383, 16_384, 70_000]) {
    for (const text of ["x".repeat(size), "é".repeat(Math.ceil(size / 2))]) {
      const w = new ProtoWriter(8);
      w.begin(1);
      w.string(2, text);
      w.uint(3, size);
      w.end();
      const bytes = w.finish();
      // Read it back by hand: tag 0x0a, length, tag 0x12, length, text, tag 0x18, varint.
      let at = 0;
      const varint = () => {
        let v = 0;
        for (let shift = 1;; shift *= 128) {
          const b = bytes[at++]!;
          v += (b & 0x7f) * shift;
          if (b < 0x80) return v;
        }
      };
      assertEquals(bytes[at++], 0x0a);
      assertEquals(varint(), bytes.length - at);
      if (text.length) {
        assertEquals(bytes[at++], 0x12);
        const n = varint();
        assertEquals(new TextDecoder().decode(bytes.subarray(at, at + n)), text);
        at += n;
      }
      if (size) {
        assertEquals(bytes[at++], 0x18);
        assertEquals(varint(), size);
      }
      assertEquals(at, bytes.length);
    }
  }
});

function collecting(options: ConstructorParameters<typeof SpanRecorder>[1] = {}) {
  const batches: SpanData[][] = [];
  const waiters: Array<() => void> = [];
  const recorder = new SpanRecorder((batch) => {
    batches.push([...batch]);
    for (const wake of waiters.splice(0)) wake();
    return Promise.resolve();
  }, { scheduledDelayMs: 60_000, ...options });
  const next = () => new Promise<void>((resolve) => waiters.push(resolve));
  return { recorder, batches, next };
}

Deno.test("span recorder: parents, parent-based sampling, remote flags and tracestate as the SDK keeps them", async () => {
  const { recorder, batches } = collecting();
  const tracer = recorder.requestTracer({ activeFor: (m) => m === "process/start" });
  const answer = (child: string | null) => () => {
    if (child) recorder.start(child, SpanKind.INTERNAL).end();
    return Promise.resolve({ result: {} });
  };
  const sampled = {
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    tracestate: "a=b, BAD=x ,c@d=e,a=dup",
  };
  const unsampled = { traceparent: "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-00" };
  await tracer.run("process/start", 1, sampled, answer("child"), performance.now());
  await tracer.run("process/start", 2, unsampled, answer("hidden child"));
  await tracer.run("process/start", 3, undefined, answer("root child"));
  await tracer.run("fs/readFile", 4, undefined, answer("not a child"));
  await tracer.run("process/start", 5, {
    traceparent: "00-00000000000000000000000000000000-b7ad6b7169203331-01",
  }, answer(null));
  await recorder.shutdown();
  const spans = batches.flat();
  const by = (name: string) => spans.filter((s) => s.name === name);
  assertEquals(spans.length, 7, JSON.stringify(spans.map((s) => s.name)));
  assertEquals(by("hidden child").length, 0);
  const [remoteChild] = by("process/start").filter((s) => s.parentSpanId === "b7ad6b7169203331");
  assert(remoteChild);
  assertEquals(remoteChild.traceId, "0af7651916cd43dd8448eb211c80319c");
  assertEquals(remoteChild.flags, 0x301);
  assertEquals(remoteChild.traceState, "a=b,c@d=e");
  assert(Number(remoteChild.attributes["rpc.dispatch_offset_ns"]) >= 0);
  assert(
    Number(remoteChild.attributes["rpc.response_enqueue_offset_ns"]) >=
      Number(remoteChild.attributes["rpc.dispatch_offset_ns"]),
  );
  const child = by("child")[0]!;
  assertEquals([child.parentSpanId, child.traceId, child.flags, child.traceState], [
    remoteChild.spanId,
    remoteChild.traceId,
    0x101,
    "a=b,c@d=e",
  ]);
  const rootChild = by("root child")[0]!;
  const root = spans.find((s) => s.spanId === rootChild.parentSpanId)!;
  assertEquals([root.name, root.parentSpanId, root.flags, rootChild.traceId], [
    "process/start",
    undefined,
    0x101,
    root.traceId,
  ]);
  // Outside `activeFor`, a handler's spans are roots.
  assertEquals(by("not a child")[0]!.parentSpanId, undefined);
  // An all-zero trace id is no parent.
  const fifth = spans.find((s) => s.attributes["rpc.jsonrpc.request_id"] === "5")!;
  assertEquals(fifth.parentSpanId, undefined);
  for (const s of spans) {
    assert(/^[0-9a-f]{32}$/.test(s.traceId) && /^[0-9a-f]{16}$/.test(s.spanId), s.spanId);
    assert(s.endMs >= s.startMs);
  }
  assertEquals(new Set(spans.map((s) => s.spanId)).size, spans.length);
  assertEquals(cleanTraceState("  "), undefined);
  assertEquals(
    cleanTraceState(Array.from({ length: 40 }, (_, i) => `k${i}=v`).join(","))?.split(",").length,
    32,
  );
});

Deno.test("span recorder: an error answer sets the error attributes and status", async () => {
  const { recorder, batches } = collecting();
  const tracer = recorder.requestTracer();
  await tracer.run(
    "fs/readFile",
    "a",
    undefined,
    () => Promise.resolve({ error: { code: -32602, message: "no" } }),
  );
  await recorder.shutdown();
  const [span] = batches.flat();
  assertEquals([
    span!.attributes.result,
    span!.attributes["rpc.jsonrpc.error_code"],
    span!.statusCode,
    span!.statusMessage,
  ], ["error", -32602, 2, "no"]);
});

Deno.test("span recorder: full batches at once, the rest after the delay or at shutdown, a bounded queue, nothing after shutdown", async () => {
  {
    const { recorder, batches, next } = collecting({ maxExportBatchSize: 4, maxQueueSize: 10 });
    const arrived = next();
    for (let i = 0; i < 6; i++) recorder.start(`s${i}`, SpanKind.INTERNAL).end();
    await arrived;
    assertEquals(batches.map((b) => b.map((s) => s.name)), [["s0", "s1", "s2", "s3"]]);
    await recorder.shutdown();
    assertEquals(batches.map((b) => b.length), [4, 2]);
    recorder.start("late", SpanKind.INTERNAL).end();
    await recorder.flush();
    assertEquals(batches.flat().length, 6);
  }
  {
    // A sink that holds its first push: the queue fills to its bound, the rest are counted.
    let release!: () => void;
    const held = new Promise<void>((resolve) => release = resolve);
    const pushed: number[] = [];
    const recorder = new SpanRecorder(async (batch) => {
      pushed.push(batch.length);
      if (pushed.length === 1) await held;
    }, { maxExportBatchSize: 2, maxQueueSize: 5, scheduledDelayMs: 60_000 });
    for (let i = 0; i < 12; i++) recorder.start(`s${i}`, SpanKind.INTERNAL).end();
    // The first two went out; five wait; five were dropped.
    assertEquals(recorder.dropped, 5);
    release();
    await recorder.shutdown();
    assertEquals(pushed, [2, 2, 2, 1]);
  }
  {
    const { recorder, batches, next } = collecting({ scheduledDelayMs: 1 });
    const arrived = next();
    recorder.start("alone", SpanKind.INTERNAL).end();
    // The recorder's timer does not keep a process alive; this test does.
    const alive = setInterval(() => {}, 1000);
    await arrived;
    clearInterval(alive);
    assertEquals(batches.flat().map((s) => s.name), ["alone"]);
    await recorder.shutdown();
  }
  {
    const errors: number[] = [];
    const recorder = new SpanRecorder(() => Promise.reject(new Error("down")), {
      onError: (_, spans) => errors.push(spans),
    });
    for (let i = 0; i < 3; i++) recorder.start(`s${i}`, SpanKind.INTERNAL).end();
    await recorder.shutdown();
    assertEquals(errors, [3]);
  }
});

Deno.test("otlp span sink: its content type and headers, retryable answers tried again, others refused at once", async () => {
  const seen: Array<{ type: string | null; tenant: string | null; size: number }> = [];
  const answers = [503, 429, 200, 400];
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      seen.push({
        type: req.headers.get("content-type"),
        tenant: req.headers.get("x-tenant"),
        size: (await req.arrayBuffer()).byteLength,
      });
      const status = answers.shift() ?? 500;
      return new Response(null, {
        status,
        headers: status === 200 || status === 400 ? {} : { "retry-after": "0" },
      });
    },
  );
  const settings = {
    endpoint: `http://127.0.0.1:${server.addr.port}/v1/traces`,
    headers: { "x-tenant": "t1" },
    environment: "dev",
  };
  const source = { resource: { "service.name": "x" }, scope: { name: "x" } };
  const span = randomSpan(rng(3));
  await otlpSpanSink({ ...settings, protocol: "binary" }, source)([span]);
  assertEquals(seen.map((s) => [s.type, s.tenant]), [
    ["application/x-protobuf", "t1"],
    ["application/x-protobuf", "t1"],
    ["application/x-protobuf", "t1"],
  ]);
  assertEquals(seen[0]!.size, encodeTracesProtobuf([span], source).length);
  let refused = "";
  try {
    await otlpSpanSink({ ...settings, protocol: "json" }, source)([span]);
  } catch (error) {
    refused = (error as Error).message;
  }
  assert(refused.includes("answered 400 (attempt 1)"), refused);
  assertEquals(seen.at(-1)!.type, "application/json");
  assertEquals(seen.length, 4);
  await server.shutdown();
  let down = "";
  try {
    await otlpSpanSink({ ...settings, protocol: "json" }, source)([span]);
  } catch (error) {
    down = (error as Error).message;
  }
  assert(down.startsWith(`OTLP push to ${settings.endpoint} failed`), down);
});
