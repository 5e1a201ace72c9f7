import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { eventually, isDead, memoryLogger } from "../helpers/wire_client.ts";
import { connect, type ConnectOptions, ExecServerClient } from "../../src/client/client.ts";
import type { RemoteProcessEvent } from "../../src/client/process.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { connectWebSocket } from "../../src/websocket/handshake.ts";
import { webSocketConnection } from "../../src/jsonrpc/websocket_adapter.ts";
import type { WebSocketChannel } from "../../src/websocket/channel.ts";
import { ConnectionClosedError } from "../../src/jsonrpc/errors.ts";
import { delay } from "../../src/util/async.ts";

const FAKE = new URL("../fixtures/fake_server.ts", import.meta.url).pathname;
import { clientTargets } from "../helpers/reference.ts";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

const targets = clientTargets();
const ours: ConnectOptions = targets[0]![1];

for (const [name, options] of targets) {
  Deno.test(`client (${name}): command output, exit codes, stdin, signals`, async () => {
    await using client = await connect(options);
    assert(client.sessionId);
    const out = await client.command("sh", { args: ["-c", "echo hello; echo err >&2; exit 3"] })
      .output();
    assertEquals([out.code, out.success, text(out.stdout), text(out.stderr)], [
      3,
      false,
      "hello\n",
      "err\n",
    ]);
    const cat = await client.spawn(["cat"], { stdin: "piped" });
    const writer = cat.stdin.getWriter();
    await writer.write(new TextEncoder().encode("line 1\n"));
    const reader = cat.stdout.getReader();
    assertEquals(text((await reader.read()).value!), "line 1\n");
    reader.releaseLock();
    if (client.supports("closeStdin")) {
      await writer.close();
      assertEquals((await cat.status).code, 0, "EOF reached cat");
    } else {
      assertEquals(await cat.terminate(), true);
      assertEquals((await cat.status).code, 137);
    }
    const sleeper = await client.spawn(["sleep", "30"]);
    await delay(50);
    await sleeper.signal("interrupt");
    assertEquals((await sleeper.status).code, 130);
  });

  Deno.test(`client (${name}): files up to large sizes, both ways, byte-exact`, async () => {
    await using client = await connect(options);
    const dir = await Deno.realPath(await Deno.makeTempDir());
    try {
      await client.fs.writeTextFile(`${dir}/small.txt`, "small");
      assertEquals(await client.fs.readTextFile(`${dir}/small.txt`), "small");
      assertEquals((await client.fs.stat(`${dir}/small.txt`)).size, 5);
      // Above the whole-file threshold: streamed through handles.
      const big = new Uint8Array(40 * 1024 * 1024 + 17);
      for (let i = 0; i < big.length; i += 65536) {
        crypto.getRandomValues(big.subarray(i, Math.min(big.length, i + 65536)));
      }
      await client.fs.writeFile(new URL(`file://${dir}/big.bin`), big);
      assertEquals(new Uint8Array(await Deno.readFile(`${dir}/big.bin`)), big);
      assertEquals(await client.fs.readFile(`${dir}/big.bin`), big);
      await client.fs.mkdir(`${dir}/a/b`, { recursive: true });
      await client.fs.copy(`${dir}/small.txt`, `${dir}/a/b/copy.txt`);
      assertEquals(
        (await client.fs.readDirectory(`${dir}/a/b`)).map((e) => e.fileName),
        ["copy.txt"],
      );
      assertEquals(await client.fs.realPath(`${dir}/a/../small.txt`), `file://${dir}/small.txt`);
      const walked = await client.fs.walk(dir);
      assert(walked.entries.some((e) => e.path.endsWith("/a/b/copy.txt")));
      // The Deno-shaped surface: readDir, stat/lstat, exists, rename, Deno.errors.
      await Deno.symlink(`${dir}/small.txt`, `${dir}/a/b/link`);
      await Deno.symlink(`${dir}/gone`, `${dir}/a/b/dangling`);
      const listed = [];
      for await (const e of client.fs.readDir(`${dir}/a/b`)) listed.push(e);
      listed.sort((x, y) => x.name.localeCompare(y.name));
      assertEquals(listed, [
        { name: "copy.txt", isFile: true, isDirectory: false, isSymlink: false },
        { name: "link", isFile: false, isDirectory: false, isSymlink: true },
      ]);
      const info = await client.fs.stat(`${dir}/a/b/link`);
      assertEquals([info.isFile, info.isSymlink, info.size], [true, false, 5]);
      assert(info.mtime instanceof Date);
      assertEquals((await client.fs.lstat(`${dir}/a/b/link`)).isSymlink, true);
      assertEquals((await client.fs.lstat(`${dir}/a/b/dangling`)).isSymlink, true);
      assertEquals(await client.fs.exists(`${dir}/a/b/copy.txt`), true);
      assertEquals(await client.fs.exists(`${dir}/a/b/none`), false);
      await client.fs.rename(`${dir}/a/b/copy.txt`, `${dir}/moved.txt`);
      assertEquals(await Deno.readTextFile(`${dir}/moved.txt`), "small");
      const missing = await assertRejects(
        () => client.fs.readFile(`${dir}/a/b/copy.txt`),
        Deno.errors.NotFound,
      );
      assertEquals((missing as Error & { rpcCode: number }).rpcCode, -32004);
      await assertRejects(() => client.fs.mkdir(`${dir}/a`), Deno.errors.AlreadyExists);
      await client.fs.remove(`${dir}/a`, { recursive: true });
      await assertRejects(() => client.fs.stat(`${dir}/a`), Deno.errors.NotFound);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });

  Deno.test(`client (${name}): fetch streams the body and keeps status and headers`, async () => {
    const ac = new AbortController();
    const upstream = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      signal: ac.signal,
      onListen() {},
    }, (req) => {
      if (new URL(req.url).pathname === "/echo") {
        return req.text().then((t) =>
          new Response(`got ${req.method} ${t}`, { headers: { "x-reply": "1" } })
        );
      }
      return new Response(
        new ReadableStream({
          async start(c) {
            for (let i = 0; i < 4; i++) {
              c.enqueue(new TextEncoder().encode(`part${i}\n`));
              await delay(80);
            }
            c.close();
          },
        }),
        { status: 201, headers: { "x-test": "yes" } },
      );
    });
    try {
      await using client = await connect(options);
      const base = `http://127.0.0.1:${(upstream.addr as Deno.NetAddr).port}`;
      const res = await client.fetch(`${base}/stream`);
      assertEquals([res.status, res.headers.get("x-test")], [201, "yes"]);
      const reader = res.body!.getReader();
      const t0 = performance.now();
      const first = await reader.read();
      assertEquals(text(first.value!), "part0\n");
      assert(performance.now() - t0 < 200, "the first part arrived before the whole body");
      let rest = "";
      for (let r = await reader.read(); !r.done; r = await reader.read()) rest += text(r.value);
      assertEquals(rest, "part1\npart2\npart3\n");
      const posted = await client.fetch(`${base}/echo`, { method: "POST", body: "payload" });
      assertEquals([await posted.text(), posted.headers.get("x-reply")], ["got POST payload", "1"]);
    } finally {
      ac.abort();
      await upstream.finished;
    }
  });
}

