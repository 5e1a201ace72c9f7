// The client through outages: a connection cut (the session survives) and a
// server killed and restarted (the session is gone), against our server and
// the reference; the error classes a harness branches on.

import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { connect, connectLazy, type ReconnectEvent } from "../../src/client/client.ts";
import {
  CallTimeoutError,
  ClientClosedError,
  ConnectTimeoutError,
  DisconnectedError,
  EnvironmentNotReadyError,
  InitializeTimeoutError,
  RpcError,
  SessionLostError,
} from "../../src/client/errors.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { CLI, eventually, freePort, waitFor } from "../helpers/wire_client.ts";
import { runCli } from "../helpers/cli.ts";
import { tcpRelay } from "../helpers/tcp_relay.ts";
import { serverKinds, startWsServer } from "../helpers/ws_server.ts";
import { BodyStreams, UNCONTROLLED_BODY_LIMIT } from "../../src/client/fetch.ts";
import { ProcessDetachedError } from "../../src/client/process.ts";

/** Our server or the reference as a process on a fixed port (so it can come back there). */
async function serverProcess(kind: "ours" | "reference", port: number) {
  const listen = `ws://127.0.0.1:${port}`;
  const child = kind === "ours"
    ? new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "serve", "--listen", listen, "--log-level", "error"],
      stdout: "null",
      stderr: "null",
      stdin: "null",
    }).spawn()
    : new Deno.Command(referenceBin()!, {
      args: ["exec-server", "--listen", listen],
      env: { CODEX_HOME: referenceHome() },
      stdout: "null",
      stderr: "null",
      stdin: "null",
    }).spawn();
  // Ready when it accepts.
  const up = await eventually(async () => {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return true;
    } catch {
      return false;
    }
  });
  assert(up, `${kind} server did not listen on ${port}`);
  return {
    url: listen,
    async kill() {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
    },
  };
}

Deno.test("client resilience: a cut connection — calls fail promptly, the next call after resumes the session, processes keep streaming", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  // An outage between client and server: the relay is cut, then restored.
  const serverPort = Number(new URL(listener.url).port);
  await using proxy = tcpRelay(() => [serverPort]);
  const events: ReconnectEvent[] = [];
  const client = await connect({
    url: `ws://127.0.0.1:${proxy.port}`,
    // Few, quick background attempts: the outage outlasts them.
    reconnect: { initialDelayMs: 20, maxDelayMs: 50, maxAttempts: 2 },
    connectTimeoutMs: 2000,
    onReconnect: (e) => events.push(e),
  });
  try {
    const session = client.sessionId;
    const p = await client.spawn(["sh", "-c", "echo before; read x; echo after $x"], {
      stdin: "piped",
    });
    const reader = p.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assertEquals((await reader.read()).value, "before\n");
    proxy.cut();
    // Every call during the outage fails at once with the class to branch on.
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const error = await assertRejects(
        () => client.request("environment/status"),
        DisconnectedError,
      );
      assert(performance.now() - t0 < 5000, `call ${i} took ${performance.now() - t0} ms`);
      // The first may still go out on the dying connection and lose its answer.
      if (i > 0) assert(error.message.startsWith("disconnected from"), error.message);
    }
    // A read answers like the reference's client: closed, with the reason.
    const read = await client.request("process/read", { processId: p.processId, afterSeq: 0 });
    assertEquals([read.closed, typeof read.failure], [true, "string"]);
    // Let the background attempts run out; the client is not closed for good.
    await new Promise((r) => setTimeout(r, 400));
    proxy.restore();
    await client.request("environment/status");
    assertEquals(client.sessionId, session);
    assertEquals(events, [{ kind: "resumed", sessionId: session!, previousSessionId: session }]);
    // The process survived and its output still arrives.
    const writer = p.stdin.getWriter();
    await writer.write(new TextEncoder().encode("ok\n"));
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += value;
    }
    assertEquals(rest, "after ok\n");
    assertEquals((await p.status).code, 0);
  } finally {
    await client.close();
    await listener.close();
    await server.close();
  }
});

