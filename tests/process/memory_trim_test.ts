// The memory trimmer's schedule (src/util/memory_trim.ts), with its resident
// and buffer sizes, its trim and its clock injected: a burst is returned,
// live memory is not collected over and over (nor at all without a burst of
// buffers), and an idle server has no timer.

import { assertEquals } from "../helpers/assert.ts";
import { MemoryTrimmer } from "../../src/util/memory_trim.ts";

const MiB = 1024 * 1024;

/**
 * A trimmer over a fake process: `rss` is what it holds, `external` its
 * buffers; a collection frees `garbage` (buffers), any trim `free` (pages
 * glibc held free).
 */
function fakeProcess(
  quietMs = 0,
  thresholds: { growthBytes?: number } = { growthBytes: 32 * MiB },
) {
  const state = {
    rss: 100 * MiB,
    external: 1 * MiB,
    garbage: 0,
    free: 0,
    now: 0,
    trims: 0,
    collections: 0,
  };
  const waiters: Array<{ kind: "check" | "trim"; resolve: () => void }> = [];
  const wake = (kind: "check" | "trim") => {
    for (const w of waiters.splice(0)) {
      if (w.kind === kind) w.resolve();
      else waiters.push(w);
    }
  };
  const trimmer = new MemoryTrimmer({
    quietMs,
    checkMs: 5,
    ...thresholds,
    now: () => state.now,
    memory: () => {
      queueMicrotask(() => wake("check"));
      return { rss: state.rss, external: state.external };
    },
    trim: (collect) => {
      state.trims++;
      if (collect) {
        state.collections++;
        state.rss -= state.garbage;
        state.external -= state.garbage;
        state.garbage = 0;
      }
      state.rss -= state.free;
      state.free = 0;
      queueMicrotask(() => wake("trim"));
      return Promise.resolve();
    },
  });
  // The trimmer's timers never hold the process open: a ref'd one does
  // while the test waits.
  // A wait that never ends fails after 20 s instead of hanging the suite.
  const next = async (kind: "check" | "trim") => {
    let hold: ReturnType<typeof setTimeout> | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        waiters.push({ kind, resolve });
        hold = setTimeout(() => reject(new Error(`no ${kind} came`)), 20_000);
      });
    } finally {
      clearTimeout(hold);
    }
  };
  /** Work happens; waits for what the trimmer does next. */
  const work = (then: "check" | "trim") => {
    trimmer.note();
    return next(then);
  };
  return { state, trimmer, work, next };
}

Deno.test("memory trim: a burst is returned, and the next work looks again a check later", async () => {
  const { state, trimmer, work } = fakeProcess();
  state.rss += 200 * MiB; // 200 MiB of output chunks
  state.external += 200 * MiB;
  state.garbage = 100 * MiB;
  await work("trim");
  // 100 MiB came back and 100 MiB is still up (a reply being written when
  // it ran, since sent): work a check later trims again.
  state.garbage = 100 * MiB;
  state.now += 5;
  await work("trim");
  assertEquals([state.trims, state.collections, state.rss], [2, 2, 100 * MiB]);
  await trimmer.close();
});

Deno.test("memory trim: live memory (many sessions) is collected once, not on every check, and never while idle", async () => {
  const { state, trimmer, work } = fakeProcess();
  state.rss += 300 * MiB; // a thousand sessions: all of it live, few buffers
  state.external += 20 * MiB;
  state.free = 10 * MiB; // what their starts allocated and freed
  await work("trim");
  // Pages handed back without a collection of the heap; little came back.
  assertEquals([state.trims, state.collections, state.rss], [1, 0, 390 * MiB]);
  // More work, no growth, within the back-off: checked, not collected.
  state.now += 5;
  await work("check");
  assertEquals(state.trims, 1);
  // New growth is worth another look at once.
  state.rss += 20 * MiB;
  state.free = 20 * MiB;
  await work("trim");
  assertEquals([state.trims, state.collections, state.rss], [2, 0, 390 * MiB]);
  // Past the back-off, work gets one more look (sessions may have closed).
  state.now += 60_000;
  state.free = 150 * MiB;
  await work("trim");
  assertEquals([state.trims, state.collections, state.rss], [3, 0, 240 * MiB]);
  await trimmer.close();
});

