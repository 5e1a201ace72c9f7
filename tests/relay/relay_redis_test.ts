// The relay fleet on a real redis-server (installed by tests/setup.sh): the
// store's rules across nodes, two relay processes sharing one Redis, Redis
// unreachable and restarted, and a relay node killed with -9 behind one
// address while a harness streams.

import { relayedServer } from "../helpers/relay.ts";
import { connect } from "../../src/client/client.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import { type RelayStore, StoreUnavailableError } from "../../src/relay/server/store.ts";
import { openRelayStore } from "../../src/relay/server/store_open.ts";
import { generateIdentity } from "../../src/noise/hybrid_ik.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { loadLibc } from "../../src/util/libc.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, eventually, firstLine, freePort } from "../helpers/wire_client.ts";
import { tcpRelay } from "../helpers/tcp_relay.ts";

// Loaded before the tests: both stay open for the process.
await loadNoiseCrypto();
loadLibc();

const REDIS = (() => {
  try {
    return new Deno.Command("redis-server", { args: ["--version"] }).outputSync().success
      ? "redis-server"
      : null;
  } catch {
    return null;
  }
})();

async function answersPing(port: number): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      await conn.write(new TextEncoder().encode("PING\r\n"));
      const buf = new Uint8Array(64);
      const n = await conn.read(buf);
      const text = new TextDecoder().decode(buf.subarray(0, n ?? 0));
      return text.startsWith("+PONG") || text.startsWith("-NOAUTH");
    } finally {
      conn.close();
    }
  } catch {
    return false;
  }
}

/** A redis-server on its own port and directory (data kept across restarts). */
async function startRedis(options: { password?: string } = {}) {
  const port = freePort();
  const dir = await Deno.makeTempDir();
  let child: Deno.ChildProcess | null = null;
  const start = async () => {
    child = new Deno.Command(REDIS!, {
      args: [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
        ...(options.password ? ["--requirepass", options.password] : []),
      ],
      stdout: "null",
      stderr: "null",
      stdin: "null",
    }).spawn();
    assert(await eventually(() => answersPing(port)), "redis-server did not start");
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    get pid() {
      return child!.pid;
    },
    /** SIGSTOP: connections stay open, nothing answers. */
    pause: () => Deno.kill(child!.pid, "SIGSTOP"),
    resume: () => Deno.kill(child!.pid, "SIGCONT"),
    async stop() {
      if (!child) return;
      try {
        Deno.kill(child.pid, "SIGCONT");
        child.kill("SIGTERM");
      } catch { /* gone */ }
      await child.status;
      child = null;
    },
    restart: start,
    async [Symbol.asyncDispose]() {
      await this.stop();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** A relay node as its own process: `exec-server relay --store URL`. */
async function relayNode(store: string, extra: string[] = []) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "relay",
      "--listen",
      "http://127.0.0.1:0",
      "--store",
      store,
      "--log-level",
      "error",
      ...extra,
    ],
    stdout: "piped",
    stderr: "null",
    stdin: "null",
  }).spawn();
  const { line, rest } = await firstLine(child.stdout);
  const url = line.trim();
  // Keep draining what it prints after.
  (async () => {
    while (!(await rest.read().catch(() => ({ done: true }))).done) { /* drain */ }
  })();
  return {
    url,
    port: Number(new URL(url).port),
    child,
    async kill9() {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
    },
    async [Symbol.asyncDispose]() {
      await this.kill9();
    },
  };
}

const ignore = REDIS === null;

