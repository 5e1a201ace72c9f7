// A child that never reads its stdin, flooded: 30 × 4 MiB `process/write`
// sent back to back on one connection (stdio and WebSocket, a frame per
// message), then an unrelated `fs/getMetadata`. Reports how long the server
// took to take the 30 writes (until the pipe or socket had all their bytes)
// and how long the unrelated request waited, from when it was sent — ours
// and the reference alternated, with the floor: bench/flood_floor_server.ts,
// which only reads and frames the bytes and answers at once (taken + waited
// is the time to the unrelated answer; each server's is given as a multiple
// of the floor's). The client writes pre-encoded payloads, so it measures
// the server, not itself.
//
//   deno run -A bench/stdin_flood_bench.ts [--rounds 5] [--reference PATH] [--transport stdio,ws]

import { benchOptions, median, Server, startServers } from "./helpers.ts";

const { rounds, reference, transports } = benchOptions();
const chunk = new TextEncoder().encode(new Uint8Array(4 * 1024 * 1024).fill(97).toBase64());

async function round(s: Server, r: number): Promise<[number, number]> {
  const processId = `p${r}`;
  const started = await s.request("process/start", {
    processId,
    argv: ["sleep", "60"],
    cwd: "file:///tmp",
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
    pipeStdin: true,
  });
  if ("error" in started) throw new Error(`${s.name}: ${JSON.stringify(started.error)}`);
  const answers: Promise<unknown>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < 30; i++) {
    answers.push(
      (await s.sendWithPayload("process/write", { processId, writeId: `w${i}` }, "chunk", chunk))
        .answer,
    );
  }
  const taken = performance.now();
  const meta = await s.request("fs/getMetadata", { path: "file:///tmp" });
  const waited = performance.now() - taken;
  if ("error" in meta) throw new Error(`${s.name}: ${JSON.stringify(meta.error)}`);
  await s.request("process/terminate", { processId });
  await Promise.all(answers);
  return [taken - t0, waited];
}

for (const transport of transports) {
  const servers = await startServers(reference, "flood-bench", transport);
  const floor = new Server(
    "floor",
    Deno.execPath(),
    ["run", "-A", new URL("./flood_floor_server.ts", import.meta.url).pathname, transport],
    {},
    transport,
  );
  await floor.ready;
  servers.push(floor);
  const results: Record<string, { taken: number[]; waited: number[] }> = {};
  try {
    for (let r = 0; r < rounds; r++) {
      for (const s of r % 2 === 0 ? servers : [...servers].reverse()) {
        const [taken, waited] = await round(s, r);
        (results[s.name] ??= { taken: [], waited: [] }).taken.push(taken);
        results[s.name]!.waited.push(waited);
      }
    }
  } finally {
    for (const s of servers) await s.close();
  }
  const total = (name: string) =>
    median(results[name]!.taken.map((t, i) => t + results[name]!.waited[i]!));
  for (const [name, { taken, waited }] of Object.entries(results)) {
    const ratio = name === "floor"
      ? ""
      : `; to the answer ${(total(name) / total("floor")).toFixed(2)}x the floor's`;
    console.log(
      `${`${name}/${transport}`.padEnd(16)} 30 x 4 MiB taken in ${median(taken).toFixed(0)} ms; ` +
        `unrelated request answered ${
          median(waited).toFixed(0)
        } ms after it was sent (medians of ${rounds})${ratio}`,
    );
  }
}
