import { assert, assertEquals } from "./helpers/assert.ts";
import { HistoryBudget, OutputLog } from "../src/process/output_log.ts";
import { CLI, eventually } from "./helpers/wire_client.ts";
import { connect } from "../src/client/client.ts";

const chunk = (n: number) => ({
  kind: "output" as const,
  stream: "stdout" as const,
  chunk: new Uint8Array(n),
});

function deliverAll(log: OutputLog, chunks: number, size: number): void {
  for (let i = 0; i < chunks; i++) log.append(chunk(size));
  log.markDelivered(log.nextSeq - 1);
}

Deno.test("output log: processes share a history budget; the oldest histories go first", () => {
  const budget = new HistoryBudget(100);
  const a = new OutputLog({ retainBytes: 80, budget });
  const b = new OutputLog({ retainBytes: 80, budget });
  deliverAll(a, 8, 10);
  assertEquals([a.historyBytes, budget.total], [80, 80]);
  deliverAll(b, 6, 10);
  // 140 > 100: a (older) gives up 40; b keeps its 60.
  assertEquals([a.historyBytes, b.historyBytes, budget.total], [40, 60, 100]);
  assertEquals(a.read(0).chunks.map((c) => c.seq), [5, 6, 7, 8], "the oldest chunks went");
  // A log on hold (a client may resume from it) is not trimmed.
  b.holdHistory();
  deliverAll(a, 3, 10);
  assert(b.historyBytes === 60);
  assert(budget.total <= 100, `total ${budget.total}`);
  // Undelivered output is never trimmed.
  for (let i = 0; i < 20; i++) a.append(chunk(10));
  assertEquals(a.undeliveredBytes, 200);
  // A disposed log leaves the budget.
  a.dispose();
  assertEquals(budget.total, 60);
  b.dispose();
  assertEquals(budget.total, 0);
});

/** The process whose environment carries `marker`. */
function serverPid(marker: string): number {
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      if (Deno.readTextFileSync(`/proc/${entry.name}/environ`).includes(marker)) {
        return Number(entry.name);
      }
    } catch { /* gone or not ours */ }
  }
  throw new Error("server process not found");
}

Deno.test("server memory: after a burst of large replies, an idle server gives the memory back", async () => {
  const dir = await Deno.makeTempDir();
  const marker = `memory-test-${crypto.randomUUID()}`;
  await using client = await connect({
    command: {
      program: Deno.execPath(),
      args: ["run", "-A", CLI, "serve", "--listen", "stdio", "--log-level", "error"],
      env: { EXEC_SERVER_TEST_MARKER: marker },
    },
  });
  try {
    await Deno.writeFile(`${dir}/big.bin`, new Uint8Array(24 * 1024 * 1024).fill(7));
    const pid = serverPid(marker);
    const rss = () => {
      const status = Deno.readTextFileSync(`/proc/${pid}/status`);
      return Number(/^VmRSS:\s+(\d+)/m.exec(status)![1]) * 1024;
    };
    const idle = rss();
    let peak = idle;
    for (let i = 0; i < 4; i++) {
      const bytes = await client.fs.readFile(`${dir}/big.bin`);
      assertEquals(bytes.byteLength, 24 * 1024 * 1024);
      peak = Math.max(peak, rss());
    }
    // Without the trimmer the server stays at its peak; with it, most of the
    // growth goes back a second or so after the work.
    assert(
      await eventually(() => rss() < idle + (peak - idle) / 2, 15_000),
      `still ${rss()} bytes (idle ${idle}, peak ${peak})`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