for (const kind of serverKinds()) {
  Deno.test(`client resilience (${kind}): a server killed and restarted — a fresh session, its processes fail with SessionLostError`, async () => {
    const port = freePort();
    let server = await serverProcess(kind, port);
    const events: ReconnectEvent[] = [];
    const client = await connect({
      url: server.url,
      reconnect: { initialDelayMs: 20, maxDelayMs: 50, maxAttempts: 2 },
      connectTimeoutMs: 2000,
      onReconnect: (e) => events.push(e),
    });
    try {
      const first = client.sessionId!;
      const p = await client.spawn(["sleep", "60"]);
      await server.kill();
      await assertRejects(() => client.request("environment/status"), DisconnectedError);
      server = await serverProcess(kind, port);
      await client.request("environment/status");
      assert(client.sessionId !== null && client.sessionId !== first);
      assertEquals(events.length, 1);
      assertEquals(events[0]!.kind, "fresh");
      assertEquals(events[0]!.previousSessionId, first);
      const lost = await assertRejects(() => p.status, SessionLostError);
      assertEquals(lost.sessionId, first);
      // A polling read of the lost process ends cleanly, saying why.
      const read = await client.request("process/read", { processId: p.processId, afterSeq: 0 });
      assertEquals([read.exited, read.closed, read.chunks], [true, true, []]);
      assert(typeof read.failure === "string" && read.failure !== "", JSON.stringify(read));
      // The new session works.
      const out = await client.command("sh", { args: ["-c", "echo back"] }).output();
      assertEquals(new TextDecoder().decode(out.stdout), "back\n");
    } finally {
      await client.close();
      await server.kill();
    }
  });
}

Deno.test("client errors: connect and initialize timeouts, call timeouts and closed clients each have their class", async () => {
  // Accepts TCP and never answers the WebSocket upgrade.
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of silent) held.push(c);
  })();
  try {
    const url = `ws://127.0.0.1:${(silent.addr as Deno.NetAddr).port}`;
    const timeout = await assertRejects(
      () => connect({ url, connectTimeoutMs: 200, reconnect: false }),
      ConnectTimeoutError,
    );
    assertEquals(timeout.timeoutMs, 200);
  } finally {
    silent.close();
    for (const c of held) c.close();
    await accepting.catch(() => {});
  }
  // A server that never answers initialize: a custom transport over a stream pair.
  const mute = await assertRejects(
    () =>
      connect({
        initializeTimeoutMs: 200,
        transport: () => {
          const { readable } = new TransformStream();
          const sink = new WritableStream();
          return Promise.resolve({
            connection: {
              readable: readable as ReadableStream<never>,
              writable: sink,
              closed: new Promise(() => {}),
              close() {},
            } as never,
            label: "mute",
            close: () => Promise.resolve(),
          });
        },
      }),
    InitializeTimeoutError,
  );
  assertEquals(mute.target, "mute");

  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  const client = await connect({ url: listener.url });
  try {
    const p = await client.spawn(["sleep", "30"]);
    const slow = await assertRejects(
      () =>
        client.call("process/read", { processId: p.processId, afterSeq: 0, waitMs: 5000 }, {
          timeoutMs: 100,
        }),
      CallTimeoutError,
    );
    assertEquals([slow.method, slow.timeoutMs], ["process/read", 100]);
    const rpc = await assertRejects(() => client.call("no/such/method"), RpcError);
    assertEquals(rpc.code, -32601);
    await p.terminate();
  } finally {
    await client.close();
    await listener.close();
    await server.close();
  }
  await assertRejects(() => client.request("environment/status"), ClientClosedError);
});

// ---------------------------------------------------------------------------
// Streamed fetch bodies: a body nobody reads holds only itself.

