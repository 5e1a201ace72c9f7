// What a burst of large work leaves behind: the server's RSS at idle, right
// after the burst (five 64 MiB `fs/readFile`s, one exec writing 64 MiB to
// stdout, 32 parallel execs writing 8 MiB each), and 5, 30 and 90 s later
// (exited processes, with their last MiB of output, are kept for 80 s).
// Ours, and the reference side by side when given.
//
//   deno run -A bench/memory_bench.ts [--reference PATH] [--scale 1]
//
// Not a test: numbers only.

import { parseArgs } from "node:util";
import { cache, type Server, startServers } from "./helpers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { reference: { type: "string" }, scale: { type: "string", default: "1" } },
});
const scale = Number(values.scale);
const reference = values.reference ?? Deno.env.get("CODEX_REFERENCE_BIN") ?? null;
const servers = await startServers(reference, "memory_bench");
const dir = Deno.makeTempDirSync({ dir: cache, prefix: "memory-bench-" });
const mib = Math.max(1, Math.round(64 * scale));
{
  using file = Deno.openSync(`${dir}/big.bin`, { write: true, create: true });
  file.truncateSync(mib << 20);
}

function rssMiB(s: Server): number {
  const status = Deno.readTextFileSync(`/proc/${s.child.pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

let n = 0;
async function burst(s: Server): Promise<void> {
  for (let i = 0; i < 5; i++) {
    const answer = await s.request("fs/readFile", { path: `file://${dir}/big.bin` });
    if ("error" in answer) throw new Error(`${s.name}: ${JSON.stringify(answer.error)}`);
  }
  await s.exec(`mem-${++n}`, dir, undefined, ["head", "-c", String(mib << 20), "/dev/zero"]);
  await Promise.all(
    Array.from(
      { length: 32 },
      () =>
        s.exec(`mem-${++n}`, dir, undefined, [
          "head",
          "-c",
          String((mib >> 3 || 1) << 20),
          "/dev/zero",
        ]),
    ),
  );
}

const rows = new Map<string, number[]>();
for (const s of servers) rows.set(s.name, [rssMiB(s)]);
for (const s of servers) {
  await burst(s);
  rows.get(s.name)!.push(rssMiB(s));
}
const started = performance.now();
for (const at of [5, 30, 90]) {
  await new Promise((resolve) =>
    setTimeout(resolve, Math.max(0, at * 1000 - (performance.now() - started)))
  );
  for (const s of servers) rows.get(s.name)!.push(rssMiB(s));
}
for (const [name, [idle, after, at5, at30, at90]] of rows) {
  console.log(
    `${name}: idle ${idle!.toFixed(0)} MiB, after the burst ${after!.toFixed(0)}, ` +
      `+5 s ${at5!.toFixed(0)}, +30 s ${at30!.toFixed(0)} (${(at30! / idle!).toFixed(2)}× idle), ` +
      `+90 s (exited processes forgotten) ${at90!.toFixed(0)} (${
        (at90! / idle!).toFixed(2)
      }× idle)`,
  );
}
const ours = rows.get("ours");
const ref = rows.get("reference");
if (ours && ref) {
  console.log(
    `ours/reference: after ${(ours[1]! / ref[1]!).toFixed(2)}×, ` +
      `+30 s ${(ours[3]! / ref[3]!).toFixed(2)}×, +90 s ${(ours[4]! / ref[4]!).toFixed(2)}×`,
  );
}
for (const s of servers) await s.close();
Deno.removeSync(dir, { recursive: true });
