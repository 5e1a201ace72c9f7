// Remote mode end to end on 127.0.0.1: our relay (registry + rendezvous),
// our executor and our client, everything through the encrypted path.

import { relayedServer, spawnRemoteExecutor } from "../helpers/relay.ts";
import { connect } from "../../src/client/client.ts";
import { RendezvousError } from "../../src/client/rendezvous.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import { forwardingServer } from "../../src/relay/executor/forward.ts";
import { decodeRelayFrame } from "../../src/relay/wire/frame.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { referenceBin, referenceVersion } from "../helpers/reference.ts";
import { CLI, eventually, firstLine } from "../helpers/wire_client.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";

// Loaded before the tests: libcrypto (FFI) stays open for the process.
await loadNoiseCrypto();

async function setup(onForward?: (bytes: Uint8Array, direction: string) => void) {
  const relay = await startRelayServer({
    port: 0,
    logger: nullLogger,
    ...(onForward ? { onForward } : {}),
  });
  const executorToken = await relay.store.createToken("executor", "env-1");
  const harnessToken = await relay.store.createToken("harness", "env-1");
  const served = await relayedServer(relay.url, executorToken, "env-1");
  const { executor, server } = served;
  await executor.connected;
  const client = await connect({
    rendezvous: { registryUrl: relay.url, environmentId: "env-1", token: harnessToken },
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
  });
  return {
    relay,
    executor,
    server,
    client,
    harnessToken,
    async [Symbol.asyncDispose]() {
      await client.close();
      await served[Symbol.asyncDispose]();
      await relay.close();
    },
  };
}