/** An upstream whose body is generated as it is read (counts what was produced). */
function lazyUpstream(totalBytes: number) {
  const stats = { produced: 0, cancelled: false };
  const chunk = new Uint8Array(1024 * 1024).fill(120);
  const http = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    let sent = 0;
    return new Response(
      new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= totalBytes) {
            controller.close();
            return;
          }
          const n = Math.min(chunk.length, totalBytes - sent);
          sent += n;
          stats.produced += n;
          controller.enqueue(chunk.subarray(0, n));
        },
        cancel() {
          stats.cancelled = true;
        },
      }, { highWaterMark: 0 }),
    );
  });
  return {
    url: `http://127.0.0.1:${http.addr.port}/`,
    stats,
    async [Symbol.asyncDispose]() {
      await http.shutdown();
    },
  };
}

async function drainProcess(client: Awaited<ReturnType<typeof connect>>, bytes: number) {
  const p = await client.spawn(["head", "-c", String(bytes), "/dev/zero"]);
  let got = 0;
  for await (const c of p.stdout) got += c.length;
  assertEquals((await p.status).code, 0);
  return got;
}

for (const kind of serverKinds()) {
  Deno.test(`client fetch (${kind}): an unread body never stalls the connection`, async () => {
    const ours = kind === "ours";
    // Ours holds the body on the server; the reference pushes it all, so it
    // gets a smaller one (the client fails it past its limit).
    await using upstream = lazyUpstream(ours ? 1024 * 1024 * 1024 : 160 * 1024 * 1024);
    await using server = await startWsServer(kind);
    const client = await connect({ url: server.url });
    try {
      assertEquals(client.supports("httpBodyFlowControl"), ours);
      const response = await client.fetch(upstream.url);
      assertEquals(response.status, 200);
      // Nobody reads `response.body`; another stream on the connection completes.
      assertEquals(await drainProcess(client, 100 * 1024 * 1024), 100 * 1024 * 1024);
      if (ours) {
        // The server stopped reading the upstream: a few MiB in flight, not 1 GiB.
        assert(upstream.stats.produced < 64 * 1024 * 1024, `${upstream.stats.produced} produced`);
        // Read a little: the body resumes.
        const reader = response.body!.getReader();
        let got = 0;
        while (got < 32 * 1024 * 1024) got += (await reader.read()).value!.length;
        await reader.cancel();
        assert(await eventually(() => upstream.stats.cancelled), "the upstream was not cancelled");
      } else {
        // Whatever arrived while nobody read was buffered (up to the limit
        // checked below), not pushed back onto the connection.
        await response.body!.cancel();
      }
      // The connection is healthy.
      assertEquals((await client.run("echo fine")).stdout, "fine\n");
    } finally {
      await client.close();
    }
  });
}

