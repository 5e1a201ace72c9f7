// Transparent TCP throughput, side by side: a sandboxed `bash` reads a large
// HTTP response over a raw `/dev/tcp` connection (captured, put through the
// launched proxy's policy, relayed) on our server and on the reference,
// alternating rounds. Numbers only, not a test.
//
//   deno run -A bench/transparent_tcp_bench.ts [--mib 200] [--rounds 2]
//
// Measured 2026-12-04 on the 2-core VM: with a 1500-byte MTU on the capture
// device (one FFI read per packet) ours moved 20 MiB/s against the
// reference's 129–141; with a 64 KiB MTU (the kernel's TCP then sends
// 64 KiB segments through the device) 250–342 MiB/s (reference 143–144 in
// the same runs).

import { parseArgs } from "node:util";
import {
  type NamedServer,
  oursServer,
  READ_ONLY,
  referenceServer,
  runSandboxed,
  sandboxContext,
} from "../tests/helpers/sandbox.ts";
import { scratchRoot } from "../tests/helpers/reference.ts";
import { launchedProxy } from "../tests/helpers/proxy.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { mib: { type: "string", default: "200" }, rounds: { type: "string", default: "2" } },
});
const mib = Number(values.mib);
const host = Deno.networkInterfaces()
  .find((i) => i.family === "IPv4" && !i.address.startsWith("127."))?.address;
if (!host) throw new Error("needs a non-loopback IPv4 address to connect to");
const chunk = new Uint8Array(1 << 20);
const origin = Deno.serve({ hostname: "0.0.0.0", port: 0, onListen() {} }, () => {
  let sent = 0;
  return new Response(
    new ReadableStream({ pull: (c) => sent++ < mib ? c.enqueue(chunk) : c.close() }),
  );
});
const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "ttcp-bench-" });
const script = `s=$(date +%s%N); bash -c 'exec 3<>/dev/tcp/${host}/${origin.addr.port}; ` +
  `printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3 | wc -c'; e=$(date +%s%N); ` +
  `echo ms=$(( (e-s)/1000000 ))`;

async function round(named: NamedServer): Promise<number> {
  await using server = named.server;
  await server.client.initialize();
  const run = await runSandboxed(server.client, ws, script, sandboxContext(ws, READ_ONLY), {
    enforceManagedNetwork: true,
    networkProxy: {
      proxy: launchedProxy({ transparentTcp: true, domains: { [host!]: "allow" } }),
    },
  });
  const ms = Number(/ms=(\d+)/.exec(run.stdout)?.[1]);
  const bytes = Number(/^(\d+)$/m.exec(run.stdout)?.[1]);
  if (!ms || !(bytes > mib * chunk.length)) {
    throw new Error(`${named.name}: ${run.stdout} ${run.stderr}`);
  }
  return mib / (ms / 1000);
}

try {
  for (let r = 0; r < Number(values.rounds); r++) {
    for (
      const make of r % 2 === 0 ? [oursServer, referenceServer] : [referenceServer, oursServer]
    ) {
      const named = make();
      if (named) console.log(`${named.name.padEnd(9)} ${(await round(named)).toFixed(0)} MiB/s`);
    }
  }
} finally {
  await origin.shutdown();
  await Deno.remove(ws, { recursive: true });
}
