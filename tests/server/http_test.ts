import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { eventually, inProcessStdio, type Msg, type WireClient } from "../helpers/wire_client.ts";
import { delay } from "../../src/util/async.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

interface Upstream {
  url: string;
  /** Bytes the /huge route has produced so far. */
  produced: () => number;
  close(): Promise<void>;
}

function upstream(): Upstream {
  let produced = 0;
  const ac = new AbortController();
  const hanging = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    async (req) => {
      const url = new URL(req.url);
      switch (url.pathname) {
        case "/echo": {
          const body = new Uint8Array(await req.arrayBuffer());
          return Response.json({
            method: req.method,
            headers: [...req.headers],
            body: dec.decode(body),
            query: url.search,
          });
        }
        case "/multi":
          return new Response("m", {
            headers: [["x-rep", "a"], ["set-cookie", "c=1"], ["set-cookie", "d=2"]],
          });
        case "/missing":
          return new Response("nope", { status: 404 });
        case "/redirect":
          return new Response(null, { status: 302, headers: { location: "/echo?redirected=1" } });
        case "/post-redirect":
          return new Response(null, { status: 303, headers: { location: "/echo?after=post" } });
        case "/slow":
          return new Response(
            new ReadableStream({
              async start(c) {
                for (let i = 0; i < 5; i++) {
                  c.enqueue(enc.encode(`part${i}\n`));
                  await delay(60);
                }
                c.close();
              },
            }),
          );
        case "/hang":
          await delay(5000, AbortSignal.any([req.signal, hanging.signal])).catch(() => {});
          return new Response("late");
        case "/huge": {
          const chunk = new Uint8Array(64 * 1024).fill(120);
          const total = Number(url.searchParams.get("mib") ?? 64) * 1024 * 1024;
          return new Response(
            new ReadableStream({
              pull(c) {
                if (produced >= total) return c.close();
                produced += chunk.length;
                c.enqueue(chunk);
              },
            }, { highWaterMark: 0 }),
          );
        }
        default:
          return new Response("root");
      }
    },
  );
  const addr = server.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${addr.port}`,
    produced: () => produced,
    async close() {
      hanging.abort();
      ac.abort();
      await server.finished;
    },
  };
}

/** A raw socket server that answers `response` and records the request bytes. */
function rawServer(response: string): { url: string; requests: string[]; close(): Promise<void> } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const requests: string[] = [];
  const loop = (async () => {
    for await (const conn of listener) {
      const buf = new Uint8Array(65536);
      const n = await conn.read(buf);
      requests.push(dec.decode(buf.subarray(0, n ?? 0)));
      await conn.write(enc.encode(response)).catch(() => {});
      conn.close();
    }
  })();
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    requests,
    async close() {
      listener.close();
      await loop.catch(() => {});
    },
  };
}

async function withHttp(
  fn: (c: WireClient, up: Upstream) => Promise<void>,
  env?: Record<string, string>,
) {
  const up = upstream();
  for (const [k, v] of Object.entries(env ?? {})) Deno.env.set(k, v);
  await using s = inProcessStdio({ httpBodyLimitBytes: 4 * 1024 * 1024 });
  try {
    await s.client.initialize();
    await fn(s.client, up);
  } finally {
    for (const k of Object.keys(env ?? {})) Deno.env.delete(k);
    await up.close();
  }
}

const body = (r: Msg) => dec.decode(Uint8Array.fromBase64(r.bodyBase64));

Deno.test("http/request: GET, POST with body and ordered headers, env-var headers, 404, HEAD", async () => {
  await withHttp(async (c, up) => {
    const get = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/echo?q=1`,
      requestId: "r1",
    });
    assertEquals(get.status, 200);
    assertEquals(JSON.parse(body(get)).query, "?q=1");
    assert(get.headers.every((h: Msg) => h.name === h.name.toLowerCase()));
    const post = await c.request("http/request", {
      method: "POST",
      url: `${up.url}/echo`,
      requestId: "r2",
      headers: [
        { name: "X-Rep", value: "1" },
        { name: "X-Rep", value: "2" },
        { name: "Authorization", value: "Bearer ", valueEnvVar: "HTTP_TEST_TOKEN" },
      ],
      bodyBase64: btoa("payload"),
    });
    const echoed = JSON.parse(body(post));
    assertEquals([echoed.method, echoed.body], ["POST", "payload"]);
    const headers = new Map(echoed.headers as [string, string][]);
    assertEquals(headers.get("x-rep"), "1, 2");
    assertEquals(headers.get("authorization"), "Bearer s3cr3t");
    assert(!headers.has("user-agent"), "no user-agent is added");
    assertEquals(headers.get("accept"), "*/*");
    const missing = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/missing`,
      requestId: "r3",
    });
    assertEquals([missing.status, body(missing)], [404, "nope"]);
    const head = await c.request("http/request", {
      method: "HEAD",
      url: `${up.url}/echo`,
      requestId: "r4",
    });
    assertEquals([head.status, head.bodyBase64], [200, ""]);
    const multi = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/multi`,
      requestId: "r5",
    });
    assertEquals(
      multi.headers.filter((h: Msg) => h.name === "set-cookie").map((h: Msg) => h.value),
      ["c=1", "d=2"],
    );
  }, { HTTP_TEST_TOKEN: "s3cr3t" });
});

