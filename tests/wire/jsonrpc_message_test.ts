import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/assert.ts";
import { parseStrictJson } from "../../src/jsonrpc/strict_json.ts";
import {
  classifyMessage,
  decodeMessage,
  encodeMessage,
  isMalformed,
} from "../../src/jsonrpc/message.ts";
import { strictUtf8Decoder } from "../../src/util/utf8.ts";
import { createOutputSink, ndjsonFraming } from "../../src/jsonrpc/output_sink.ts";
import { concatBytes } from "../../src/util/bytes.ts";

function detail(text: string): string {
  const m = decodeMessage(text, "P");
  assert(isMalformed(m), `expected malformed: ${text}`);
  return m.malformed.slice(3);
}

Deno.test("strict JSON rejects duplicate keys at any depth, with the key named", () => {
  assertEquals(
    detail('{"id":9,"id":10,"method":"x"}'),
    "duplicate JSON object key `id` at line 1 column 9",
  );
  assert(
    detail('{"id":1,"method":"x","params":{"a":1,"b":{"c":1,"c":2}}}').startsWith(
      "duplicate JSON object key `c`",
    ),
  );
  // Escaped keys are compared by value.
  assert(
    detail('{"id":1,"method":"x","params":{"a":1,"\\u0061":2}}').startsWith(
      "duplicate JSON object key `a`",
    ),
  );
  // Many keys (set path) still detect duplicates.
  const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, i]));
  const text = JSON.stringify({ id: 1, method: "m", params: many }).slice(0, -2) + ',"k3":1}}';
  assert(detail(text).startsWith("duplicate JSON object key `k3`"));
});

Deno.test("strict JSON enforces the value budget exactly", () => {
  // object + id + method + junk array + 262140 zeros = 262144 values: accepted (T21)
  const ok = `{"id":1,"method":"m","junk":[${Array(262140).fill(0).join(",")}]}`;
  assertEquals(parseStrictJson(ok).ok, true);
  const over = `{"id":1,"method":"m","junk":[${Array(262141).fill(0).join(",")}]}`;
  const r = parseStrictJson(over);
  assert(!r.ok && r.message.startsWith("JSON-RPC message exceeds the limit of 262144 JSON values"));
});

Deno.test("strict JSON limits nesting depth to 128", () => {
  assertEquals(parseStrictJson("[".repeat(128) + "]".repeat(128)).ok, true);
  const r = parseStrictJson("[".repeat(129) + "]".repeat(129));
  assert(!r.ok && r.message.startsWith("recursion limit exceeded"));
  // Far deeper input fails cleanly too (no stack overflow).
  const deep = parseStrictJson("[".repeat(100_000));
  assertEquals(deep.ok, false);
});

Deno.test("strict JSON reports syntax errors in serde's wording", () => {
  assertEquals(detail("{not json}"), "key must be a string at line 1 column 2");
  assertEquals(detail('{"id":1,"method":"x"} x'), "trailing characters at line 1 column 23");
  assertEquals(detail("\uFEFF{}"), "expected value at line 1 column 1");
  assert(detail('{"id":1,"method":"x"').startsWith("EOF while parsing an object"));
  assert(detail('{"a":"unterminated').startsWith("EOF while parsing a string"));
  assert(
    detail('{"id":01,"method":"x"}').startsWith("trailing") ||
      detail('{"id":01,"method":"x"}').startsWith("expected"),
  );
  assert(detail('{"id":1,"method":"a\\qb"}').startsWith("invalid string"));
});

Deno.test("strings with escaped quotes and long payloads scan in linear time", () => {
  const r = parseStrictJson('{"a":"x\\"y\\\\","b":"\\\\\\""}');
  if (!r.ok) throw new Error(r.message);
  assertEquals(r.value, { a: 'x"y\\', b: '\\"' });
  // 2 000 short strings, no backslash until the very end: must not be quadratic.
  const parts = Array.from({ length: 2000 }, (_, i) => `"k${i}":"v"`);
  const text = `{${parts.join(",")},"z":"\\n"}`;
  const t0 = performance.now();
  for (let i = 0; i < 20; i++) assert(parseStrictJson(text).ok);
  assert(performance.now() - t0 < 2000);
  const big = `{"id":1,"method":"m","params":{"d":"${"A".repeat(8_000_000)}"}}`;
  assert(parseStrictJson(big).ok);
});