Deno.test("memory trim: by default 8 MiB of growth is trimmed, and only 32 MiB of new buffers is collected", async () => {
  const { state, trimmer, work } = fakeProcess(0, {});
  // A hundred connections' first requests: compiler memory glibc holds free,
  // and the sessions' live buffers (collecting them would find nothing).
  state.rss += 10 * MiB;
  state.external += 20 * MiB;
  state.free = 9 * MiB;
  await work("trim");
  assertEquals([state.trims, state.collections, state.rss], [1, 0, 101 * MiB]);
  // A burst of output: 40 MiB more buffers, now garbage.
  state.now += 1000;
  state.rss += 40 * MiB;
  state.external += 40 * MiB;
  state.garbage = 40 * MiB;
  await work("trim");
  assertEquals([state.trims, state.collections, state.rss], [2, 1, 101 * MiB]);
  await trimmer.close();
});

Deno.test("memory trim: after a trim that returned little, no timer is left behind", async () => {
  const { state, trimmer, work } = fakeProcess();
  state.rss += 300 * MiB;
  await work("trim");
  // The resource sanitizer fails this test if a timer is still pending;
  // none is cleared by hand here (close() is only called at the end, after
  // the check that nothing is armed: another note would arm one).
  await new Promise((resolve) => setTimeout(resolve, 20));
  assertEquals(state.trims, 1);
  await trimmer.close();
});

Deno.test("memory trim: a trim whose memory is needed again at once makes the next wait longer; a long pause shortens it", async () => {
  const { state, trimmer, next } = fakeProcess(100);
  const burst = () => {
    state.rss += 200 * MiB;
    state.free = 180 * MiB;
  };
  burst();
  trimmer.note();
  state.now = 100; // quiet for the base time: trimmed
  await next("trim");
  assertEquals([state.trims, state.rss], [1, 120 * MiB]);
  // Work again 200 ms after the trim (a pause of 300 ms since the burst),
  // and the memory it returned is back: that trim was premature, so this
  // one waits half as long again as that pause — 450 ms, more than twice
  // the quiet time: at 250 ms there is a check and no trim.
  state.now = 300;
  burst();
  trimmer.note();
  state.now = 550;
  await next("check");
  assertEquals(state.trims, 1);
  state.now = 750;
  await next("trim");
  assertEquals([state.trims, state.rss], [2, 140 * MiB]);
  // Work after a long pause: that trim was right; the wait halves back.
  state.now = 10_000;
  burst();
  trimmer.note();
  state.now = 10_225;
  await next("trim");
  assertEquals([state.trims, state.rss], [3, 160 * MiB]);
  await trimmer.close();
});

Deno.test("memory trim: a process's output counts as work (no trim while it streams)", async () => {
  const { spawnChild } = await import("../../src/process/spawn.ts");
  const { ManagedProcess } = await import("../../src/process/managed_process.ts");
  let chunks = 0;
  const process = new ManagedProcess({
    id: "streaming",
    child: spawnChild({
      argv: ["sh", "-c", "for i in 1 2 3; do head -c 100000 /dev/zero; sleep 0.05; done"],
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      stdin: "null",
    }),
    onOutput: () => chunks++,
  });
  await process.finished;
  await process.dispose();
  let bytes = 0;
  let events = 0;
  for (const event of process.log.undelivered()) {
    if (event.kind !== "output") continue;
    bytes += event.chunk.length;
    events++;
  }
  assertEquals(bytes, 300000);
  // Once per chunk, however the reads fell (at least one per write burst).
  assertEquals(chunks, events);
  assertEquals(chunks >= 3, true, `onOutput ran ${chunks} times`);
});
