import { assert, assertEquals } from "../helpers/assert.ts";
import { HistoryBudget, OutputLog } from "../../src/process/output_log.ts";

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

// How much memory a server gives back after a burst is measured by
// `deno task bench:memory` (RSS idle, after, +5/+30/+90 s, side by side with
// the reference): a threshold reached by timing is not a test.