Deno.test("ids: integers in i64 are echoed exactly, floats/null/out of range rejected", () => {
  const big = decodeMessage('{"id":9223372036854775807,"method":"m"}', "P");
  assertEquals((big as { id: unknown }).id, 9223372036854775807n);
  assertEquals(
    encodeMessage({ id: 9223372036854775807n, result: 1 }),
    '{"jsonrpc":"2.0","id":9223372036854775807,"result":1}',
  );
  assertEquals((decodeMessage('{"id":-5,"method":"m"}', "P") as { id: unknown }).id, -5);
  assertEquals((decodeMessage('{"id":"abc","method":"m"}', "P") as { id: unknown }).id, "abc");
  const bad = "data did not match any variant of untagged enum RequestId";
  assertEquals(detail('{"id":1.5,"method":"m"}'), bad);
  assertEquals(detail('{"id":1e3,"method":"m"}'), bad);
  assertEquals(detail('{"id":null,"method":"m"}'), bad);
  assertEquals(detail('{"id":9223372036854775808,"method":"m"}'), bad);
  assertEquals(detail('{"id":true,"method":"m"}'), bad);
});

Deno.test("classification: requests, notifications, responses, errors and non-messages", () => {
  assertEquals(classifyMessage({ id: 1, method: "m" }), { id: 1, method: "m" });
  assertEquals(classifyMessage({ method: "n", params: [1] }), { method: "n", params: [1] });
  assertEquals(classifyMessage({ id: 1, result: null }), { id: 1, result: null });
  assertEquals(classifyMessage({ id: 1, error: { code: -1, message: "x" } }), {
    id: 1,
    error: { code: -1, message: "x" },
  });
  assertEquals(classifyMessage([1, 2, 3]), "expected a JSON-RPC object");
  assertEquals(classifyMessage("x"), "expected a JSON-RPC object");
  assertEquals(classifyMessage({ id: 5 }), "missing field `error`");
  assertEquals(
    classifyMessage({ id: 1, method: 5 }),
    "invalid type: number, expected a string",
  );
  // "jsonrpc" is ignored on input, whatever its value.
  assertEquals(classifyMessage({ jsonrpc: "1.0", id: 2, method: "m" }), { id: 2, method: "m" });
});

Deno.test("encoding is compact with jsonrpc first and omits absent params", () => {
  assertEquals(encodeMessage({ method: "n" }), '{"jsonrpc":"2.0","method":"n"}');
  assertEquals(
    encodeMessage({ id: "a", method: "m", params: { x: 1 } }),
    '{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":1}}',
  );
  assertEquals(
    encodeMessage({ id: -1, error: { code: -32600, message: "bad" } }),
    '{"jsonrpc":"2.0","id":-1,"error":{"code":-32600,"message":"bad"}}',
  );
  assertEquals(
    encodeMessage({ id: 1, result: undefined }),
    '{"jsonrpc":"2.0","id":1,"result":null}',
  );
});

Deno.test("strict UTF-8: the fast decoder accepts and refuses exactly what the fatal one does", () => {
  const fatal = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  const fast = strictUtf8Decoder();
  const cases = [
    [0x61, 0x62],
    [0xe2, 0x82, 0xac], // €
    [0xef, 0xbf, 0xbd], // a real U+FFFD
    [0xf0, 0x9f, 0x98, 0x80],
    [0xff],
    [0xc0, 0xaf], // overlong
    [0xed, 0xa0, 0x80], // surrogate
    [0xe2, 0x82], // truncated
    [0xef, 0xbb, 0xbf, 0x7b, 0x7d], // BOM
    [0x61, 0xef, 0xbf, 0xbd, 0x80],
  ];
  for (const bytes of cases.map((c) => Uint8Array.from(c))) {
    let expected: string | null = null;
    try {
      expected = fatal.decode(bytes);
    } catch { /* invalid */ }
    if (expected === null) assertThrows(() => fast(bytes), TypeError);
    else assertEquals(fast(bytes), expected);
  }
  // A byte-order mark is kept, so JSON that starts with one is refused.
  assertEquals(strictUtf8Decoder()(Uint8Array.from([0xef, 0xbb, 0xbf, 0x7b])), "\uFEFF{");
});

