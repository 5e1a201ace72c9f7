// The Responses API proxy: key reading, forwarding rules, streaming, refusals,
// dumps, and the command line (server-info, shutdown, stdin errors).

import { API_KEY_ERRORS, ApiKeyError, readApiKeyHeader } from "../../src/sidecars/api_key.ts";
import { startResponsesProxy } from "../../src/sidecars/responses_proxy.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, text, waitFor } from "../helpers/wire_client.ts";

const encoder = new TextEncoder();

/** A key source that hands out `parts` one read at a time. */
function chunks(...parts: Array<string | Uint8Array | Error>) {
  const queue = [...parts];
  return {
    read(buffer: Uint8Array): Promise<number | null> {
      const next = queue.shift();
      if (next === undefined) return Promise.resolve(null);
      if (next instanceof Error) return Promise.reject(next);
      const bytes = typeof next === "string" ? encoder.encode(next) : next;
      buffer.set(bytes);
      return Promise.resolve(bytes.length);
    },
  };
}

async function keyError(source: ReturnType<typeof chunks>): Promise<string> {
  const error = await assertRejects(() => readApiKeyHeader(source), ApiKeyError);
  return error.message;
}

Deno.test("api key: read whole, across short reads, trimmed, stops at the newline", async () => {
  assertEquals(text(await readApiKeyHeader(chunks("sk-abc_123"))), "Bearer sk-abc_123");
  assertEquals(text(await readApiKeyHeader(chunks("sk-", "ab", "c"))), "Bearer sk-abc");
  assertEquals(text(await readApiKeyHeader(chunks("sk-abc\r\n"))), "Bearer sk-abc");
  assertEquals(text(await readApiKeyHeader(chunks("sk-abc\nignored garbage"))), "Bearer sk-abc");
  assertEquals(text(await readApiKeyHeader(chunks("k".repeat(1016)))).length, 7 + 1016);
  assertEquals(text(await readApiKeyHeader(chunks("k".repeat(1016) + "\n"))).length, 7 + 1016);
});

Deno.test("api key: every refusal has the reference's text", async () => {
  assertEquals(await keyError(chunks()), API_KEY_ERRORS.missing);
  assertEquals(await keyError(chunks("\r\n")), API_KEY_ERRORS.missing);
  assertEquals(await keyError(chunks("k".repeat(1017))), API_KEY_ERRORS.tooLarge);
  assertEquals(API_KEY_ERRORS.tooLarge, "API key is too large to fit in the 1024-byte buffer");
  assertEquals(await keyError(chunks("sk abc")), API_KEY_ERRORS.invalid);
  assertEquals(await keyError(chunks(new Uint8Array([0x73, 0xff, 0xfe]))), API_KEY_ERRORS.invalid);
  assertEquals(await keyError(chunks("sk\0")), API_KEY_ERRORS.invalid);
  assertStringIncludes(await keyError(chunks("sk", new Error("disk on fire"))), "disk on fire");
});

Deno.test("api key: the scratch buffer is wiped on success and on failure", async () => {
  const seen: Uint8Array[] = [];
  const spy = (parts: string[]) => {
    const inner = chunks(...parts);
    return {
      read(buffer: Uint8Array) {
        seen.push(buffer);
        return inner.read(buffer);
      },
    };
  };
  await readApiKeyHeader(spy(["sk-secret\n"]));
  await readApiKeyHeader(spy(["sk secret"])).catch(() => {});
  assertEquals(seen.length > 0, true);
  for (const view of seen) {
    const whole = new Uint8Array(view.buffer);
    assert(whole.every((b) => b === 0), "buffer not wiped");
  }
});

interface Upstream {
  url: string;
  seen: Array<{ method: string; url: string; headers: Array<[string, string]>; body: string }>;
  /** Releases the second SSE event. */
  releaseSecond: () => void;
  server: Deno.HttpServer;
}

function fakeUpstream(): Upstream {
  const seen: Upstream["seen"] = [];
  let release = Promise.withResolvers<void>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.text();
    seen.push({ method: req.method, url: req.url, headers: [...req.headers], body });
    if (body.includes("stream")) {
      const gate = release.promise;
      const stream = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(encoder.encode("data: one\n\n"));
          await gate;
          controller.enqueue(encoder.encode("data: two\n\n"));
          controller.close();
        },
      });
      return new Response(stream, {
        headers: { "content-type": "text/event-stream", "set-cookie": "s=1", "x-up": "yes" },
      });
    }
    return Response.json({ ok: true }, { status: 201, headers: { "x-up": "yes" } });
  });
  const url = `http://127.0.0.1:${server.addr.port}/v1/responses?api-version=1`;
  return {
    url,
    seen,
    server,
    releaseSecond: () => {
      release.resolve();
      release = Promise.withResolvers<void>();
    },
  };
}

