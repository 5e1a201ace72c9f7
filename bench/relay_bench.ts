// Encrypted remote mode throughput (not part of the test suite): a relay
// node, an executor (`serve --remote`) and this client in three processes;
// a child writes N MiB to stdout, read through the relay end to end
// encrypted. The same child over a direct WebSocket for comparison, and the
// handshake cost per side.
//
//   deno run -A bench/relay_bench.ts [--mib 512]

import { loadNoiseCrypto } from "../src/noise/primitives.ts";
import { parseArgs } from "node:util";
import { connect } from "../src/client/client.ts";
import { openRelayStore } from "../src/relay/server/store_open.ts";
import {
  buildPrologue,
  generateIdentity,
  initiatorHandshake,
  responderHandshake,
} from "../src/noise/hybrid_ik.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { mib: { type: "string" }, reference: { type: "string" } },
});
const MIB = Number(values.mib ?? 512);
const cli = new URL("../cli.ts", import.meta.url).pathname;
const dir = await Deno.makeTempDir();
const kv = `${dir}/relay.kv`;

async function firstLine(child: Deno.ChildProcess): Promise<string> {
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("process ended before printing its address");
    text += value;
  }
  reader.releaseLock();
  return text.split("\n")[0]!.trim();
}

/** CPU seconds used so far by `pid` (Linux; null elsewhere). */
function cpuSeconds(pid: number): number | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, USER_HZ
  } catch {
    return null;
  }
}

/** CPU seconds per GiB moved, per process, over `run`. */
async function cpuPerGiB<T>(
  pids: Record<string, number>,
  bytes: number,
  run: () => Promise<T>,
): Promise<[T, string]> {
  const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuSeconds(p)]));
  const result = await run();
  const parts = Object.entries(pids).map(([k, p]) => {
    const a = before[k] ?? null, b = cpuSeconds(p);
    return a === null || b === null ? `${k} ?` : `${k} ${((b - a) / (bytes / 2 ** 30)).toFixed(2)}`;
  });
  return [result, `cpu s/GiB: ${parts.join(", ")}`];
}

async function drainStdout(client: Awaited<ReturnType<typeof connect>>): Promise<number> {
  const proc = await client.spawn(["/bin/sh", "-c", `head -c ${MIB * 1024 * 1024} /dev/zero`]);
  const t0 = performance.now();
  let bytes = 0;
  for await (const chunk of proc.stdout) bytes += chunk.length;
  await proc.status;
  return bytes / 1024 / 1024 / ((performance.now() - t0) / 1000);
}

{
  using store = await openRelayStore(kv);
  const executorToken = await store.createToken("executor", "bench");
  const harnessToken = await store.createToken("harness", "bench");
  const relay = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      cli,
      "relay",
      "--listen",
      "http://127.0.0.1:0",
      "--kv",
      kv,
      "--log-level",
      "error",
    ],
    stdout: "piped",
  }).spawn();
  const url = await firstLine(relay);
  // Our executor, or (--reference PATH) the Codex binary's.
  const executor = values.reference
    ? new Deno.Command(values.reference, {
      args: [
        "exec-server",
        "--remote",
        url,
        "--environment-id",
        "bench",
        "--registration-bearer-stdin",
      ],
      env: { CODEX_HOME: dir },
      stdin: "piped",
      stderr: "null",
    }).spawn()
    : new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        cli,
        "serve",
        "--remote",
        url,
        "--environment-id",
        "bench",
        "--registration-bearer-stdin",
        "--log-level",
        "error",
      ],
      stdin: "piped",
    }).spawn();
  const w = executor.stdin.getWriter();
  await w.write(new TextEncoder().encode(executorToken + "\n"));
  let client;
  for (let i = 0; i < 100 && !client; i++) {
    try {
      client = await connect({
        rendezvous: { registryUrl: url, environmentId: "bench", token: harnessToken },
      });
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const [runs, cpu] = await cpuPerGiB(
    { client: Deno.pid, executor: executor.pid, relay: relay.pid },
    3 * MIB * 2 ** 20,
    async () =>
      [await drainStdout(client!), await drainStdout(client!), await drainStdout(client!)]
        .sort((a, b) => a - b),
  );
  const who = values.reference ? "reference executor" : "our executor";
  console.log(
    `relay_stdout: ${
      runs[1]!.toFixed(0)
    } MiB/s encrypted through the relay, ${who} (${MIB} MiB, median of 3; ${cpu})`,
  );
  await client!.close();
  executor.kill("SIGTERM");
  await executor.status;
  relay.kill("SIGTERM");
  await relay.status;
}

{
  const server = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", cli, "serve", "--listen", "ws://127.0.0.1:0", "--log-level", "error"],
    stdout: "piped",
  }).spawn();
  const url = await firstLine(server);
  const client = await connect({ url });
  const [runs, cpu] = await cpuPerGiB(
    { client: Deno.pid, server: server.pid },
    3 * MIB * 2 ** 20,
    async () =>
      [await drainStdout(client), await drainStdout(client), await drainStdout(client)]
        .sort((a, b) => a - b),
  );
  console.log(
    `direct_ws_stdout: ${
      runs[1]!.toFixed(0)
    } MiB/s over a plain WebSocket, for comparison (${cpu})`,
  );
  await client.close();
  server.kill("SIGTERM");
  await server.status;
}

{
  await loadNoiseCrypto();
  const executor = generateIdentity();
  const harness = generateIdentity();
  const key = { dh: executor.key.dh.publicKey, kem: executor.key.kem.publicKey };
  const prologue = buildPrologue("env", "reg", "stream");
  let initiatorMs = 0;
  let responderMs = 0;
  const n = 50;
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    const hi = initiatorHandshake(harness, key, prologue);
    const m1 = hi.writeMessage(new Uint8Array(64));
    initiatorMs += performance.now() - t;
    t = performance.now();
    const hr = responderHandshake(executor, prologue);
    hr.readMessage(m1);
    const m2 = hr.writeMessage();
    hr.split();
    responderMs += performance.now() - t;
    t = performance.now();
    hi.readMessage(m2);
    hi.split();
    initiatorMs += performance.now() - t;
  }
  console.log(
    `handshake_cpu: initiator ${(initiatorMs / n).toFixed(1)} ms, responder ${
      (responderMs / n).toFixed(1)
    } ms per handshake (mean of ${n})`,
  );
}
await Deno.remove(dir, { recursive: true });