Deno.test("client: events are delivered in seq order even when notifications arrive scrambled", async () => {
  await using client = await connect({
    command: { program: Deno.execPath(), args: ["run", "-A", FAKE, "scramble"] },
  });
  const p = await client.spawn(["anything"], { events: true });
  const events: RemoteProcessEvent[] = [];
  for await (const e of p.events) events.push(e);
  assertEquals(events.map((e) => "seq" in e ? e.seq : -1), [1, 2, 3, 4, 5, 6]);
  assertEquals(events.map((e) => e.kind), [
    "output",
    "output",
    "output",
    "exited",
    "output",
    "closed",
  ]);
  assertEquals((await p.status).code, 5);
  const q = await client.spawn(["again"]);
  const out = await q.output();
  assertEquals([text(out.stdout), text(out.stderr), out.code], ["one\nthree\nfour\n", "two\n", 5]);
});

Deno.test("client: a server answering initialize with garbage fails the connect and is killed", async () => {
  const err = await assertRejects(() =>
    connect({ command: { program: Deno.execPath(), args: ["run", "-A", FAKE, "garbage"] } })
  );
  assertStringIncludes(err.message, "invalid result");
});

Deno.test("client: a stubborn spawned server is SIGKILLed after the grace periods", async () => {
  const client = await connect({
    command: { program: Deno.execPath(), args: ["run", "-A", FAKE, "stubborn"] },
    stopTimings: { eofGraceMs: 200, termGraceMs: 200 },
  });
  const t0 = performance.now();
  await client.close();
  assert(performance.now() - t0 < 5000);
  await client.close(); // a second termination is a no-op
});

Deno.test("client: dropping a stdio client kills the server and its grandchild", async () => {
  const client = await connect(ours);
  const p = await client.spawn(["sh", "-c", "sleep 1000 & echo $!; wait"]);
  const reader = p.stdout.getReader();
  const grandchild = Number(text((await reader.read()).value!).trim());
  reader.releaseLock();
  assert(!isDead(grandchild));
  await client.close();
  assert(await eventually(() => isDead(grandchild)), "grandchild survived the client");
  await assertRejects(() => client.request("environment/status"), ConnectionClosedError);
});

