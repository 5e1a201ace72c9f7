// The floor under scale_bench's `procs` CPU per process: what a minimal Deno
// program pays to start, read and reap one child the way the server does
// (`setsid sh -c 'head -c 65536 /dev/zero'`, three pipes, stdout read to the
// end), with none of the server's work (no JSON-RPC, no output log, no
// base64, no notifications) — and how that grows with the program's own
// resident size, since posix_spawn from a larger process costs more.
// Numbers only, not a test. Compare with scale_bench's `procs`:
// ours vs the reference's CPU per process.
//
//   deno run -A bench/spawn_floor_bench.ts [--processes 300] [--ballast 0,100,250]
//
// Measured 2026-12-04 on the 2-core VM: 1.2–1.7 ms per process across runs
// at 70–330 MiB RSS (the growth with size is within the runs' spread); the
// server needs 3.25 ms at N = 100 (reference 2.35).

function flag(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1]! : fallback;
}

function cpuMs(): number {
  const fields = Deno.readTextFileSync("/proc/self/stat").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const processes = Number(flag("processes", "300"));
const ballast: Uint8Array[] = [];
for (const mib of flag("ballast", "0,100,250").split(",").map(Number)) {
  // Grow the program to `mib` MiB of touched memory (cumulative).
  while (ballast.length < mib) ballast.push(new Uint8Array(1 << 20).fill(1));
  const before = cpuMs();
  const started = performance.now();
  await Promise.all(Array.from({ length: processes }, async () => {
    const child = new Deno.Command("/usr/bin/setsid", {
      args: ["sh", "-c", "head -c 65536 /dev/zero"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    await child.stdin.close();
    let bytes = 0;
    for await (const chunk of child.stdout) bytes += chunk.length;
    await child.stderr.cancel();
    await child.status;
    if (bytes !== 65536) throw new Error(`read ${bytes} bytes`);
  }));
  const rss = Deno.memoryUsage().rss / 2 ** 20;
  console.log(
    `rss ${rss.toFixed(0)} MiB: ${
      ((cpuMs() - before) / processes).toFixed(2)
    } ms CPU per process, ` +
      `${(performance.now() - started).toFixed(0)} ms for ${processes}`,
  );
}