Deno.test("trace context: a request's top-level trace member round-trips; others drop it", () => {
  const trace = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" };
  const text = encodeMessage({ id: 7, method: "m", params: { a: 1 }, trace });
  assertEquals(JSON.parse(text).trace, trace);
  assertEquals(JSON.parse(encodeMessage({ id: 8, method: "m", trace })).trace, trace);
  const back = decodeMessage(text, "x") as { trace?: unknown };
  assertEquals(back.trace, trace);
  // Notifications carry none; malformed trace members are ignored.
  assertEquals(
    (decodeMessage('{"jsonrpc":"2.0","method":"n","trace":{"traceparent":"x"}}', "x") as {
      trace?: unknown;
    }).trace,
    undefined,
  );
  assertEquals(
    (decodeMessage('{"jsonrpc":"2.0","id":1,"method":"m","trace":{"traceparent":5}}', "x") as {
      trace?: unknown;
    }).trace,
    undefined,
  );
});

Deno.test("output sink: an `alone` message gets a batch of its own, handed over with it", async () => {
  const batches: Array<[string, string | undefined]> = [];
  let release!: () => void;
  let gate = new Promise<void>((r) => (release = r));
  const output = createOutputSink(
    ndjsonFraming,
    async (bytes, alone) => {
      await gate; // hold the first batch so later messages pile up
      batches.push([new TextDecoder().decode(bytes), (alone as { method?: string })?.method]);
    },
    () => Promise.resolve(),
    { alone: (m) => (m as { method?: string }).method === "solo" },
  );
  const writer = new WritableStream(output.sink).getWriter();
  const wrote = [
    writer.write({ method: "a" }),
    writer.write({ method: "b" }),
    writer.write({ id: 1, method: "solo" }),
    writer.write({ method: "c" }),
    writer.write({ method: "d" }),
  ];
  await new Promise((r) => setTimeout(r, 10));
  release();
  gate = Promise.resolve();
  await Promise.all(wrote);
  assert(await output.flushed());
  const methods = (text: string) => [...text.matchAll(/"method":"(\w+)"/g)].map((m) => m[1]);
  // Order is kept; the solo message is alone in its batch and is the one
  // handed over with it; no other batch gets a message.
  assertEquals(batches.flatMap(([text]) => methods(text)), ["a", "b", "solo", "c", "d"]);
  const solo = batches.filter(([, alone]) => alone !== undefined);
  assertEquals(solo.length, 1);
  assertEquals([methods(solo[0]![0]), solo[0]![1]], [["solo"], "solo"]);
});

Deno.test("ndjson output: a message larger than the reused buffer goes out in pieces, byte-exact", async () => {
  const { Base64Part, RawJson } = await import("../../src/jsonrpc/message.ts");
  const data = new Uint8Array(6 * 1024 * 1024 + 5);
  for (let i = 0; i < data.length; i += 65536) crypto.getRandomValues(data.subarray(i, i + 65536));
  const text = "é€𝄞x".repeat(1_200_000); // 6 M UTF-16 units, non-ASCII
  const writes: Uint8Array[] = [];
  const output = createOutputSink(
    ndjsonFraming,
    (bytes) => {
      writes.push(bytes.slice()); // the buffer is reused once this resolves
      return Promise.resolve();
    },
    () => Promise.resolve(),
    { reuseBuffers: true },
  );
  const writer = new WritableStream(output.sink).getWriter();
  await Promise.all([
    writer.write({ jsonrpc: "2.0", method: "before", params: {} }),
    writer.write({
      jsonrpc: "2.0",
      id: 1,
      result: new RawJson('{"dataBase64":"', new Base64Part(data), '"}'),
    }),
    writer.write({ jsonrpc: "2.0", method: "text", params: { text } }),
    writer.write({ jsonrpc: "2.0", method: "after", params: {} }),
  ]);
  assert(await output.flushed());
  // Never one buffer the size of a whole large message.
  const largest = Math.max(...writes.map((w) => w.length));
  assert(largest <= 4 * 1024 * 1024, `a write of ${largest} bytes`);
  const lines = new TextDecoder().decode(concatBytes(writes)).split("\n");
  assertEquals(lines.length, 5);
  assertEquals(lines[4], "");
  const [before, file, note, after] = lines.slice(0, 4).map((l) => JSON.parse(l));
  assertEquals([before.method, note.method, after.method], ["before", "text", "after"]);
  assertEquals(Uint8Array.fromBase64(file.result.dataBase64), data);
  assert(note.params.text === text, "the non-ASCII text arrives intact");
});