Deno.test("client: a flood on one process does not delay another's events", async () => {
  await using client = await connect(ours);
  const flood = await client.spawn(["head", "-c", "300M", "/dev/zero"]);
  let flooded = 0;
  const draining = (async () => {
    for await (const chunk of flood.stdout) flooded += chunk.length;
  })();
  assert(await eventually(() => flooded > 1024 * 1024), "timed out waiting");
  const t0 = performance.now();
  const quick = await client.command("echo", { args: ["quick"] }).output();
  const elapsed = performance.now() - t0;
  assertEquals(text(quick.stdout), "quick\n");
  assert(elapsed < 2000, `quick process took ${elapsed} ms behind the flood`);
  await flood.terminate();
  await draining;
});

function wsServer() {
  const { logger } = memoryLogger("warn");
  const server = new ExecServer({ logger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  return {
    server,
    listener,
    async [Symbol.asyncDispose]() {
      await listener.close();
      await server.close();
    },
  };
}

Deno.test("client: a lost connection fails in-flight calls, processes and later calls with the first reason", async () => {
  await using s = wsServer();
  const client = await connect({ url: s.listener.url, reconnect: false });
  const p = await client.spawn(["sleep", "30"], { events: true });
  const poll = client.request("process/read", {
    processId: p.processId,
    afterSeq: 0,
    waitMs: 20_000,
  });
  await delay(50);
  await s.listener.close(); // drops every socket
  // The poll in flight ends as a read after the connection: over, and why.
  const read = await poll;
  assertEquals([read.exited, read.closed, read.chunks], [true, true, []]);
  assert(typeof read.failure === "string" && read.failure !== "");
  const e1 = await assertRejects(() => p.status, ConnectionClosedError);
  const events: RemoteProcessEvent[] = [];
  for await (const e of p.events) events.push(e);
  assertEquals(events.at(-1)?.kind, "failed");
  const e2 = await assertRejects(() => client.request("environment/status"), ConnectionClosedError);
  assertEquals(e2.message, e1.message, "the first reason is latched");
  await client.close();
});

Deno.test("client: reconnect resumes the session and catches up with no byte lost or repeated", async () => {
  await using s = wsServer();
  let channel: WebSocketChannel | null = null;
  let connections = 0;
  const client = await connect({
    reconnect: { initialDelayMs: 50 },
    transport: async () => {
      connections++;
      channel = await connectWebSocket(s.listener.url);
      const c = channel;
      return {
        connection: webSocketConnection(c),
        label: "test",
        close: () => Promise.resolve(c.abort()),
      };
    },
  });
  const lines = 400;
  const p = await client.spawn([
    "sh",
    "-c",
    `i=0; while [ $i -lt ${lines} ]; do echo line $i; i=$((i+1)); sleep 0.003; done`,
  ]);
  let received = "";
  const reader = p.stdout.getReader();
  while (!received.includes("line 50\n")) received += text((await reader.read()).value!);
  channel!.abort("test kills the socket mid-stream");
  for (let r = await reader.read(); !r.done; r = await reader.read()) received += text(r.value);
  assertEquals(received, Array.from({ length: lines }, (_, i) => `line ${i}\n`).join(""));
  assertEquals((await p.status).code, 0);
  assert(connections >= 2, "a reconnection happened");
  await client.close();
});

Deno.test("client: connectLazy connects on first use; WebSocket errors name the URL without its query", async () => {
  await using s = wsServer();
  const lazy = new ExecServerClient({ url: s.listener.url });
  assertEquals(lazy.sessionId, null);
  assertEquals(await lazy.request("environment/status"), { status: "ready" });
  assert(lazy.sessionId);
  await lazy.close();
  const bad = await assertRejects(() =>
    connect({ url: "ws://127.0.0.1:1/?token=secret-value", connectTimeoutMs: 2000 })
  );
  assertStringIncludes(bad.message, "ws://127.0.0.1:1/");
  assert(!bad.message.includes("secret-value"), bad.message);
});

Deno.test("client: connect takes a transport — webSocketTransport and commandTransport as the url and command shorthands", async () => {
  const { commandTransport, webSocketTransport } = await import("../../src/client/transports.ts");
  const { CLI } = await import("../helpers/wire_client.ts");
  await using s = wsServer();
  const transports = {
    ws: webSocketTransport({ url: s.listener.url }),
    command: commandTransport({
      program: Deno.execPath(),
      args: ["run", "-A", CLI, "serve", "--listen", "stdio", "--log-level", "error"],
    }),
  };
  for (const [name, transport] of Object.entries(transports)) {
    await using client = await connect({ transport, reconnect: false });
    const { stdout } = await client.command("echo", { args: [name] }).output();
    assertEquals(new TextDecoder().decode(stdout), `${name}\n`);
  }
});