Deno.test("relay e2e: processes, files and fetch through the encrypted path", async () => {
  await using s = await setup();
  const out = await s.client.command("/bin/sh", {
    args: ["-c", "echo hello from the executor; echo err >&2; exit 7"],
  }).output();
  assertEquals(new TextDecoder().decode(out.stdout), "hello from the executor\n");
  assertEquals(new TextDecoder().decode(out.stderr), "err\n");
  assertEquals(out.code, 7);
  const dir = await Deno.makeTempDir();
  try {
    const big = new Uint8Array(300_000).map((_, i) => (i * 7919) % 251);
    await s.client.fs.writeFile(`${dir}/f.bin`, big);
    const back = await s.client.fs.readFile(`${dir}/f.bin`);
    assertEquals(back.length, big.length);
    assert(back.every((b, i) => b === big[i]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  const origin = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response("fetched through the relay"),
  );
  try {
    const res = await s.client.fetch(`http://127.0.0.1:${origin.addr.port}/`);
    assertEquals(await res.text(), "fetched through the relay");
  } finally {
    await origin.shutdown();
  }
});

Deno.test("relay e2e: the relay never sees plaintext", async () => {
  const seen: Uint8Array[] = [];
  await using s = await setup((bytes) => seen.push(bytes.slice()));
  const marker = "PLAINTEXT-MARKER-7f3a9c";
  const out = await s.client.command("/bin/sh", {
    args: ["-c", `echo ${marker}; echo ${marker} >&2`],
  }).output();
  assertStringIncludes(new TextDecoder().decode(out.stdout), marker);
  assert(seen.length > 4, "frames were forwarded");
  const needles = [marker, btoa(`${marker}\n`).slice(0, 16), "process/start", "jsonrpc", "argv"];
  for (const frame of seen) {
    const text = new TextDecoder("latin1").decode(frame);
    for (const n of needles) assert(!text.includes(n), `the relay saw ${n}`);
  }
});

Deno.test("relay e2e: 100 MiB of output survives the executor's socket being dropped mid-stream", async () => {
  await using s = await setup();
  const total = 100 * 1024 * 1024;
  const proc = await s.client.spawn(["/bin/sh", "-c", `head -c ${total} /dev/zero | tr '\\0' 'x'`]);
  let received = 0;
  let dropped = false;
  let intact = true;
  for await (const chunk of proc.stdout) {
    for (let i = 0; i < chunk.length; i += 997) if (chunk[i] !== 0x78) intact = false;
    received += chunk.length;
    if (!dropped && received > total / 3) {
      dropped = true;
      s.executor.dropSocket();
    }
  }
  const status = await proc.status;
  assertEquals(received, total);
  assert(intact, "bytes arrive unchanged");
  assertEquals(status.code, 0);
  assert(dropped);
});

Deno.test("relay e2e: a second relay node sharing the KV file routes a harness to the node holding the executor", async () => {
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/relay.kv`;
  const a = await startRelayServer({ port: 0, kv, logger: nullLogger });
  const b = await startRelayServer({ port: 0, kv, logger: nullLogger });
  const server = new ExecServer({ logger: nullLogger });
  try {
    const executorToken = await a.store.createToken("executor", "env-2");
    const harnessToken = await b.store.createToken("harness", "env-2");
    const executor = await RemoteExecutor.start({
      registry: { url: a.url, bearer: executorToken },
      environmentId: "env-2",
      server,
      logger: nullLogger,
    });
    await executor.connected;
    assertEquals(a.executorCount, 1);
    assertEquals(b.executorCount, 0);
    const client = await connect({
      rendezvous: { registryUrl: b.url, environmentId: "env-2", token: harnessToken },
    });
    const out = await client.command("echo", { args: ["via node A"] }).output();
    assertEquals(new TextDecoder().decode(out.stdout), "via node A\n");
    await client.close();
    await executor.close();
  } finally {
    await server.close();
    await a.close();
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

const REFERENCE = referenceBin();

Deno.test({
  name: "relay e2e: the real Codex executor registers with our relay and our client drives it",
  ignore: REFERENCE === null,
  async fn() {
    const relay = await startRelayServer({ port: 0, logger: nullLogger });
    const home = await Deno.makeTempDir();
    const executorToken = await relay.store.createToken("executor", "env-ref");
    const harnessToken = await relay.store.createToken("harness", "env-ref");
    const executor = await spawnRemoteExecutor("reference", relay.url, "env-ref", executorToken, {
      CODEX_HOME: home,
    });
    try {
      assert(await eventually(() => relay.executorCount > 0, 30_000), "timed out waiting");
      assertEquals(relay.executorCount, 1);
      const client = await connect({
        rendezvous: { registryUrl: relay.url, environmentId: "env-ref", token: harnessToken },
      });
      assertEquals(client.environmentInfo?.executorVersion, referenceVersion());
      const out = await client.command("/bin/sh", {
        args: ["-c", "echo hi from codex; head -c 300000 /dev/zero | wc -c"],
      }).output();
      assertEquals(new TextDecoder().decode(out.stdout), "hi from codex\n300000\n");
      const dir = await Deno.makeTempDir();
      const data = new Uint8Array(200_000).map((_, i) => i % 256);
      await client.fs.writeFile(`${dir}/x.bin`, data);
      assertEquals((await client.fs.readFile(`${dir}/x.bin`)).length, 200_000);
      await Deno.remove(dir, { recursive: true });
      await client.close();
    } finally {
      await executor.stop();
      await relay.close();
      await Deno.remove(home, { recursive: true });
    }
  },
});

Deno.test("relay CLI: relay, token create, serve --remote and exec --remote as real processes", async () => {
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/relay.kv`;
  const run = (args: string[], stdin: "piped" | "null" = "null") =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, ...args],
      stdin,
      stdout: "piped",
      stderr: "null",
    });
  const token = async (role: string) =>
    new TextDecoder().decode(
      (await run([
        "relay",
        "token",
        "create",
        "--role",
        role,
        "--environment",
        "cli-env",
        "--kv",
        kv,
      ]).output()).stdout,
    ).trim();
  const executorToken = await token("executor");
  const harnessToken = await token("harness");
  await Deno.writeTextFile(`${dir}/harness.token`, harnessToken);
  const relay = run(["relay", "--listen", "http://127.0.0.1:0", "--kv", kv, "--log-level", "error"])
    .spawn();
  const reader = relay.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let line = "";
  while (!line.includes("\n")) line += (await reader.read()).value ?? "";
  const url = line.trim();
  const executor = run([
    "serve",
    "--remote",
    url,
    "--environment-id",
    "cli-env",
    "--registration-bearer-stdin",
    "--log-level",
    "error",
  ], "piped").spawn();
  const w = executor.stdin.getWriter();
  await w.write(new TextEncoder().encode(executorToken + "\n"));
  try {
    let out = "";
    for (let attempt = 0; attempt < 50 && !out.includes("remote hello"); attempt++) {
      const r = await run([
        "exec",
        "--remote",
        url,
        "--environment-id",
        "cli-env",
        "--token-file",
        `${dir}/harness.token`,
        "--",
        "echo",
        "remote hello",
      ]).output();
      out = new TextDecoder().decode(r.stdout);
      if (!out.includes("remote hello")) await new Promise((r) => setTimeout(r, 200));
    }
    assertEquals(out, "remote hello\n");
  } finally {
    executor.kill("SIGTERM");
    await executor.status;
    await w.close().catch(() => {});
    await executor.stdout.cancel();
    relay.kill("SIGTERM");
    await relay.status;
    await reader.cancel();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("relay e2e: forward to a target that is down — the harness hears the cause, encrypted", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadPort = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const executorToken = await relay.store.createToken("executor", "env-dead");
  const harnessToken = await relay.store.createToken("harness", "env-dead");
  const executor = await RemoteExecutor.start({
    registry: { url: relay.url, bearer: executorToken },
    environmentId: "env-dead",
    server: forwardingServer({ url: `ws://127.0.0.1:${deadPort}` }),
    logger: nullLogger,
  });
  try {
    await executor.connected;
    const error = await assertRejects(() =>
      connect({
        rendezvous: { registryUrl: relay.url, environmentId: "env-dead", token: harnessToken },
        reconnect: false,
      })
    );
    assertStringIncludes(
      error.message,
      `exec-server forward: cannot connect to ws://127.0.0.1:${deadPort}/: Connection refused`,
    );
  } finally {
    await executor.close();
    await relay.close();
  }
});

Deno.test("relay e2e: forward — a WebSocket exec-server behind our relay, streams bridged", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const target = new ExecServer({ logger: nullLogger });
  const listener = listenWebSocket(target, { hostname: "127.0.0.1", port: 0 });
  const executorToken = await relay.store.createToken("executor", "env-fwd");
  const harnessToken = await relay.store.createToken("harness", "env-fwd");
  const executor = await RemoteExecutor.start({
    registry: { url: relay.url, bearer: executorToken },
    environmentId: "env-fwd",
    server: forwardingServer({ url: listener.url }),
    logger: nullLogger,
  });
  try {
    await executor.connected;
    const client = await connect({
      rendezvous: { registryUrl: relay.url, environmentId: "env-fwd", token: harnessToken },
    });
    const out = await client.command("/bin/sh", {
      args: ["-c", "echo forwarded; head -c 3000000 /dev/zero | wc -c"],
    }).output();
    assertEquals(new TextDecoder().decode(out.stdout), "forwarded\n3000000\n");
    const dir = await Deno.makeTempDir();
    await client.fs.writeFile(`${dir}/f.txt`, new TextEncoder().encode("through"));
    assertEquals(new TextDecoder().decode(await Deno.readFile(`${dir}/f.txt`)), "through");
    await Deno.remove(dir, { recursive: true });
    // Closing the harness ends the bridged connection on the target too.
    await client.close();
    assert(await eventually(() => target.connectionCount === 0, 30_000), "timed out waiting");
    assertEquals(target.connectionCount, 0);
  } finally {
    await executor.close();
    await listener.close();
    await target.close();
    await relay.close();
  }
});

