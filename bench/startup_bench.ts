// Start-up: how long a harness that spawns `serve --listen stdio` waits for
// the answer to its first `initialize`, and the server's RSS at that moment
// — ours (`deno run -A cli.ts`, warm module cache; or a compiled binary with
// --ours-bin) against the reference binary, alternated round by round.
//
//   deno run -A bench/startup_bench.ts [--rounds 10] [--ours-bin PATH]
//
// Prints each round and the medians, and the ratio ours/reference.

import { referenceBin } from "../tests/helpers/reference.ts";

const args = Deno.args;
const flag = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const rounds = Number(flag("--rounds") ?? "10");
const oursBin = flag("--ours-bin");
const root = new URL("../", import.meta.url).pathname;

interface Sample {
  ms: number;
  rssKiB: number;
}

function rssKiB(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? "0");
  } catch {
    return 0;
  }
}

async function once(command: string[], env: Record<string, string>): Promise<Sample> {
  const started = performance.now();
  const child = new Deno.Command(command[0]!, {
    args: command.slice(1),
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { clientName: "startup-bench" },
    }) + "\n",
  ));
  const reader = child.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("server closed before answering initialize");
    text += new TextDecoder().decode(value);
  }
  const ms = performance.now() - started;
  const rss = rssKiB(child.pid);
  if (!text.includes('"result"')) throw new Error(`initialize failed: ${text}`);
  await writer.close().catch(() => {});
  reader.releaseLock();
  await child.stdout.cancel().catch(() => {});
  try {
    child.kill("SIGKILL");
  } catch { /* gone */ }
  await child.status;
  return { ms, rssKiB: rss };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const ref = referenceBin();
if (!ref) throw new Error("no reference binary (run tests/setup.sh)");
const codexHome = await Deno.makeTempDir();
const ours = oursBin
  ? [oursBin, "serve", "--listen", "stdio"]
  : [Deno.execPath(), "run", "-A", `${root}cli.ts`, "serve", "--listen", "stdio"];
const theirs = [ref, "exec-server", "--listen", "stdio"];
const env = { CODEX_HOME: codexHome, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" };

// Warm both (module cache, page cache).
await once(ours, env);
await once(theirs, env);
const samples: Record<"ours" | "reference", Sample[]> = { ours: [], reference: [] };
for (let i = 0; i < rounds; i++) {
  const order: Array<["ours" | "reference", string[]]> = i % 2 === 0
    ? [["ours", ours], ["reference", theirs]]
    : [["reference", theirs], ["ours", ours]];
  for (const [name, command] of order) samples[name].push(await once(command, env));
  console.log(
    `round ${i + 1}: ours ${samples.ours.at(-1)!.ms.toFixed(1)} ms ${
      samples.ours.at(-1)!.rssKiB
    } KiB, reference ${samples.reference.at(-1)!.ms.toFixed(1)} ms ${
      samples.reference.at(-1)!.rssKiB
    } KiB`,
  );
}
const o = median(samples.ours.map((s) => s.ms));
const r = median(samples.reference.map((s) => s.ms));
const oRss = median(samples.ours.map((s) => s.rssKiB));
const rRss = median(samples.reference.map((s) => s.rssKiB));
console.log(
  `median first initialize: ours ${o.toFixed(1)} ms, reference ${r.toFixed(1)} ms, ratio ${
    (o / r).toFixed(2)
  }`,
);
console.log(
  `median RSS then: ours ${(oRss / 1024).toFixed(1)} MiB, reference ${
    (rRss / 1024).toFixed(1)
  } MiB, ratio ${(oRss / rRss).toFixed(2)}`,
);
await Deno.remove(codexHome, { recursive: true });
