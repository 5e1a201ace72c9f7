// The server's own CPU per unit of work, the figure that regresses first and
// that wall time on a shared VM hides: per `fs/getMetadata` sent one at a
// time and 64 at a time, per exec of `/bin/true`, and per MiB of process
// output. Ours, and the reference side by side when given (alternating
// rounds, medians).
//
//   deno run -A bench/cpu_bench.ts [--reference PATH] [--rounds 3] [--scale 1]
//
// Not a test: numbers only (CI never fails on a slow machine).

import { parseArgs } from "node:util";
import { cache, cpu, median, type Server, startServers } from "./helpers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    reference: { type: "string" },
    rounds: { type: "string", default: "3" },
    scale: { type: "string", default: "1" },
  },
});
const rounds = Number(values.rounds);
const scale = Number(values.scale);
const reference = values.reference ?? Deno.env.get("CODEX_REFERENCE_BIN") ?? null;
const servers = await startServers(reference, "cpu_bench");
const dir = Deno.makeTempDirSync({ dir: cache, prefix: "cpu-bench-" });
Deno.writeTextFileSync(`${dir}/small.txt`, "small\n");
const path = `file://${dir}/small.txt`;

type Work = (s: Server, tag: string) => Promise<number>;
let n = 0;
const workloads: Record<string, { unit: string; run: Work }> = {
  rpc_seq_cpu: {
    unit: "µs/req",
    async run(s) {
      const count = Math.round(2000 * scale);
      for (let i = 0; i < count; i++) await s.request("fs/getMetadata", { path });
      return count / 1e6;
    },
  },
  rpc_pipelined_cpu: {
    unit: "µs/req",
    async run(s) {
      const count = Math.round(20000 * scale);
      let sent = 0;
      await Promise.all(Array.from({ length: 64 }, async () => {
        while (sent < count) {
          sent++;
          await s.request("fs/getMetadata", { path });
        }
      }));
      return count / 1e6;
    },
  },
  exec_cpu: {
    unit: "ms/exec",
    async run(s, tag) {
      const count = Math.round(100 * scale);
      for (let i = 0; i < count; i++) await s.exec(`${tag}-${++n}`, dir);
      return count / 1e3;
    },
  },
  stdout_cpu: {
    unit: "s/GiB",
    async run(s, tag) {
      const mib = Math.max(1, Math.round(64 * scale));
      await s.exec(`${tag}-${++n}`, dir, undefined, ["head", "-c", String(mib << 20), "/dev/zero"]);
      return mib / 1024;
    },
  },
};

for (const [name, { unit, run }] of Object.entries(workloads)) {
  const figures = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? servers : [...servers].reverse();
    for (const s of order) {
      const [before] = cpu(s.child.pid);
      const work = await run(s, `${name}${round}`);
      const [after] = cpu(s.child.pid);
      figures.set(s.name, [...(figures.get(s.name) ?? []), (after - before) / work]);
    }
  }
  const line = [...figures].map(([server, xs]) => `${server} ${median(xs).toFixed(2)} ${unit}`);
  const a = figures.get("ours");
  const b = figures.get("reference");
  if (a && b) line.push(`ours/reference ${(median(a) / median(b)).toFixed(2)}×`);
  console.log(`${name}: ${line.join(", ")}`);
}
for (const s of servers) await s.close();
Deno.removeSync(dir, { recursive: true });
