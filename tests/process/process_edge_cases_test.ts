// Processes under careless input: errno texts of failed spawns, a child
// that never reads its stdin. Side by side with the reference.

import { assert, assertEquals, assertMatch, assertStringIncludes } from "../helpers/assert.ts";
import { inProcessStdio } from "../helpers/wire_client.ts";
import { StdinFullError, StdinQueue } from "../../src/process/stdin_queue.ts";
import { outcome, same, sideBySide, u } from "../helpers/side_by_side.ts";

Deno.test("spawn errors carry musl's text for every errno (E2BIG: Argument list too long), as the reference", async () => {
  const seen = same(
    await sideBySide(async (c, d) => {
      const r = await c.call("process/start", {
        processId: "big",
        argv: ["/bin/true", "x".repeat(200_000)],
        cwd: u(d),
        env: {},
        tty: false,
        arg0: null,
      });
      return outcome(r);
    }),
  );
  assertStringIncludes(seen.message, "Argument list too long (os error 7)");
});

Deno.test("stdin is bounded per process: writes to a child that never reads wait, then fail clearly; a retry may write", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await c.request("process/start", {
    processId: "sleeper",
    argv: ["sleep", "30"],
    cwd: u(Deno.cwd()),
    env: {},
    tty: false,
    arg0: null,
    pipeStdin: true,
  });
  const chunk = new Uint8Array(4 * 1024 * 1024).fill(0x61).toBase64();
  // 8 MiB queued, 8 MiB waiting for room: the fifth write is refused at once.
  const ids: number[] = [];
  for (let i = 0; i < 5; i++) {
    const id = 1000 + i;
    ids.push(id);
    await c.send({
      id,
      method: "process/write",
      params: { processId: "sleeper", chunk, writeId: `w${i}` },
    });
  }
  const fifth = await c.take((m) => m.id === 1004);
  assertEquals(fifth.error.code, -32603);
  assertMatch(fifth.error.message, /^process stdin is full: \d+ bytes are queued .*not accepted/);
  assert(
    !c.received.some((m) => ids.slice(0, 4).includes(m.id)),
    "the others are not answered yet",
  );
  // Ending the child answers the rest; nothing hangs.
  await c.request("process/terminate", { processId: "sleeper" });
  for (const id of ids.slice(0, 4)) {
    const m = await c.take((x) => x.id === id);
    assert(m.error !== undefined || m.result.status === "stdinClosed", JSON.stringify(m));
  }
});

Deno.test("StdinQueue: order kept, waits bounded in time and in bytes, abort wakes waiters", async () => {
  const written: string[] = [];
  let release!: () => void;
  let gate = new Promise<void>((r) => (release = r));
  const sink = new WritableStream<Uint8Array>({
    async write(chunk) {
      await gate;
      written.push(new TextDecoder().decode(chunk));
    },
  });
  const queue = new StdinQueue(sink.getWriter(), { limitBytes: 4, waitMs: 200 });
  const a = queue.write(new TextEncoder().encode("aaa")); // queued (3)
  const b = queue.write(new TextEncoder().encode("bb")); // 5 > 4: waits
  const c = queue.write(new TextEncoder().encode("c")); // behind b, though it would fit
  const d = queue.write(new TextEncoder().encode("ddd")); // waiting 3 + 3 > 4: refused
  let refused: unknown;
  await d.catch((e) => (refused = e));
  assert(refused instanceof StdinFullError);
  release();
  await Promise.all([a, b, c]);
  assertEquals(written, ["aaa", "bb", "c"]);
  // A child that stops reading: the waiter gives up after waitMs.
  gate = new Promise<void>((r) => (release = r));
  const stuck = queue.write(new TextEncoder().encode("xxxx"));
  const started = Date.now();
  let timedOut: unknown;
  await queue.write(new TextEncoder().encode("y")).catch((e) => (timedOut = e));
  assert(timedOut instanceof StdinFullError && /after waiting 200 ms/.test(timedOut.message));
  assert(Date.now() - started >= 150);
  // Abort: the stuck write fails and a new waiter does not hang.
  queue.abort();
  release();
  await stuck.catch(() => {});
  await queue.write(new TextEncoder().encode("z")).catch(() => {});
});
