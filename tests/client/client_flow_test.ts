// The client library under a reader that stops reading, duplicate process
// ids, servers that misbehave at the end (a grandchild holding their stderr)
// or at the start (a reply that is not JSON), and closing over WebSocket.
// Each of these froze, lost a process or hung before.

import { connect } from "../../src/client/client.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { inProcessTransport } from "../../src/client/in_process.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { assert, assertEquals, assertRejects } from "../helpers/assert.ts";
import { clientTargets } from "../helpers/reference.ts";
import { CLI, eventually, memoryLogger } from "../helpers/wire_client.ts";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** Host pids whose command line is `sleep <seconds>`. */
function sleepers(seconds: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const [program, arg] = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).split("\0");
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (program?.endsWith("sleep") && arg === seconds && state !== "Z") {
        found.push(Number(entry.name));
      }
    } catch { /* gone */ }
  }
  return found;
}

for (const [name, options] of clientTargets()) {
  Deno.test(`client (${name}): one unread stream delays no other process and no answer`, async () => {
    await using client = await connect(options);
    const noisy = await client.spawn(["head", "-c", String(40 * 1024 * 1024), "/dev/zero"]);
    // Let it fill its buffer: nobody reads it.
    await new Promise((r) => setTimeout(r, 300));
    const started = performance.now();
    const out = await client.command("echo", { args: ["hi"] }).output();
    assertEquals(text(out.stdout), "hi\n");
    const info = await client.request("environment/info");
    assert(info);
    // Without per-process flow control these would wait for ever (the
    // deadline only tells that hang from a busy machine).
    assert(performance.now() - started < 60_000, `took ${performance.now() - started} ms`);
    if (name === "ours") {
      // Paused, not lost: the child waits for its reader, every byte arrives.
      assert(!noisy.finished);
      let total = 0;
      for await (const chunk of noisy.stdout) total += chunk.length;
      assertEquals(total, 40 * 1024 * 1024);
      assertEquals((await noisy.status).code, 0);
    } else {
      // The reference cannot pause one process: the client stops buffering
      // it instead; terminating it still answers at once.
      await noisy.terminate();
      await noisy.stdout.cancel();
    }
  });

  Deno.test(`client (${name}): a duplicate processId is refused locally; the first keeps running`, async () => {
    await using client = await connect(options);
    const first = await client.spawn(["sh", "-c", "read x; echo first:$x"], {
      processId: "dup",
      stdin: "piped",
    });
    await assertRejects(
      () => client.spawn(["echo", "second"], { processId: "dup" }),
      Error,
      "process dup already exists",
    );
    const writer = first.stdin.getWriter();
    await writer.write(new TextEncoder().encode("ok\n"));
    await writer.close();
    const out = await first.output();
    assertEquals([out.code, text(out.stdout)], [0, "first:ok\n"]);
  });
}

Deno.test("client: close() ends a stdio server's whole group, even a grandchild holding its stderr", async () => {
  const client = await connect({
    command: {
      program: "sh",
      args: [
        "-c",
        `sleep 31341 >&2 & exec "$0" run -A "$1" serve --listen stdio --log-level error`,
        Deno.execPath(),
        CLI,
      ],
    },
    stopTimings: { eofGraceMs: 2000, termGraceMs: 500 },
  });
  assert(await eventually(() => sleepers("31341").length === 1), "the grandchild runs");
  const started = performance.now();
  await client.close();
  // A close that waited for the grandchild's stderr would wait for ever.
  assert(performance.now() - started < 60_000, `close took ${performance.now() - started} ms`);
  assert(await eventually(() => sleepers("31341").length === 0), "the grandchild outlived close");
});

Deno.test("client: a reply that is not JSON fails the connection at once and stops the server", async () => {
  const started = performance.now();
  await assertRejects(
    () =>
      connect({
        command: { program: "sh", args: ["-c", "read line; echo not json; exec sleep 31342"] },
        stopTimings: { eofGraceMs: 100, termGraceMs: 100 },
        initializeTimeoutMs: 300_000,
      }),
    Error,
    "malformed message",
  );
  // At once, not at the initialize timeout.
  assert(performance.now() - started < 60_000, `took ${performance.now() - started} ms`);
  assert(await eventually(() => sleepers("31342").length === 0), "the server was not stopped");
});

