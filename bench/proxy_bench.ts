// Egress proxy benchmarks (not part of the test suite):
//   1. CONNECT tunnel throughput vs a direct loopback copy of the same bytes;
//   2. plain HTTP requests per second through the proxy vs `proxy-chain`
//      (npm, run under Node) in front of the same origin.
//
//   deno run -A bench/proxy_bench.ts [--mib 512] [--seconds 5] [--connections 8]
//     [--splice-relay PATH]
//
// --splice-relay runs a zero-copy C relay (bench/splice_relay.c, built with
// `gcc -O2 -pthread -o splice_relay bench/splice_relay.c`) as the ceiling of
// any userspace tunnel on the machine.
//
// proxy-chain is installed into a temporary folder with npm on first use.

import { parseArgs } from "node:util";
import { defaultNetworkProxyConfig } from "../src/proxy/config.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mib: { type: "string" },
    seconds: { type: "string" },
    connections: { type: "string" },
    "splice-relay": { type: "string" },
  },
});
const MIB = Number(values.mib ?? 512);
const SECONDS = Number(values.seconds ?? 5);
const CONNECTIONS = Number(values.connections ?? 8);
const encoder = new TextEncoder();

// --- 1. tunnel throughput ---

/** Runs `code` (a Deno script printing its port) in its own process. */
async function processWithPort(
  args: string[],
  command = Deno.execPath(),
): Promise<{ port: number; stop(): Promise<void> }> {
  const child = new Deno.Command(command, { args, stdout: "piped", stderr: "inherit" }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${args.join(" ")} did not start`);
    text += value;
  }
  reader.releaseLock();
  const line = text.slice(0, text.indexOf("\n"));
  const port = line.startsWith("{") ? Number(JSON.parse(line).http.split(":").pop()) : Number(line);
  return {
    port,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await child.stdout.cancel().catch(() => {});
    },
  };
}

function source() {
  const code = `const l = Deno.listen({ hostname: "127.0.0.1", port: 0 }); console.log(l.addr.port);
const chunk = new Uint8Array(256 * 1024).fill(97);
for await (const c of l) (async () => { let left = ${MIB} * 1024 * 1024;
  try { while (left > 0) left -= await c.write(left >= chunk.length ? chunk : chunk.subarray(0, left)); } catch {}
  c.close(); })();`;
  return processWithPort(["eval", code]);
}

async function drain(conn: Deno.Conn): Promise<number> {
  const buffer = new Uint8Array(256 * 1024);
  let total = 0;
  for (;;) {
    const n = await conn.read(buffer);
    if (n === null) return total;
    total += n;
  }
}

async function direct(port: number): Promise<number> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const t0 = performance.now();
  const bytes = await drain(conn);
  conn.close();
  return bytes / 1024 / 1024 / ((performance.now() - t0) / 1000);
}

async function tunnelled(proxyPort: number, port: number): Promise<number> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxyPort });
  conn.setNoDelay(true);
  await conn.write(
    encoder.encode(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`),
  );
  const head = new Uint8Array(1024);
  let got = "";
  let extra = 0;
  while (!got.includes("\r\n\r\n")) {
    const n = await conn.read(head);
    if (n === null) throw new Error("proxy closed");
    got += new TextDecoder().decode(head.subarray(0, n));
    const end = got.indexOf("\r\n\r\n");
    if (end !== -1) extra = got.length - end - 4;
  }
  const t0 = performance.now();
  const bytes = extra + await drain(conn);
  conn.close();
  return bytes / 1024 / 1024 / ((performance.now() - t0) / 1000);
}

// --- 2. requests per second ---

function origin() {
  const body = encoder.encode("hello from the origin\n");
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => new Response(body));
}

async function rps(proxyPort: number, originPort: number): Promise<number> {
  const request = encoder.encode(
    `GET http://127.0.0.1:${originPort}/ HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n\r\n`,
  );
  const deadline = performance.now() + SECONDS * 1000;
  let count = 0;
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxyPort });
    conn.setNoDelay(true);
    const buffer = new Uint8Array(64 * 1024);
    let pending = "";
    while (performance.now() < deadline) {
      await conn.write(request);
      for (;;) {
        const end = pending.indexOf("\r\n\r\n");
        if (end !== -1) {
          const length = Number(/content-length: *(\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
          if (pending.length >= end + 4 + length) {
            pending = pending.slice(end + 4 + length);
            break;
          }
        }
        const n = await conn.read(buffer);
        if (n === null) throw new Error("proxy closed the connection");
        pending += new TextDecoder().decode(buffer.subarray(0, n));
      }
      count++;
    }
    conn.close();
  }));
  return count / SECONDS;
}