Deno.test("http/request: the method and headers go out exactly as given; response headers keep order and repeats", async () => {
  const raw = rawServer(
    "HTTP/1.1 200 OK\r\nZ-Last: 1\r\nA-First: 1\r\nX-Rep: a\r\nX-Rep: b\r\nContent-Length: 2\r\n\r\nok",
  );
  await using s = inProcessStdio();
  try {
    await s.client.initialize();
    const r = await s.client.request("http/request", {
      method: "get",
      url: `${raw.url}/path?x=1`,
      requestId: "raw",
      headers: [{ name: "B", value: "b" }, { name: "A", value: "a" }, { name: "A", value: "a2" }],
    });
    assertEquals(r.headers, [
      { name: "z-last", value: "1" },
      { name: "a-first", value: "1" },
      { name: "x-rep", value: "a" },
      { name: "x-rep", value: "b" },
      { name: "content-length", value: "2" },
    ]);
    const sent = raw.requests[0]!;
    assert(sent.startsWith("get /path?x=1 HTTP/1.1\r\n"), sent);
    assertStringIncludes(sent, "B: b\r\nA: a\r\nA: a2\r\n");
  } finally {
    await raw.close();
  }
});

Deno.test("http/request: redirects follow (with referer) or stop; 303 after POST becomes GET", async () => {
  await withHttp(async (c, up) => {
    const stopped = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/redirect`,
      requestId: "a",
      redirectPolicy: "stop",
    });
    assertEquals(stopped.status, 302);
    assertEquals(
      stopped.headers.find((h: Msg) => h.name === "location").value,
      "/echo?redirected=1",
    );
    const followed = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/redirect`,
      requestId: "b",
    });
    const echoed = JSON.parse(body(followed));
    assertEquals(echoed.query, "?redirected=1");
    assertEquals(
      new Map(echoed.headers as [string, string][]).get("referer"),
      `${up.url}/redirect`,
    );
    const posted = await c.request("http/request", {
      method: "POST",
      url: `${up.url}/post-redirect`,
      requestId: "c",
      bodyBase64: btoa("x"),
    });
    const after = JSON.parse(body(posted));
    assertEquals([after.method, after.body, after.query], ["GET", "", "?after=post"]);
  });
});

Deno.test("http/request: validation errors are -32602, transport failures -32603", async () => {
  await withHttp(async (c, up) => {
    const e = async (params: Msg) =>
      (await c.call("http/request", {
        requestId: "x",
        method: "GET",
        url: `${up.url}/`,
        ...params,
      })).error;
    assertEquals(await e({ url: "ftp://127.0.0.1/" }), {
      code: -32602,
      message: "http/request only supports http and https URLs, got ftp",
    });
    assertEquals(await e({ url: "/relative" }), {
      code: -32602,
      message: "http/request url is invalid: relative URL without a base",
    });
    assertEquals(await e({ method: "BAD METHOD" }), {
      code: -32602,
      message: "http/request method is invalid: invalid HTTP method",
    });
    assertEquals(await e({ headers: [{ name: "bad name", value: "v" }] }), {
      code: -32602,
      message: "http/request header name is invalid: invalid HTTP header name",
    });
    assertEquals(
      await e({ headers: [{ name: "X-T", value: "Bearer ", valueEnvVar: "UNSET_VAR_FOR_TEST" }] }),
      {
        code: -32602,
        message:
          "http/request header X-T requires executor environment variable UNSET_VAR_FOR_TEST",
      },
    );
    const refused = await e({ url: "http://127.0.0.1:1/" });
    assertEquals(refused.code, -32603);
    assert(
      refused.message.startsWith(
        "http/request failed: error sending request for url (http://127.0.0.1:1/)",
      ),
      refused.message,
    );
    const t0 = performance.now();
    const timeout = await e({ url: `${up.url}/hang`, timeoutMs: 200 });
    assertEquals(timeout.code, -32603);
    assertStringIncludes(timeout.message, "timed out");
    assert(performance.now() - t0 < 2000);
    const capped = await e({ url: `${up.url}/huge?mib=8` });
    assertEquals(capped.code, -32603);
    assertStringIncludes(
      capped.message,
      "exceeds the buffered limit of 4194304 bytes; use streamResponse: true",
    );
  });
});