Deno.test({
  name:
    "relay store (redis): tokens as digests, one secret, an authorization consumed once across nodes, sockets cleared only by their node, TTLs in Redis",
  ignore,
  async fn() {
    await using redis = await startRedis();
    const a = await openRelayStore(redis.url);
    const b = await openRelayStore(redis.url);
    try {
      assertEquals(a.description, `redis ${redis.url}`);
      assertEquals((await a.secret()).toHex(), (await b.secret()).toHex());
      const token = await a.createToken("harness", "env-1");
      assertEquals((await b.token(token))?.environmentId, "env-1");
      const keys = await redisKeys(redis.port);
      assert(!keys.some((k) => k.includes(token)), "a raw token is stored");
      // Two nodes racing for one authorization, 50 times: exactly one wins each time.
      for (let i = 0; i < 50; i++) {
        const id = await a.authorize({
          environmentId: "e",
          registrationId: "r",
          x25519: "x",
          mlkem: "m",
        });
        const won = (await Promise.all([a.consume(id), b.consume(id), a.consume(id)]))
          .filter((r) => r !== null).length;
        assertEquals(won, 1);
      }
      // A socket record is its node's to clear, and lives on Redis's clock.
      await a.setSocket("env-1", { registrationId: "r", nodeUrl: "http://a", nodeId: "node-a" });
      await b.clearSocket("env-1", "node-b");
      assertEquals((await b.socket("env-1"))?.nodeId, "node-a");
      const ttl = Number(
        await redisCommand(redis.port, ["PTTL", "exec-server:relay:socket:env-1"]),
      );
      assert(ttl > 80_000 && ttl <= 90_000, `socket TTL ${ttl}`);
      await a.clearSocket("env-1", "node-a");
      assertEquals(await b.socket("env-1"), null);
      // Registration conflicts: each register replaces the record atomically; the last one stands.
      const key = generateIdentity().publicKey;
      const regs = await Promise.all([a.register("env-2", key), b.register("env-2", key)]);
      const current = (await a.registration("env-2"))!.registrationId;
      assert(regs.some((r) => r.registrationId === current));
      assertEquals((await b.registration("env-2"))!.registrationId, current);
    } finally {
      a.close();
      b.close();
    }
  },
});

Deno.test({
  name:
    "relay store (redis): a password from outside the URL, never shown; a wrong one fails clearly",
  ignore,
  async fn() {
    await using redis = await startRedis({ password: "s3cret-pw" });
    const store = await openRelayStore(redis.url, { password: "s3cret-pw" });
    try {
      assert(!store.description.includes("s3cret"));
      assertEquals((await store.health()).ok, true);
    } finally {
      store.close();
    }
    const withUrl = await openRelayStore(redis.url.replace("redis://", "redis://:s3cret-pw@"));
    try {
      assert(!withUrl.description.includes("s3cret"), withUrl.description);
    } finally {
      withUrl.close();
    }
    const error = await assertRejects(
      () => openRelayStore(redis.url, { password: "wrong" }),
      StoreUnavailableError,
    );
    assertStringIncludes(error.message, "cannot reach the relay store");
    assert(!error.message.includes("wrong"));
  },
});

async function redisCommand(port: number, args: string[]): Promise<string> {
  const out = await new Deno.Command("redis-cli", { args: ["-p", String(port), ...args] }).output();
  return new TextDecoder().decode(out.stdout).trim();
}

async function redisKeys(port: number): Promise<string[]> {
  return (await redisCommand(port, ["KEYS", "*"])).split("\n").filter((k) => k !== "");
}

async function tokenVia(store: string, role: "executor" | "harness", env: string): Promise<string> {
  using s: RelayStore = await openRelayStore(store);
  return await s.createToken(role, env);
}

