// A relay fleet of two nodes on one store, side by side for Redis and a
// Deno KV file (not a test: numbers only). Per store:
//   connects/s      harness connects (registry connect → validate →
//                   rendezvous → Noise handshake → initialize), one after
//                   another, through the node that does not hold the executor
//   store ms        the store operations one connect makes, timed alone
//                   (token ×2, registration, socket, authorize, consume)
//   streams         N concurrent harness streams across both nodes (one
//                   environment per 100 streams, executors alternating between
//                   the nodes): relay RSS per stream, relay CPU per stream per
//                   minute while idle
//
//   deno run -A bench/relay_fleet_bench.ts [--connects 100] [--streams 1000]

import { parseArgs } from "node:util";
import { connect, type ExecServerClient } from "../src/client/client.ts";
import { nullLogger } from "../src/log/logger.ts";
import { generateIdentity } from "../src/noise/hybrid_ik.ts";
import { loadNoiseCrypto } from "../src/noise/primitives.ts";
import { RemoteExecutor } from "../src/relay/executor/executor.ts";
import { openRelayStore } from "../src/relay/server/store_open.ts";
import { ExecServer } from "../src/server/exec_server.ts";
import { cpu } from "./helpers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { connects: { type: "string" }, streams: { type: "string" } },
});
const CONNECTS = Number(values.connects ?? 100);
const STREAMS = Number(values.streams ?? 1000);
const cli = new URL("../cli.ts", import.meta.url).pathname;
await loadNoiseCrypto();

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** CPU ms and RSS (MiB) of `pid` so far. */
function proc(pid: number): { cpu: number; rssMiB: number } {
  const rss = /VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`))!;
  return { cpu: cpu(pid)[0] * 1000, rssMiB: Number(rss[1]) / 1024 };
}

async function node(store: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      cli,
      "relay",
      "--listen",
      "http://127.0.0.1:0",
      "--store",
      store,
      "--log-level",
      "error",
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) text += (await reader.read()).value ?? "";
  reader.releaseLock();
  return {
    url: text.split("\n")[0]!.trim(),
    pid: child.pid,
    stop: async () => {
      child.kill("SIGKILL");
      await child.status;
    },
  };
}

async function connectOrSay(what: string, options: Parameters<typeof connect>[0]) {
  try {
    return await connect(options);
  } catch (error) {
    throw new Error(`${what}: ${(error as Error).message}`, { cause: error });
  }
}

async function fleet(label: string, store: string) {
  const a = await node(store);
  const b = await node(store);
  const tokens = await openRelayStore(store);
  const servers: ExecServer[] = [];
  const executors: RemoteExecutor[] = [];
  const harness: Record<string, string> = {};
  // An executor serves at most 128 streams: one environment per 100 streams,
  // alternating between the nodes (env-a on node a, env-b on node b, …).
  const envs = Math.max(2, Math.ceil(STREAMS / 100));
  const envName = (k: number) => k < 2 ? ["env-a", "env-b"][k]! : `env-${k}`;
  for (let k = 0; k < envs; k++) {
    const env = envName(k);
    const at = k % 2 === 0 ? a : b;
    const server = new ExecServer({ logger: nullLogger });
    servers.push(server);
    const executor = await RemoteExecutor.start({
      registry: { url: at.url, bearer: await tokens.createToken("executor", env) },
      environmentId: env,
      server,
      logger: nullLogger,
    });
    await executor.connected;
    executors.push(executor);
    harness[env] = await tokens.createToken("harness", env);
  }
  // Connects, one after another, through the other node.
  const t0 = performance.now();
  for (let i = 0; i < CONNECTS; i++) {
    const c = await connectOrSay(`${label} connect ${i}`, {
      rendezvous: { registryUrl: b.url, environmentId: "env-a", token: harness["env-a"]! },
      reconnect: false,
    });
    await c.close();
  }
  const perSecond = CONNECTS / ((performance.now() - t0) / 1000);
  // The store's share: the operations of one connect, alone.
  const key = generateIdentity().publicKey;
  await tokens.register("env-x", key);
  const s0 = performance.now();
  for (let i = 0; i < CONNECTS; i++) {
    await tokens.token(harness["env-a"]!);
    await tokens.registration("env-x");
    await tokens.socket("env-a");
    const id = await tokens.authorize({
      environmentId: "env-x",
      registrationId: "r",
      x25519: "x",
      mlkem: "m",
    });
    await tokens.token(harness["env-a"]!);
    await tokens.consume(id);
  }
  const storeMs = (performance.now() - s0) / CONNECTS;
  // Many concurrent streams, half on each node (a token holds at most 32
  // sockets: one token per 25 streams).
  const streamTokens: string[] = [];
  for (let i = 0; i < STREAMS; i += 25) {
    streamTokens.push(await tokens.createToken("harness", envName(Math.floor(i / 100))));
  }
  const before = { a: proc(a.pid), b: proc(b.pid) };
  const clients: ExecServerClient[] = [];
  const failures: string[] = [];
  // Batches under the executor's 32 pending handshake validations.
  for (let i = 0; i < STREAMS; i += 20) {
    const settled = await Promise.allSettled(
      Array.from({ length: Math.min(20, STREAMS - i) }, (_, j) => {
        const group = Math.floor((i + j) / 25);
        const k = Math.floor((i + j) / 100);
        return connect({
          rendezvous: {
            // Through either node: routed to the one holding the executor.
            registryUrl: group % 2 === 0 ? a.url : b.url,
            environmentId: envName(k),
            token: streamTokens[group]!,
          },
          reconnect: false,
        });
      }),
    );
    for (const r of settled) {
      if (r.status === "fulfilled") clients.push(r.value);
      else failures.push((r.reason as Error).message);
    }
  }
  const loaded = { a: proc(a.pid), b: proc(b.pid) };
  await new Promise((r) => setTimeout(r, 20_000));
  const idle = { a: proc(a.pid), b: proc(b.pid) };
  const rssPerStreamKiB =
    ((loaded.a.rssMiB + loaded.b.rssMiB) - (before.a.rssMiB + before.b.rssMiB)) *
    1024 / STREAMS;
  const cpuPerStreamMinute = ((idle.a.cpu - loaded.a.cpu) + (idle.b.cpu - loaded.b.cpu)) * 3 /
    STREAMS;
  await Promise.all(clients.map((c) => c.close()));
  for (const e of executors) await e.close();
  for (const s of servers) await s.close();
  tokens.close();
  await a.stop();
  await b.stop();
  console.log(
    `${label.padEnd(10)} ${perSecond.toFixed(1).padStart(6)} connects/s  store ${
      storeMs.toFixed(2)
    } ms/connect (${
      (storeMs / (1000 / perSecond) * 100).toFixed(1)
    }%)  ${clients.length}/${STREAMS} streams open: ${rssPerStreamKiB.toFixed(1)} KiB/stream, ${
      cpuPerStreamMinute.toFixed(3)
    } ms CPU/stream/min idle${
      failures.length ? `; ${failures.length} failed (first: ${failures[0]})` : ""
    }`,
  );
}

console.log(
  `two relay nodes, ${CONNECTS} connects, ${STREAMS} streams (${navigator.hardwareConcurrency} CPUs)`,
);
const port = freePort();
const dir = await Deno.makeTempDir();
const redis = new Deno.Command("redis-server", {
  args: ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir],
  stdout: "null",
}).spawn();
await new Promise((r) => setTimeout(r, 300));
try {
  await fleet("redis", `redis://127.0.0.1:${port}/0`);
  await fleet("deno-kv", `${dir}/relay.kv`);
} finally {
  redis.kill("SIGTERM");
  await redis.status;
  await Deno.remove(dir, { recursive: true });
}