Deno.test("http/request: truncated bodies fail buffered and end a stream with an error", async () => {
  const raw = rawServer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part");
  await using s = inProcessStdio();
  try {
    const c = s.client;
    await c.initialize();
    const buffered = await c.call("http/request", {
      method: "GET",
      url: `${raw.url}/`,
      requestId: "b3",
    });
    assertEquals(buffered.error, {
      code: -32603,
      message: "failed to read http/request response body: error decoding response body",
    });
    const streamed = await c.request("http/request", {
      method: "GET",
      url: `${raw.url}/`,
      requestId: "s3",
      streamResponse: true,
    });
    assertEquals([streamed.status, streamed.bodyBase64], [200, ""]);
    const first = await c.notification("http/request/bodyDelta", (p) => p.requestId === "s3");
    assertEquals([first.params.seq, atob(first.params.deltaBase64), first.params.done], [
      1,
      "only part",
      false,
    ]);
    const last = await c.notification(
      "http/request/bodyDelta",
      (p) => p.requestId === "s3" && p.done,
    );
    assertEquals(last.params, {
      requestId: "s3",
      seq: 2,
      deltaBase64: "",
      done: true,
      error: "error decoding response body",
    });
  } finally {
    await raw.close();
  }
});

Deno.test("http/request streamResponse: deltas follow the response in order; ids are unique while active", async () => {
  await withHttp(async (c, up) => {
    const started = c.request("http/request", {
      method: "GET",
      url: `${up.url}/slow`,
      requestId: "s1",
      streamResponse: true,
    });
    const dup = await c.call("http/request", {
      method: "GET",
      url: `${up.url}/slow`,
      requestId: "s1",
      streamResponse: true,
    });
    const result = await started;
    assertEquals([result.status, result.bodyBase64], [200, ""]);
    assertEquals(dup.error, {
      code: -32602,
      message: "http/request streamResponse requestId `s1` is already active",
    });
    const done = await c.notification(
      "http/request/bodyDelta",
      (p) => p.requestId === "s1" && p.done,
      5000,
    );
    const deltas = c.received.filter((m) =>
      m.method === "http/request/bodyDelta" && m.params.requestId === "s1"
    );
    const all = [...deltas.map((d) => d.params), done.params];
    assertEquals(all.map((p) => p.seq), all.map((_, i) => i + 1));
    assertEquals(
      all.map((p) => atob(p.deltaBase64)).join(""),
      "part0\npart1\npart2\npart3\npart4\n",
    );
    assertEquals([done.params.error, done.params.done], [null, true]);
    // The response arrived before the first delta.
    const responseAt = c.arrivals.findIndex((m) =>
      m.result?.status === 200 && m.result?.bodyBase64 === ""
    );
    const firstDeltaAt = c.arrivals.findIndex((m) => m.method === "http/request/bodyDelta");
    assert(
      responseAt !== -1 && responseAt < firstDeltaAt,
      `response at ${responseAt}, first delta at ${firstDeltaAt}`,
    );
    // The id is free again once the stream ended.
    const again = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/slow`,
      requestId: "s1",
      streamResponse: true,
    });
    assertEquals(again.status, 200);
    await c.notification("http/request/bodyDelta", (p) => p.requestId === "s1" && p.done, 5000);
  });
});

Deno.test("http/request streamResponse: a client that stops reading slows the upstream", async () => {
  await withHttp(async (c, up) => {
    const r = await c.request("http/request", {
      method: "GET",
      url: `${up.url}/huge?mib=256`,
      requestId: "big",
      streamResponse: true,
    });
    assertEquals(r.status, 200);
    c.pause();
    await delay(1500);
    const whilePaused = up.produced();
    assert(
      whilePaused < 48 * 1024 * 1024,
      `upstream produced ${whilePaused} bytes for a paused client`,
    );
    c.resume();
    let total = 0;
    let seq = 0;
    for (;;) {
      const d = await c.notification(
        "http/request/bodyDelta",
        (p) => p.requestId === "big",
        30_000,
      );
      assertEquals(d.params.seq, ++seq);
      total += Uint8Array.fromBase64(d.params.deltaBase64).length;
      if (d.params.done) {
        assertEquals(d.params.error, null);
        break;
      }
    }
    assertEquals(total, 256 * 1024 * 1024);
    assert(await eventually(() => up.produced() >= 256 * 1024 * 1024));
  });
});