Deno.test({
  name:
    "relay fleet (redis): two relay processes share one Redis — register on one, connect through the other; Redis unreachable then back",
  ignore,
  async fn() {
    await using redis = await startRedis();
    await using nodeA = await relayNode(redis.url);
    await using nodeB = await relayNode(redis.url);
    const executorToken = await tokenVia(redis.url, "executor", "env-fleet");
    const harnessToken = await tokenVia(redis.url, "harness", "env-fleet");
    await using served = await relayedServer(nodeA.url, executorToken, "env-fleet");
    await served.executor.connected;
    const ready = await fetch(`${nodeB.url}/readyz`);
    assertEquals([ready.status, await ready.text()], [200, `ok\nstore: redis ${redis.url}\n`]);
    // Through node B: routed to node A, which holds the executor.
    const client = await connect({
      rendezvous: { registryUrl: nodeB.url, environmentId: "env-fleet", token: harnessToken },
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    });
    try {
      assertEquals((await client.run("echo via b")).stdout, "via b\n");
      // Redis stops answering: the open stream does not need it …
      redis.pause();
      try {
        assertEquals((await client.run("echo still flowing")).stdout, "still flowing\n");
        // … new connects get a clear 503, and /readyz says why.
        const refused = await fetch(`${nodeB.url}/cloud/environment/env-fleet/connect`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${harnessToken}`,
            "content-type": "application/json",
          },
          body: JSON.stringify({ harness_public_key: generateIdentity().publicKey }),
        });
        assertEquals(refused.status, 503);
        assertEquals(refused.headers.get("retry-after"), "1");
        assertEquals((await refused.json()).error.code, "store_unavailable");
        const down = await fetch(`${nodeA.url}/readyz`);
        assertEquals(down.status, 503);
        assertStringIncludes(await down.text(), "store unavailable");
      } finally {
        redis.resume();
      }
      // Back by itself.
      assert(
        await eventually(async () =>
          (await fetch(`${nodeB.url}/readyz`).then((r) =>
            r.body?.cancel().then(() => r.status)
          )) === 200
        ),
        "readyz did not recover",
      );
      const again = await connect({
        rendezvous: { registryUrl: nodeB.url, environmentId: "env-fleet", token: harnessToken },
      });
      assertEquals((await again.run("echo recovered")).stdout, "recovered\n");
      await again.close();
      // Redis restarted (its data on disk): new connects work again.
      await redis.stop();
      await redis.restart();
      assert(
        await eventually(async () => {
          try {
            const c = await connect({
              rendezvous: {
                registryUrl: nodeA.url,
                environmentId: "env-fleet",
                token: harnessToken,
              },
              reconnect: false,
            });
            await c.close();
            return true;
          } catch {
            return false;
          }
        }),
        "no connect after the Redis restart",
      );
    } finally {
      await client.close();
    }
  },
});

Deno.test({
  name:
    "relay fleet (redis): a node killed with -9 — the executor moves to the other node behind the same address, the harness resumes, nothing lost",
  ignore,
  async fn() {
    await using redis = await startRedis();
    const nodeA = await relayNode(redis.url);
    await using nodeB = await relayNode(redis.url);
    let alive = [nodeA.port, nodeB.port];
    // One address in front of both nodes: each connection to the first that accepts.
    await using door = tcpRelay(() => alive);
    const front = { url: `http://127.0.0.1:${door.port}` };
    const executorToken = await tokenVia(redis.url, "executor", "env-9");
    const harnessToken = await tokenVia(redis.url, "harness", "env-9");
    const server = new ExecServer({ logger: nullLogger });
    const executor = await RemoteExecutor.start({
      registry: { url: front.url, bearer: executorToken },
      environmentId: "env-9",
      server,
      logger: nullLogger,
      backoff: { initialMs: 50, maxMs: 300 },
    });
    try {
      await executor.connected;
      const client = await connect({
        rendezvous: { registryUrl: front.url, environmentId: "env-9", token: harnessToken },
        reconnect: { initialDelayMs: 50, maxDelayMs: 300, maxAttempts: 40 },
      });
      try {
        const session = client.sessionId;
        const total = 40 * 1024 * 1024;
        const proc = await client.spawn([
          "/bin/sh",
          "-c",
          `head -c ${total} /dev/zero | tr '\\0' 'x'`,
        ]);
        let received = 0;
        let killed = false;
        let intact = true;
        const t0 = performance.now();
        let outage = 0;
        for await (const chunk of proc.stdout) {
          for (let i = 0; i < chunk.length; i += 997) if (chunk[i] !== 0x78) intact = false;
          received += chunk.length;
          if (!killed && received > total / 4) {
            killed = true;
            alive = [nodeB.port];
            outage = performance.now();
            await nodeA.kill9();
          }
        }
        assertEquals(received, total);
        assert(intact, "bytes arrive unchanged");
        assertEquals((await proc.status).code, 0);
        assertEquals(client.sessionId, session, "the harness resumed its session");
        assertEquals((await client.run("echo on b")).stdout, "on b\n");
        assert(outage > t0);
      } finally {
        await client.close();
      }
    } finally {
      await executor.close();
      await server.close();
      await nodeA.kill9();
    }
  },
});