Deno.test("client fetch: a Response dropped unread is cancelled on the server when collected", async () => {
  await using upstream = lazyUpstream(1024 * 1024 * 1024);
  await using server = await startWsServer("ours");
  const script = `
    import { connect } from ${
    JSON.stringify(new URL("../../src/client/client.ts", import.meta.url).href)
  };
    const client = await connect({ url: Deno.args[0] });
    await (async () => { await client.fetch(Deno.args[1]); })();
    console.log("dropped");
    for (let i = 0; i < 600; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 50)); }
    await client.close();
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", "-", server.url, upstream.url],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(script));
  await w.close();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("dropped")) out += (await lines.read()).value ?? "";
  try {
    assert(
      await eventually(() => upstream.stats.cancelled),
      "not cancelled while the client lived",
    );
    // Cancelled while the client is still connected (not by its exit).
    assertEquals(
      await Promise.race([child.status.then(() => "exited"), Promise.resolve("alive")]),
      "alive",
    );
  } finally {
    child.kill("SIGKILL");
    await child.status;
    await lines.cancel();
  }
});

Deno.test("client fetch: without server flow control, a body more than the limit behind fails alone, saying why", async () => {
  const bodies = new BodyStreams();
  const stream = bodies.register("r1", { flow: null });
  const other = bodies.register("r2", { flow: null });
  const mib = new Uint8Array(1024 * 1024).toBase64();
  const count = UNCONTROLLED_BODY_LIMIT / (1024 * 1024) + 2;
  for (let seq = 1; seq <= count; seq++) {
    assertEquals(
      bodies.accept({ requestId: "r1", seq, deltaBase64: mib, done: false, error: null }),
      null,
    );
  }
  bodies.accept({ requestId: "r2", seq: 1, deltaBase64: btoa("ok"), done: true, error: null });
  const error = await assertRejects(() => new Response(stream).arrayBuffer(), TypeError);
  assert(error.message.includes("no httpBodyFlowControl"), error.message);
  assertEquals(await new Response(other).text(), "ok");
});

Deno.test("client fetch: with server flow control, a body a high-water mark behind is paused, and resumed when read", async () => {
  const calls: string[] = [];
  const bodies = new BodyStreams();
  const stream = bodies.register("r", {
    highWaterMark: 4,
    flow: {
      pause: (id) => calls.push(`pause ${id}`),
      resume: (id) => calls.push(`resume ${id}`),
      cancel: (id) => calls.push(`cancel ${id}`),
    },
  });
  for (let seq = 1; seq <= 3; seq++) {
    bodies.accept({ requestId: "r", seq, deltaBase64: btoa("abc"), done: false, error: null });
  }
  assertEquals(calls, ["pause r"]);
  const reader = stream.getReader();
  for (let i = 0; i < 3; i++) await reader.read();
  assertEquals(calls, ["pause r", "resume r"]);
  await reader.cancel();
  assertEquals(calls, ["pause r", "resume r", "cancel r"]);
});

// ---------------------------------------------------------------------------
// Detach and attach

for (const kind of serverKinds()) {
  Deno.test(`client processes (${kind}): detach keeps a process running; another client of the session attaches to it`, async () => {
    await using server = await startWsServer(kind);
    const a = await connect({ url: server.url });
    const p = await a.spawn(["sh", "-c", "echo one; read x; echo two $x"], { stdin: "piped" });
    const first = p.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assertEquals((await first.read()).value, "one\n");
    first.releaseLock();
    p.detach();
    const detached = await assertRejects(() => p.status, ProcessDetachedError);
    assertEquals(detached.processId, p.processId);
    // Attach again from the same client, then let go of it once more.
    const again = await a.attach(p.processId);
    again.detach();
    const session = a.sessionId!;
    await a.close();

    const b = await connect({ url: server.url, resumeSessionId: session });
    try {
      const back = await b.attach(p.processId, { stdin: "piped" });
      const w = back.stdin.getWriter();
      await w.write(new TextEncoder().encode("ok\n"));
      let out = "";
      for await (const chunk of back.stdout.pipeThrough(new TextDecoderStream())) out += chunk;
      // Retained output from the start, then what it printed after.
      assertEquals(out, "one\ntwo ok\n");
      assertEquals((await back.status).code, 0);
    } finally {
      await b.close();
    }
  });
}

Deno.test("client: a read after the connection is gone answers exited, closed and why — a stdio server that died, a client without reconnection", async () => {
  // A stdio server, killed by the program it runs.
  const stdio = await connect({
    command: {
      program: Deno.execPath(),
      args: ["run", "-A", CLI, "serve", "--listen", "stdio", "--log-level", "error"],
    },
  });
  try {
    // It kills the server once told to (after its start was answered).
    const p = await stdio.spawn(["sh", "-c", "read x; kill -9 $PPID"], { stdin: "piped" });
    const writer = p.stdin.getWriter();
    // (The server may die before it answers the write.)
    await writer.write(new TextEncoder().encode("go\n")).catch(() => {});
    await assertRejects(() => p.status);
    const read = await stdio.request("process/read", { processId: p.processId, afterSeq: 3 });
    assertEquals([read.exited, read.closed, read.nextSeq, read.chunks], [true, true, 4, []]);
    assert(typeof read.failure === "string" && read.failure !== "", JSON.stringify(read));
  } finally {
    await stdio.close();
  }
  // A WebSocket client with reconnection off, whose server's listener closes.
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  const client = await connect({ url: listener.url, reconnect: false });
  try {
    const p = await client.spawn(["sleep", "30"]);
    await listener.close();
    const read = await waitFor(async () => {
      const r = await client.request("process/read", { processId: p.processId, afterSeq: 0 });
      return r.closed ? r : null;
    });
    assertEquals([read!.exited, read!.closed], [true, true]);
    assert(typeof read!.failure === "string" && read!.failure !== "", JSON.stringify(read));
  } finally {
    await client.close();
    await server.close();
  }
  // A client closed on purpose still says so.
  await assertRejects(
    () => client.request("process/read", { processId: "x", afterSeq: 0 }),
    ClientClosedError,
  );
});

Deno.test("client: an environment still booting — connect waits for readiness outside the connect timeout; a refusal fails with its reason", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const port = freePort();
  const url = `ws://127.0.0.1:${port}`;
  let listener: ReturnType<typeof listenWebSocket> | null = null;
  try {
    // Nothing listens yet; "the container" comes up, then says it is ready.
    let asked = 0;
    const booting = connect({
      url,
      connectTimeoutMs: 300,
      reconnect: false,
      ready: async () => {
        asked++;
        await new Promise((r) => setTimeout(r, 600)); // longer than the connect timeout
        listener = listenWebSocket(server, { hostname: "127.0.0.1", port });
      },
    });
    await using client = await booting;
    assertEquals(asked, 1);
    assertEquals((await client.run("echo up")).stdout, "up\n");

    // A refusal: the readiness error, by class and reason; a function is asked again.
    let tries = 0;
    const refusing = () => {
      tries++;
      return Promise.reject(new Error("container exited with 137"));
    };
    const error = await assertRejects(
      () => connect({ url, ready: refusing, reconnect: false }),
      EnvironmentNotReadyError,
    );
    assertStringIncludes(error.message, "did not become ready: container exited with 137");
    assertEquals(tries, 1);
    const lazy = connectLazy({ url, ready: refusing, reconnect: false });
    await assertRejects(() => lazy.request("environment/status"), EnvironmentNotReadyError);
    await assertRejects(() => lazy.request("environment/status"), EnvironmentNotReadyError);
    assertEquals(tries, 3);
    await lazy.close();
  } finally {
    await (listener as ReturnType<typeof listenWebSocket> | null)?.close();
    await server.close();
  }
});

Deno.test("cli --wait-ready: a URL polled until 2xx, a command that must exit 0", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  let health = 0;
  const probe = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(null, { status: ++health < 3 ? 503 : 200 }),
  );
  const run = (...args: string[]) => runCli(["exec", "--url", listener.url, ...args]);
  try {
    const polled = await run(
      "--wait-ready",
      `http://127.0.0.1:${probe.addr.port}/health`,
      "--",
      "echo",
      "ok",
    );
    assertEquals([polled.code, polled.stdout], [0, "ok\n"], polled.stderr);
    assert(health >= 3, String(health));
    const refused = await run(
      "--wait-ready",
      "sh -c 'echo booting failed >&2; exit 3'",
      "--",
      "true",
    );
    assertEquals(refused.code, 1);
    assertStringIncludes(refused.stderr, "did not become ready");
    assertStringIncludes(refused.stderr, "exited with 3: booting failed");
  } finally {
    await probe.shutdown();
    await listener.close();
    await server.close();
  }
});