/** Sends raw bytes and returns the whole raw response. */
async function raw(port: number, request: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(encoder.encode(request));
  let out = "";
  for await (const chunk of conn.readable) out += text(chunk);
  return out;
}

Deno.test("responses proxy: forwards POST /v1/responses with the key and header rules", async () => {
  const upstream = fakeUpstream();
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: upstream.url,
  });
  try {
    const res = await fetch(`http://127.0.0.1:${proxy.addr.port}/v1/responses`, {
      method: "POST",
      headers: {
        "Authorization": "Bearer client-should-not-pass",
        "Content-Type": "application/json",
        "Cookie": "c=1",
        "X-Custom": "v",
      },
      body: JSON.stringify({ model: "m" }),
    });
    assertEquals(res.status, 201);
    assertEquals(res.headers.get("x-up"), "yes");
    assertEquals(await res.json(), { ok: true });
    const got = upstream.seen[0]!;
    assertEquals(got.method, "POST");
    assertEquals(new URL(got.url).search, "?api-version=1");
    const headers = new Map(got.headers);
    assertEquals(headers.get("authorization"), "Bearer sk-test");
    assertEquals(headers.get("host"), `127.0.0.1:${new URL(upstream.url).port}`);
    assertEquals(headers.get("cookie"), "c=1");
    assertEquals(headers.get("x-custom"), "v");
    assertEquals(headers.get("content-type"), "application/json");
    assertEquals(got.body, '{"model":"m"}');
  } finally {
    await proxy.close();
    await upstream.server.shutdown();
  }
});

Deno.test("responses proxy: server-sent events arrive as the upstream produces them", async () => {
  const upstream = fakeUpstream();
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: upstream.url,
  });
  try {
    const res = await fetch(`http://127.0.0.1:${proxy.addr.port}/v1/responses`, {
      method: "POST",
      body: '{"stream":true}',
    });
    assertEquals(res.headers.get("content-type"), "text/event-stream");
    const reader = res.body!.getReader();
    // The first event is readable while the upstream still holds the second.
    let got = "";
    while (!got.includes("data: one\n\n")) got += text((await reader.read()).value!);
    assertEquals(got, "data: one\n\n");
    upstream.releaseSecond();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      got += text(value);
    }
    assertEquals(got, "data: one\n\ndata: two\n\n");
  } finally {
    await proxy.close();
    await upstream.server.shutdown();
  }
});

Deno.test("responses proxy: everything but an exact POST /v1/responses is an empty 403", async () => {
  const upstream = fakeUpstream();
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: upstream.url,
  });
  try {
    const port = proxy.addr.port;
    const refused = [
      "GET /v1/responses",
      "HEAD /v1/responses",
      "POST /v1/responses?x=1",
      "POST /v1/responses/",
      "POST //v1/responses",
      "POST /v1/%72esponses",
      "POST /v1/chat/completions",
      "GET /shutdown",
      "POST http://127.0.0.1/v1/responses",
    ];
    for (const line of refused) {
      const response = await raw(
        port,
        `${line} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}`,
      );
      assert(response.startsWith("HTTP/1.1 403 "), `${line}: ${response}`);
      assertStringIncludes(response.toLowerCase(), "content-length: 0\r\n");
      assert(response.endsWith("\r\n\r\n"), `${line}: body not empty`);
    }
    assertEquals(upstream.seen.length, 0);
  } finally {
    await proxy.close();
    await upstream.server.shutdown();
  }
});

Deno.test("responses proxy: an unreachable upstream is an empty 500, reported", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = closed.addr.port;
  closed.close();
  const reports: string[] = [];
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: `http://127.0.0.1:${port}/v1/responses`,
    report: (line) => reports.push(line),
  });
  try {
    const res = await fetch(`http://127.0.0.1:${proxy.addr.port}/v1/responses`, {
      method: "POST",
      body: "{}",
    });
    assertEquals(res.status, 500);
    assertEquals(await res.text(), "");
    assertStringIncludes(reports.join("\n"), "forwarding error: forwarding request to upstream");
    assert(!reports.join("\n").includes("sk-test"));
  } finally {
    await proxy.close();
  }
});

