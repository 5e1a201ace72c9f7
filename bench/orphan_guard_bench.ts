// What keeping children from outliving their server costs per start, for
// the ways considered (not a test: numbers only):
//   setsid        the start as it is (`setsid PROGRAM`); the supervisor adds
//                 one short line on a pipe, measured as "guard write"
//   pdeathsig     a parent-death signal through a wrapper exec per child
//                 (`setsid setpriv --pdeathsig KILL -- PROGRAM`); it would
//                 also miss grandchildren
// and the supervisor's resident memory.
//
//   deno run -A bench/orphan_guard_bench.ts [--starts 300]

import { OrphanGuard } from "../src/process/orphan_guard.ts";
import { nullLogger } from "../src/log/logger.ts";
import { median } from "./helpers.ts";

const at = Deno.args.indexOf("--starts");
const starts = at >= 0 ? Number(Deno.args[at + 1]) : 300;

function cpuMs(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
  return (f[11]! + f[12]! + f[13]! + f[14]!) * 10; // self + reaped children, ticks of 10 ms
}

async function run(argv: string[]): Promise<{ wall: number; cpu: number }> {
  const walls: number[] = [];
  const cpu0 = cpuMs();
  for (let i = 0; i < starts; i++) {
    const t = performance.now();
    const child = new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdout: "null",
      stderr: "null",
    })
      .spawn();
    await child.status;
    walls.push(performance.now() - t);
  }
  return { wall: median(walls), cpu: (cpuMs() - cpu0) / starts };
}

const variants: Record<string, string[]> = {
  setsid: ["setsid", "true"],
  pdeathsig: ["setsid", "setpriv", "--pdeathsig", "KILL", "--", "true"],
};
for (let round = 0; round < 2; round++) {
  for (const [name, argv] of Object.entries(variants)) {
    const { wall, cpu } = await run(argv);
    console.log(
      `${name.padEnd(10)} start+exit p50 ${wall.toFixed(2)} ms, CPU ${cpu.toFixed(2)} ms per start`,
    );
  }
}

const guard = new OrphanGuard(nullLogger);
const t = performance.now();
const releases = Array.from({ length: 10_000 }, (_, i) => guard.watch(4_000_000 + i));
for (const release of releases) release();
console.log(`guard write: ${((performance.now() - t) / 20_000 * 1000).toFixed(2)} µs per line`);
const pid = Number(
  new TextDecoder().decode(
    (await new Deno.Command("pgrep", { args: ["-n", "-f", "declare -A groups"] }).output()).stdout,
  ).trim(),
);
const rss = /^VmRSS:\s+(\d+)/m.exec(Deno.readTextFileSync(`/proc/${pid}/status`))?.[1];
console.log(`supervisor: one bash per server, RSS ${rss} kB`);
await guard.close();
