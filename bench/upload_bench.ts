// Data coming in, side by side: `fs/writeFile` of 32 MiB whole (four, one after another), `fs/open` +
// `fs/writeBlock` of 256 MiB in 1 MiB blocks, and `process/write` of 256 MiB
// to `cat > /dev/null` in 1 MiB and 4 MiB chunks — over stdio and WebSocket
// (a frame per message, 16 MiB frames above), ours and the
// reference alternated per round. Reports throughput (MiB/s of payload,
// from the first byte sent to the last answer) and server CPU per GiB, the
// medians, and ours/reference. Requests are pipelined up to 4 in flight (a
// client that waits for each answer measures its own round trips). Both
// servers bound a stdio line at 64 MiB (a 64 MiB file's base64 is ~85 MiB:
// both close the connection), and a block at 1 MiB (the protocol's limit).
//
//   deno run -A bench/upload_bench.ts [--rounds 5] [--reference PATH] [--only writefile,writeblock,write1m,write4m] [--transport stdio,ws]

import {
  benchFlag,
  benchOptions,
  cache,
  cpu,
  median,
  type Server,
  startServers,
} from "./helpers.ts";

const { rounds, reference, transports } = benchOptions();
const only = benchFlag("only")?.split(",");
const MiB = 1024 * 1024;

/** A chunk of `size` bytes of varied content, as the ASCII bytes of its base64 (built once per size). */
const payloads = new Map<number, Uint8Array>();
function payload(size: number): Uint8Array {
  let text = payloads.get(size);
  if (text === undefined) {
    const bytes = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
    text = new TextEncoder().encode(bytes.toBase64());
    payloads.set(size, text);
  }
  return text;
}

/**
 * Sends `count` requests made by `make(i)` — method, params, and the member
 * that carries `data` — at most `window` unanswered; fails on an error answer.
 */
async function pipelined(
  s: Server,
  count: number,
  window: number,
  data: Uint8Array,
  make: (i: number) => [string, Record<string, unknown>, string],
): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  for (let i = 0; i < count; i++) {
    const [method, params, member] = make(i);
    const p: Promise<void> = s.requestWithPayload(method, params, member, data).then((answer) => {
      inFlight.delete(p);
      if ("error" in answer) {
        throw new Error(`${s.name} ${method}: ${JSON.stringify(answer.error)}`);
      }
    });
    inFlight.add(p);
    if (inFlight.size >= window) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}

interface Workload {
  readonly name: string;
  /** Payload bytes moved. */
  readonly bytes: number;
  /** Set-up not measured; returns the measured run and its clean-up. */
  prepare(s: Server, round: number): Promise<{ run(): Promise<void>; done(): Promise<void> }>;
}

const dir = () => Deno.makeTempDirSync({ dir: cache, prefix: "upload-" });

const processWrite = (chunk: number): Workload => ({
  name: `write${chunk / MiB}m`,
  bytes: 256 * MiB,
  async prepare(s, round) {
    const id = `cat-${chunk}-${round}`;
    const started = await s.request("process/start", {
      processId: id,
      argv: ["/bin/sh", "-c", "cat > /dev/null"],
      cwd: "file:///",
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      pipeStdin: true,
    });
    if ("error" in started) throw new Error(`${s.name}: ${JSON.stringify(started.error)}`);
    const data = payload(chunk);
    return {
      run: () =>
        pipelined(s, (256 * MiB) / chunk, 4, data, (i) => [
          "process/write",
          { processId: id, writeId: `w${i}` },
          "chunk",
        ]),
      done: async () => {
        await s.request("process/terminate", { processId: id });
      },
    };
  },
});

const all: Workload[] = [
  {
    name: "writefile",
    bytes: 4 * 32 * MiB,
    prepare(s) {
      const d = dir();
      const data = payload(32 * MiB);
      return Promise.resolve({
        run: () =>
          pipelined(s, 4, 1, data, (i) => [
            "fs/writeFile",
            { path: `file://${d}/whole-${i}.bin` },
            "dataBase64",
          ]),
        done: () => Deno.remove(d, { recursive: true }),
      });
    },
  },
  {
    name: "writeblock",
    bytes: 256 * MiB,
    async prepare(s, round) {
      const d = dir();
      const handleId = `h${round}`;
      const opened = await s.request("fs/open", {
        handleId,
        path: `file://${d}/blocks.bin`,
        mode: "replace",
      });
      if ("error" in opened) throw new Error(`${s.name}: ${JSON.stringify(opened.error)}`);
      const data = payload(MiB);
      return {
        run: async () => {
          await pipelined(s, 256, 4, data, (i) => [
            "fs/writeBlock",
            { handleId, offset: i * MiB },
            "chunk",
          ]);
          const closed = await s.request("fs/close", { handleId });
          if ("error" in closed) throw new Error(`${s.name}: ${JSON.stringify(closed.error)}`);
        },
        done: () => Deno.remove(d, { recursive: true }),
      };
    },
  },
  processWrite(1 * MiB),
  processWrite(4 * MiB),
];
const workloads = all.filter((w) => !only || only.includes(w.name));

const results = new Map<string, { rate: number[]; cpu: number[] }>();
for (const transport of transports) {
  const servers = await startServers(reference, "upload-bench", transport);
  try {
    for (const w of workloads) {
      for (let round = 0; round < rounds; round++) {
        // Alternate who goes first.
        const order = round % 2 === 0 ? servers : [...servers].reverse();
        for (const s of order) {
          const { run, done } = await w.prepare(s, round);
          const [before] = cpu(s.child.pid);
          const t0 = performance.now();
          await run();
          const seconds = (performance.now() - t0) / 1000;
          const [after] = cpu(s.child.pid);
          await done();
          const key = `${s.name} ${transport} ${w.name}`;
          const r = results.get(key) ?? { rate: [], cpu: [] };
          r.rate.push(w.bytes / MiB / seconds);
          r.cpu.push((after - before) / (w.bytes / (1024 * MiB)));
          results.set(key, r);
        }
      }
    }
  } finally {
    for (const s of servers) await s.close();
  }
}
for (const transport of transports) {
  for (const w of workloads) {
    const ours = results.get(`ours ${transport} ${w.name}`)!;
    const label = (who: string) => `${who}/${transport}`.padEnd(12);
    console.log(
      `${label("ours")}${w.name.padEnd(10)} ${median(ours.rate).toFixed(1)} MiB/s  ${
        median(ours.cpu).toFixed(2)
      } s/GiB`,
    );
    const ref = results.get(`reference ${transport} ${w.name}`);
    if (!ref) continue;
    console.log(
      `${label("ref")}${w.name.padEnd(10)} ${median(ref.rate).toFixed(1)} MiB/s  ${
        median(ref.cpu).toFixed(2)
      } s/GiB`,
    );
    console.log(
      `${label("ours/ref")}${w.name.padEnd(10)} ${
        (median(ours.rate) / median(ref.rate)).toFixed(2)
      }x throughput  ${(median(ours.cpu) / median(ref.cpu)).toFixed(2)}x cpu`,
    );
  }
}