async function proxyChain(): Promise<{ port: number; stop(): Promise<void> }> {
  const prefix = `${Deno.env.get("TMPDIR") ?? "/tmp"}/exec-server-bench-proxy-chain`;
  try {
    await Deno.stat(`${prefix}/node_modules/proxy-chain`);
  } catch {
    const npm = await new Deno.Command("npm", {
      args: ["install", "--silent", "--prefix", prefix, "proxy-chain@3.0.1"],
    }).output();
    if (!npm.success) throw new Error("npm install proxy-chain failed");
  }
  const script = `const ProxyChain = require('proxy-chain');
const server = new ProxyChain.Server({ port: 0, host: '127.0.0.1', verbose: false });
server.listen().then(() => console.log(server.port));`;
  const child = new Deno.Command("node", {
    args: ["-e", script],
    cwd: prefix,
    stdout: "piped",
    stderr: "inherit",
    env: { NODE_PATH: `${prefix}/node_modules` },
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("proxy-chain did not start");
    text += value;
  }
  reader.releaseLock();
  return {
    port: Number(text.trim()),
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await child.stdout.cancel().catch(() => {});
    },
  };
}

const dir = await Deno.makeTempDir();
await Deno.writeTextFile(
  `${dir}/proxy.json`,
  JSON.stringify({
    ...defaultNetworkProxyConfig(),
    enabled: true,
    allow_local_binding: true,
    domains: { "127.0.0.1": "allow" },
    enable_socks5: false,
  }),
);
const cli = new URL("../cli.ts", import.meta.url).pathname;
const oursProcess = await processWithPort([
  "run",
  "-A",
  cli,
  "proxy",
  "--config",
  `${dir}/proxy.json`,
  "--ephemeral",
  "--home",
  dir,
  "--log-level",
  "error",
]);
const ours = { addresses: { http: { port: oursProcess.port } } };
const src = await source();
// A plain userspace relay as the copy baseline (socat), when installed.
const relayPort = (() => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
})();
let socat: Deno.ChildProcess | null = null;
try {
  socat = new Deno.Command("socat", {
    args: [`TCP-LISTEN:${relayPort},bind=127.0.0.1,reuseaddr,fork`, `TCP:127.0.0.1:${src.port}`],
    stderr: "null",
  }).spawn();
  await new Promise((r) => setTimeout(r, 300));
} catch {
  socat = null;
}
const splice = values["splice-relay"]
  ? await processWithPort([String(src.port)], values["splice-relay"])
  : null;
const d = [];
const t = [];
const r = [];
const z = [];
for (let i = 0; i < 3; i++) {
  d.push(await direct(src.port));
  t.push(await tunnelled(ours.addresses.http!.port, src.port));
  if (socat) r.push(await direct(relayPort));
  if (splice) z.push(await direct(splice.port));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const relayText = socat
  ? `, socat relay ${median(r).toFixed(0)} MiB/s (tunnel/relay ${
    (median(t) / median(r)).toFixed(2)
  })`
  : "";
const spliceText = splice
  ? `, C splice relay ${median(z).toFixed(0)} MiB/s (splice/direct ${
    (median(z) / median(d)).toFixed(2)
  })`
  : "";
console.log(
  `tunnel_throughput: direct ${median(d).toFixed(0)} MiB/s, through CONNECT ${
    median(t).toFixed(0)
  } MiB/s, ` +
    `tunnel/direct ${
      (median(t) / median(d)).toFixed(2)
    }${relayText}${spliceText} (${MIB} MiB, median of 3)`,
);
await splice?.stop();
if (socat) {
  socat.kill("SIGTERM");
  await socat.status;
}
await src.stop();

const o = origin();
const chain = await proxyChain();
const ourRps = await rps(ours.addresses.http!.port, o.addr.port);
const chainRps = await rps(chain.port, o.addr.port);
const ourRps2 = await rps(ours.addresses.http!.port, o.addr.port);
const chainRps2 = await rps(chain.port, o.addr.port);
const a = Math.max(ourRps, ourRps2);
const b = Math.max(chainRps, chainRps2);
console.log(
  `http_rps: exec-server proxy ${a.toFixed(0)} req/s, proxy-chain 3.0.1 ${
    b.toFixed(0)
  } req/s, ratio ${
    (a / b).toFixed(2)
  } (${CONNECTIONS} keep-alive connections, ${SECONDS}s, best of 2)`,
);
await chain.stop();
await o.shutdown();
await oursProcess.stop();
await Deno.remove(dir, { recursive: true });
