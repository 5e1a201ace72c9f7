// An output log's byte storage (src/process/chunk_arena.ts) and the bounded
// tail the sandbox's denial verdict reads (ByteTail): what is handed out is
// a copy that stays intact while held, emptied blocks are reused, and the
// caller's buffer may be overwritten at once.

import { assert, assertEquals } from "../helpers/assert.ts";
import { ChunkArena } from "../../src/process/chunk_arena.ts";
import { OutputLog } from "../../src/process/output_log.ts";
import { ByteTail } from "../../src/util/bytes.ts";

/** `length` bytes counting up from `seed` (mod 256). */
function pattern(seed: number, length: number): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => (seed + i) & 0xff);
}

Deno.test("chunk arena: copies are intact while held, and blocks are reused once released", () => {
  const arena = new ChunkArena();
  const buffer = new Uint8Array(65536);
  const held: Array<[Uint8Array, Uint8Array]> = [];
  let peak = 0;
  for (let i = 0; i < 400; i++) {
    const length = 1 + ((i * 7919) % 65536);
    const expected = pattern(i, length);
    buffer.set(expected);
    held.push([arena.store(buffer.subarray(0, length)), expected]);
    buffer.fill(0xee); // the caller reuses its buffer at once
    // Keep the newest ~1 MiB, release the rest oldest first (as a log does).
    let bytes = 0;
    for (const [view] of held) bytes += view.length;
    while (bytes > 1024 * 1024) {
      bytes -= held.shift()![0].length;
      arena.releaseOldest();
    }
    for (const [view, want] of held) assertEquals(view, want, `chunk after store ${i}`);
    peak = Math.max(peak, arena.capacity);
  }
  // A sliding 1 MiB window lives in a bounded set of recycled blocks.
  assert(peak <= 4 * 1024 * 1024, `peak capacity ${peak}`);
  for (let i = held.length; i > 0; i--) arena.releaseOldest();
  assertEquals(arena.store(new Uint8Array(0)).length, 0);
});

Deno.test("output log: history read back is byte-exact while the log reuses its blocks", () => {
  const log = new OutputLog({ retainBytes: 256 * 1024 });
  const read = new Uint8Array(65536);
  for (let i = 0; i < 300; i++) {
    const length = 1000 + ((i * 4099) % 64000);
    read.set(pattern(i, length));
    log.append({ kind: "output", stream: "stdout", chunk: read.subarray(0, length) });
    read.fill(0);
    log.markDelivered(log.nextSeq - 1);
  }
  const { chunks } = log.read(0);
  assert(chunks.length > 3, `${chunks.length} chunks retained`);
  for (const event of chunks) {
    const i = event.seq - 1;
    assertEquals(event.chunk, pattern(i, 1000 + ((i * 4099) % 64000)), `seq ${event.seq}`);
  }
});

Deno.test("byte tail: keeps the last bytes in order across wraps, whatever the push sizes", () => {
  const tail = new ByteTail(10_000);
  const all: number[] = [];
  for (let i = 0; i < 500; i++) {
    const bytes = pattern(i * 31, (i * 389) % 3000);
    tail.push(bytes);
    all.push(...bytes);
    bytes.fill(0); // the caller's buffer is reused
    assertEquals(tail.bytes(), Uint8Array.from(all.slice(-10_000)), `after push ${i}`);
  }
  tail.push(pattern(7, 25_000));
  assertEquals(tail.bytes(), pattern(7, 25_000).subarray(15_000));
});

Deno.test("output log: what it stores follows what it retains once trimmed or done", async () => {
  const { HistoryBudget } = await import("../../src/process/output_log.ts");
  const budget = new HistoryBudget(256 * 1024);
  const streamed = new OutputLog({ retainBytes: 4 * 1024 * 1024, budget });
  const chunk = pattern(1, 65536);
  for (let i = 0; i < 64; i++) {
    streamed.append({ kind: "output", stream: "stdout", chunk });
    streamed.markDelivered(streamed.nextSeq - 1);
  }
  // The budget cut its history to 256 KiB: its blocks went with it.
  assert(streamed.historyBytes <= 256 * 1024, `history ${streamed.historyBytes}`);
  assert(streamed.storedBytes <= 2 * streamed.retainedBytes + 64 * 1024, `${streamed.storedBytes}`);
  for (const event of streamed.read(0).chunks) assertEquals(event.chunk, chunk);

  // A process that is done keeps no spare or half-empty blocks.
  const done = new OutputLog({ retainBytes: 64 * 1024 });
  for (let i = 0; i < 40; i++) {
    done.append({ kind: "output", stream: "stdout", chunk: pattern(i, 30_000) });
    done.markDelivered(done.nextSeq - 1);
  }
  done.append({ kind: "exited", exitCode: 0, signal: null, sandboxDenied: false });
  assert(done.storedBytes <= 2 * done.retainedBytes + 64 * 1024, `${done.storedBytes}`);
  const kept = done.read(0).chunks;
  assert(kept.length >= 2);
  for (const event of kept) assertEquals(event.chunk, pattern(event.seq - 1, 30_000));
});

Deno.test("chunk arena: a long stream keeps reusing its full-size blocks, not its first small ones", () => {
  const arena = new ChunkArena();
  const chunk = new Uint8Array(65536);
  let held = 0;
  const buffers = new Set<ArrayBufferLike>();
  // A stream's first reads are small (a process's reads start at 4 KiB),
  // then 64 KiB chunks, with a 4 MiB window (as a log keeps its history):
  // its first blocks are small, too small for the later chunks, and the
  // first emptied.
  for (let i = 0; i < 2000; i++) {
    const view = arena.store(i < 3 ? chunk.subarray(0, 1024 << i) : chunk);
    if (i >= 200) buffers.add(view.buffer);
    if (++held > 64) {
      arena.releaseOldest();
      held--;
    }
  }
  // After the window filled, its blocks come round again: 1800 chunks
  // (112 MiB) in a handful of blocks, not a fresh one per MiB.
  assert(buffers.size <= 8, `${buffers.size} blocks for 112 MiB`);
});