Deno.test("responses proxy: chunked and expect: 100-continue requests are forwarded whole", async () => {
  const upstream = fakeUpstream();
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: upstream.url,
  });
  try {
    const response = await raw(
      proxy.addr.port,
      "POST /v1/responses HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n" +
        'expect: 100-continue\r\n\r\n3\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n',
    );
    assert(response.startsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 "), response);
    const got = upstream.seen[0]!;
    assertEquals(got.body, '{"a":1}');
    const names = got.headers.map(([n]) => n);
    assert(!names.includes("expect") && !names.includes("transfer-encoding"), names.join());
  } finally {
    await proxy.close();
    await upstream.server.shutdown();
  }
});

Deno.test("responses proxy: dumps requests and responses with secrets redacted", async () => {
  const upstream = fakeUpstream();
  const dir = await Deno.makeTempDir();
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: upstream.url,
    dumpDir: `${dir}/dumps`,
  });
  try {
    for (const body of ['{"n":1}', '{"stream":true}']) {
      const res = await fetch(`http://127.0.0.1:${proxy.addr.port}/v1/responses`, {
        method: "POST",
        headers: { "Authorization": "Bearer x", "Cookie": "c=1", "X-Codex-Turn": "t" },
        body,
      });
      upstream.releaseSecond();
      await res.arrayBuffer();
    }
    const names = await waitFor(async () => {
      const list: string[] = [];
      // Dumps appear whole (written aside, then renamed): count the finished ones.
      for await (const e of Deno.readDir(`${dir}/dumps`)) {
        if (e.name.endsWith(".json")) list.push(e.name);
      }
      return list.length === 4 ? list.sort() : null;
    });
    assert(names[0]!.match(/^000001-\d{13}-request\.json$/), names[0]);
    assertEquals(names[1], names[0]!.replace("request", "response"));
    assert(names[2]!.startsWith("000002-"), names[2]);
    const request = JSON.parse(await Deno.readTextFile(`${dir}/dumps/${names[0]}`));
    assertEquals(request.method, "POST");
    assertEquals(request.url, "/v1/responses");
    assertEquals(request.body, { n: 1 });
    const headers = Object.fromEntries(
      request.headers.map((h: { name: string; value: string }) => [h.name.toLowerCase(), h.value]),
    );
    assertEquals(headers.authorization, "[REDACTED]");
    assertEquals(headers.cookie, "[REDACTED]");
    assertEquals(headers["x-codex-turn"], "t");
    const sse = JSON.parse(await Deno.readTextFile(`${dir}/dumps/${names[3]}`));
    assertEquals(sse.status, 200);
    assertEquals(sse.body, "data: one\n\ndata: two\n\n");
    const cookie = sse.headers.find((h: { name: string }) => h.name === "set-cookie");
    assertEquals(cookie.value, "[REDACTED]");
    const raw = await Deno.readTextFile(`${dir}/dumps/${names[1]}`);
    assert(raw.endsWith("}\n") && raw.includes('\n  "status": 201'), raw);
    assert(!raw.includes("sk-test"));
  } finally {
    await proxy.close();
    await upstream.server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

async function cli(args: string[], stdin: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "responses-proxy", ...args],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(encoder.encode(stdin));
  await writer.close();
  return child;
}

Deno.test("responses-proxy CLI: stdin refusals exit 1 before listening", async () => {
  for (
    const [stdin, message] of [
      ["", API_KEY_ERRORS.missing],
      ["bad key\n", API_KEY_ERRORS.invalid],
      ["k".repeat(2000), API_KEY_ERRORS.tooLarge],
    ]
  ) {
    const child = await cli([], stdin!);
    const out = await child.output();
    assertEquals(out.code, 1);
    assertStringIncludes(text(out.stderr), `Error: ${message}`);
    assert(!text(out.stderr).includes("listening"));
  }
});

Deno.test("responses-proxy CLI: server-info, listening line and GET /shutdown exit 0", async () => {
  const dir = await Deno.makeTempDir();
  const info = `${dir}/nested/info.json`;
  const child = await cli(["--server-info", info, "--http-shutdown"], "sk-test\n");
  try {
    const { port, pid } = await waitFor(async () => {
      try {
        const content = await Deno.readTextFile(info);
        return content.endsWith("\n") ? JSON.parse(content) : null;
      } catch {
        return null;
      }
    });
    assertEquals(pid, child.pid);
    const res = await fetch(`http://127.0.0.1:${port}/shutdown`);
    assertEquals(res.status, 200);
    assertEquals(await res.text(), "");
    const out = await child.output();
    assertEquals(out.code, 0);
    assertStringIncludes(text(out.stderr), `responses-api-proxy listening on 127.0.0.1:${port}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