Deno.test("output sink: bytes are given back once their base64 is in the output, and not before", async () => {
  const { Base64Part, RawJson } = await import("../../src/jsonrpc/message.ts");
  const small = crypto.getRandomValues(new Uint8Array(1000));
  const large = new Uint8Array(6 * 1024 * 1024 + 1);
  for (let i = 0; i < large.length; i += 65536) {
    crypto.getRandomValues(large.subarray(i, i + 65536));
  }
  const want = [small.slice(), large.slice(), small.slice()];
  const released: string[] = [];
  // Given back, the bytes may be overwritten at once (the next read): the
  // output must already hold them.
  const part = (name: string, bytes: Uint8Array) =>
    new Base64Part(bytes, () => {
      released.push(name);
      bytes.fill(0);
    });
  const writes: Uint8Array[] = [];
  const output = createOutputSink(
    ndjsonFraming,
    (bytes) => {
      writes.push(bytes.slice());
      return Promise.resolve();
    },
    () => Promise.resolve(),
    { reuseBuffers: true },
  );
  const writer = new WritableStream(output.sink).getWriter();
  await Promise.all([
    // In a batch; in pieces (larger than the reused buffer); next to
    // non-ASCII text (framed on its own).
    writer.write({
      jsonrpc: "2.0",
      id: 1,
      result: new RawJson('{"d":"', part("small", small), '"}'),
    }),
    writer.write({
      jsonrpc: "2.0",
      id: 2,
      result: new RawJson('{"d":"', part("large", large), '"}'),
    }),
    writer.write({
      jsonrpc: "2.0",
      id: 3,
      result: new RawJson('{"t":"é","d":"', part("mixed", small.slice()), '"}'),
    }),
  ]);
  assert(await output.flushed());
  assertEquals(released.sort(), ["large", "mixed", "small"]);
  const lines = new TextDecoder().decode(concatBytes(writes)).split("\n").slice(0, 3);
  const got = lines.map((l) => Uint8Array.fromBase64(JSON.parse(l).result.d));
  // Where each first differs (a diff of 6 MiB arrays would take the machine's memory).
  const firstDifference = (x: Uint8Array, y: Uint8Array) =>
    x.length !== y.length ? `length ${x.length} ≠ ${y.length}` : x.findIndex((v, i) => v !== y[i]);
  assertEquals(got.map((g, i) => firstDifference(g, want[i]!)), [-1, -1, -1]);
  assertEquals(JSON.parse(lines[2]!).result.t, "é");
});

Deno.test("message parts: a short plain value is joined into one part; a long one and raw parts stay apart", async () => {
  const { encodeMessageParts, RawJson, Base64Part } = await import("../../src/jsonrpc/message.ts");
  assertEquals(encodeMessageParts({ jsonrpc: "2.0", id: 1, result: { a: 1 } }), [
    '{"jsonrpc":"2.0","id":1,"result":{"a":1}}',
  ]);
  assertEquals(
    encodeMessageParts({
      jsonrpc: "2.0",
      id: 2,
      method: "m",
      params: [1],
      trace: { traceparent: "t" },
    }),
    ['{"jsonrpc":"2.0","id":2,"method":"m","params":[1],"trace":{"traceparent":"t"}}'],
  );
  const long = "x".repeat(20_000);
  const parts = encodeMessageParts({ jsonrpc: "2.0", method: "n", params: { long } });
  assertEquals(parts.length, 3);
  assertEquals(parts.join(""), `{"jsonrpc":"2.0","method":"n","params":{"long":"${long}"}}`);
  const bytes = new Base64Part(new Uint8Array([1, 2, 3]));
  const raw = encodeMessageParts({
    jsonrpc: "2.0",
    id: 3,
    result: new RawJson('{"d":"', bytes, '"}'),
  });
  assertEquals(raw.length, 5);
  assert(raw[2] === bytes, "a byte part stays a part of its own");
});