Deno.test({
  name: "relay CLI: forward puts the Codex WebSocket exec-server behind our relay",
  ignore: REFERENCE === null,
  async fn() {
    const relay = await startRelayServer({ port: 0, logger: nullLogger });
    const home = await Deno.makeTempDir();
    const executorToken = await relay.store.createToken("executor", "env-cfwd");
    const harnessToken = await relay.store.createToken("harness", "env-cfwd");
    const codex = new Deno.Command(REFERENCE!, {
      args: ["exec-server", "--listen", "ws://127.0.0.1:0"],
      env: { CODEX_HOME: home },
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const { line: codexUrl, rest: codexOut } = await firstLine(codex.stdout);
    const forward = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        CLI,
        "forward",
        "--remote",
        relay.url,
        "--environment-id",
        "env-cfwd",
        "--registration-bearer-stdin",
        "--to",
        codexUrl,
        "--log-level",
        "error",
      ],
      stdin: "piped",
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      const w = forward.stdin.getWriter();
      await w.write(new TextEncoder().encode(executorToken + "\n"));
      await w.close();
      assert(await eventually(() => relay.executorCount > 0, 30_000), "timed out waiting");
      const client = await connect({
        rendezvous: { registryUrl: relay.url, environmentId: "env-cfwd", token: harnessToken },
      });
      assertEquals(client.environmentInfo?.executorVersion, referenceVersion());
      const out = await client.command("/bin/sh", { args: ["-c", "echo via forward"] }).output();
      assertEquals(new TextDecoder().decode(out.stdout), "via forward\n");
      await client.close();
    } finally {
      forward.kill("SIGTERM");
      await forward.status;
      codex.kill("SIGTERM");
      await codex.status;
      await codexOut.cancel();
      await relay.close();
      await Deno.remove(home, { recursive: true });
    }
  },
});