Deno.test("client: over WebSocket, close() is quick and a late answer is no warning", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  const { logger, lines } = memoryLogger("debug");
  try {
    for (let i = 0; i < 3; i++) {
      const client = await connect({ url: listener.url, logger });
      const out = await client.command("sh", { args: ["-c", "echo hi; echo err >&2"] }).output();
      assertEquals(text(out.stdout), "hi\n");
      assertEquals(
        await client.fs.readTextFile("/etc/hostname"),
        Deno.readTextFileSync("/etc/hostname"),
      );
      const started = performance.now();
      await client.close();
      assert(performance.now() - started < 1000, `close took ${performance.now() - started} ms`);
    }
    const warnings = lines.filter((l) => JSON.parse(l).level === "warn");
    assertEquals(warnings, []);
  } finally {
    await listener.close();
    await server.close();
  }
});

Deno.test("client: a restarted server replaces the lost session; its processes fail with the reason", async () => {
  let server = new ExecServer({ logger: nullLogger });
  let listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  const port = Number(new URL(listener.url).port);
  const client = await connect({
    url: listener.url,
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
  });
  try {
    const first = client.sessionId;
    const long = await client.spawn(["sleep", "31343"]);
    await listener.close();
    await server.close(); // its processes die with it
    server = new ExecServer({ logger: nullLogger });
    listener = listenWebSocket(server, { hostname: "127.0.0.1", port });
    const failed = await long.status.then(() => "exited", (e) => (e as Error).message);
    assert(failed.includes(`session ${first} was lost`), failed);
    const out = await client.command("echo", { args: ["again"] }).output();
    assertEquals(text(out.stdout), "again\n");
    assert(client.sessionId !== null && client.sessionId !== first);
  } finally {
    await client.close();
    await listener.close();
    await server.close();
  }
});

Deno.test("client: resumeSessionId and attach pick up a process another client started", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  try {
    const a = await connect({ url: listener.url });
    const started = await a.spawn(
      ["sh", "-c", "echo one; read x; echo two:$x"],
      { processId: "keep", stdin: "piped" },
    );
    assertEquals(started.processId, "keep");
    const sessionId = a.sessionId!;
    await a.close(); // detaches the session; the process keeps running
    await assertRejects(
      () => connect({ url: listener.url, resumeSessionId: "no-such-session" }),
      Error,
      "unknown session id",
    );
    const b = await connect({ url: listener.url, resumeSessionId: sessionId });
    try {
      assertEquals(b.sessionId, sessionId);
      const again = await b.attach("keep", { stdin: "piped" });
      const writer = again.stdin.getWriter();
      await writer.write(new TextEncoder().encode("b\n"));
      await writer.close();
      const out = await again.output();
      assertEquals([out.code, text(out.stdout)], [0, "one\ntwo:b\n"]);
      await assertRejects(() => b.attach("nope"), Error);
    } finally {
      await b.close();
    }
  } finally {
    await listener.close();
    await server.close();
  }
});

Deno.test("client: Deno-shaped conveniences — run(), Deno.Signal names, AbortSignal and timeout, inProcessTransport(server)", async () => {
  await using server = new ExecServer();
  await using client = await connect({ transport: inProcessTransport(server) });
  const listed = await client.run("printf 'a\\nb\\n' | wc -l; echo oops >&2; exit 3");
  assertEquals(listed, { code: 3, success: false, stdout: "2\n", stderr: "oops\n" });
  // A Deno.Signal name reaches the program's trap.
  const trapped = await client.spawn([
    "sh",
    "-c",
    "trap 'echo got-term; exit 9' TERM; echo ready; while :; do sleep 0.05; done",
  ]);
  const reader = trapped.stdout.getReader();
  assertEquals(text((await reader.read()).value!), "ready\n");
  await trapped.kill("SIGTERM");
  assertEquals(text((await reader.read()).value!), "got-term\n");
  reader.releaseLock();
  assertEquals((await trapped.status).code, 9);
  // AbortSignal and timeoutMs terminate the process.
  const abort = new AbortController();
  const aborted = await client.spawn(["sleep", "31345"], { signal: abort.signal });
  abort.abort();
  assertEquals((await aborted.status).code, 137);
  const timed = await client.command("sleep", { args: ["31346"], timeoutMs: 100 }).output();
  assertEquals(timed.code, 137);
  await assertRejects(
    () => client.spawn(["true"], { signal: AbortSignal.abort() }),
    Error,
  );
});