Deno.test("output sink, direct: taken at once below the high-water mark, a promise above it, in order, refused once closed or failed", async () => {
  const writes: string[] = [];
  let release!: () => void;
  let gate = new Promise<void>((r) => (release = r));
  let closed = 0;
  const output = createOutputSink(
    ndjsonFraming,
    async (bytes) => {
      await gate;
      writes.push(new TextDecoder().decode(bytes));
    },
    () => {
      closed++;
      return Promise.resolve();
    },
    { highWaterMark: 200 },
  );
  const sink = output.messages;
  assertEquals(sink.write({ jsonrpc: "2.0", method: "a" }), undefined);
  assert(!sink.congested);
  // The first write is held: these wait, and the backlog passes 200 bytes.
  assertEquals(sink.write({ jsonrpc: "2.0", method: "b", params: "x".repeat(100) }), undefined);
  const blocked = sink.write({ jsonrpc: "2.0", method: "c", params: "y".repeat(100) });
  assert(blocked instanceof Promise, "past the high-water mark the writer waits");
  assert(sink.congested);
  let ready = false;
  const readyWait = sink.ready().then(() => (ready = true));
  await new Promise((r) => setTimeout(r, 5));
  assert(!ready, "ready waits while congested");
  release();
  gate = Promise.resolve();
  await blocked;
  await readyWait;
  assert(!sink.congested);
  assert(await output.flushed());
  const methods = writes.join("").split("\n").filter(Boolean).map((l) => JSON.parse(l).method);
  assertEquals(methods, ["a", "b", "c"]);
  await sink.close();
  await sink.close(); // once
  assertEquals(closed, 1);
  await assertRejects(() => sink.write({ jsonrpc: "2.0", method: "late" })!);
  // A failed output rejects writes and settles `failed` with the error.
  const failing = createOutputSink(
    ndjsonFraming,
    () => Promise.reject(new Error("broken pipe")),
    () => Promise.resolve(),
  );
  failing.messages.write({ jsonrpc: "2.0", method: "x" });
  const error = await failing.messages.failed;
  assertEquals((error as Error).message, "broken pipe");
  assertEquals(await failing.flushed(), false);
  await assertRejects(
    () => failing.messages.write({ jsonrpc: "2.0", method: "y" })!,
    Error,
    "broken pipe",
  );
  await failing.messages.ready(); // never rejects
});

Deno.test("strict JSON: canonical text (the fast path) and the same value spaced out (the scan) parse alike", () => {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const strings = ["", "a", 'q"uote', "back\\slash", "line\nbreak", "\u0001ctl", "é€𝄞", "\ud800"];
  const numbers = [0, -1, 1.5, 1e21, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 1234567890123456, -0.25];
  const make = (depth: number): unknown => {
    const r = random();
    if (depth > 3 || r < 0.35) {
      const k = random();
      return k < 0.4
        ? strings[Math.floor(random() * strings.length)]
        : k < 0.8
        ? numbers[Math.floor(random() * numbers.length)]
        : [true, false, null][Math.floor(random() * 3)];
    }
    if (r < 0.6) return Array.from({ length: Math.floor(random() * 4) }, () => make(depth + 1));
    return Object.fromEntries(
      Array.from(
        { length: Math.floor(random() * 4) },
        (_, i) => [`k${i}${strings[i]}`, make(depth + 1)],
      ),
    );
  };
  for (let i = 0; i < 300; i++) {
    const value = { jsonrpc: "2.0", id: i % 2 ? i : `s${i}`, method: "m", params: make(0) };
    const canonical = JSON.stringify(value);
    const spaced = JSON.stringify(value, null, 1);
    const fast = parseStrictJson(canonical);
    const scanned = parseStrictJson(spaced);
    assert(fast.ok && scanned.ok, canonical);
    assertEquals(fast.value, scanned.value);
    assertEquals(fast.idSource, scanned.idSource);
  }
  // Integers beyond 2^53 are not canonical once rounded: exact, through the scan.
  const wide = parseStrictJson('{"id":12345678901234567890,"method":"m"}');
  assert(wide.ok);
  assertEquals((wide.value as { id: unknown }).id, 12345678901234567890n);
  assertEquals(wide.idSource, "12345678901234567890");
  // Limits hold on the fast path too, with the scan's own wording.
  const tight = { maxValues: 5, maxDepth: 2 };
  assertEquals(parseStrictJson('{"a":[1,2],"b":3}', tight).ok, true);
  const over = parseStrictJson('{"a":[1,2],"b":3,"c":4}', tight);
  assert(
    !over.ok && over.message.startsWith("JSON-RPC message exceeds the limit of 5 JSON values"),
  );
  const deep = parseStrictJson('{"a":[[1]]}', tight);
  assert(!deep.ok && deep.message.startsWith("recursion limit exceeded"));
});