Deno.test("relay e2e: a request's trace context rides in clear on its first frame only (§3.7)", async () => {
  const toExecutor: Uint8Array[] = [];
  const toHarness: Uint8Array[] = [];
  await using s = await setup((bytes, direction) =>
    (direction === "to_executor" ? toExecutor : toHarness).push(bytes.slice())
  );
  const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const traced = await connect({
    rendezvous: { registryUrl: s.relay.url, environmentId: "env-1", token: s.harnessToken },
    trace: () => ({ traceparent, tracestate: "vendor=1" }),
  });
  try {
    toExecutor.length = 0;
    const out = await traced.command("/bin/sh", {
      args: ["-c", `head -c 200000 /dev/zero | wc -c`],
    }).output();
    assertEquals(new TextDecoder().decode(out.stdout), "200000\n");
    const frames = toExecutor.map(decodeRelayFrame).filter((f) => f.body?.kind === "data");
    const withTrace = frames.filter((f) => f.traceparent !== undefined);
    assert(withTrace.length >= 1, "the requests' first frames carry the trace");
    // The rest are notifications (the connection's late `initialized`).
    for (const f of frames) {
      const size = f.body?.kind === "data" ? f.body.payload.length : 0;
      if (f.traceparent === undefined) assert(size < 100, `an untraced ${size}-byte record`);
    }
    for (const f of withTrace) {
      assertEquals([f.traceparent, f.tracestate], [traceparent, "vendor=1"]);
    }
    assert(
      toHarness.map(decodeRelayFrame).every((f) => f.traceparent === undefined),
      "responses and notifications carry none",
    );
    // The untraced client's frames carry none either.
    toExecutor.length = 0;
    await s.client.command("/bin/true").output();
    assert(toExecutor.map(decodeRelayFrame).every((f) => f.traceparent === undefined));
  } finally {
    await traced.close();
  }
});

Deno.test("relay e2e: caller-owned credentials — a bundle minted per connection by the caller, renewed across a reconnect", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const executorToken = await relay.store.createToken("executor", "env-own");
  // The harness's tokens rotate: each connection uses the next one.
  const tokens = [
    await relay.store.createToken("harness", "env-own"),
    await relay.store.createToken("harness", "env-own"),
  ];
  const server = new ExecServer({ logger: nullLogger });
  const executor = await RemoteExecutor.start({
    registry: { url: relay.url, bearer: executorToken },
    environmentId: "env-own",
    server,
    logger: nullLogger,
    backoff: { initialMs: 50, maxMs: 200 },
  });
  const minted: string[] = [];
  const { connectHarness } = await import("../../src/relay/wire/registry_client.ts");
  try {
    await executor.connected;
    const client = await connect({
      // The caller's own registry call, with whatever credentials it holds now.
      rendezvous: async (harnessKey) => {
        const token = tokens[Math.min(minted.length, tokens.length - 1)]!;
        minted.push(token);
        return await connectHarness({ url: relay.url, bearer: token }, "env-own", harnessKey);
      },
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    });
    assertEquals((await client.run("echo first")).stdout, "first\n");
    assertEquals(minted, [tokens[0]]);
    const session = client.sessionId;
    executor.dropSocket();
    // The next calls go through a new connection with a freshly minted bundle.
    assert(
      await eventually(async () => {
        try {
          return (await client.run("echo second")).stdout === "second\n";
        } catch {
          return false;
        }
      }),
      "no reconnection",
    );
    assertEquals(minted.slice(0, 2), [tokens[0], tokens[1]]);
    assertEquals(client.sessionId, session, "the session was resumed");
    await client.close();

    // A minted bundle is checked before anything is dialled.
    await assertRejects(
      async () => {
        const c = await connect({
          rendezvous: async (key) => ({
            ...(await connectHarness({ url: relay.url, bearer: tokens[1]! }, "env-own", key)),
            environmentId: "  ",
          }),
          reconnect: false,
        });
        await c.close();
      },
      RendezvousError,
      "the environment id is blank",
    );
    await assertRejects(
      () => connect({ rendezvous: { registryUrl: relay.url, environmentId: " ", token: "x" } }),
      RendezvousError,
      "the environment id is blank",
    );
  } finally {
    await executor.close();
    await server.close();
    await relay.close();
  }
});
