import { assertEquals, assertThrows } from "../helpers/assert.ts";
import {
  OrderedCiphertext,
  REORDER_MAX_BYTES,
  REORDER_WINDOW,
  SequenceCounter,
  SequenceError,
} from "../../src/relay/wire/ordered.ts";

const rec = (tag: number, size = 1) => new Uint8Array(size).fill(tag);
const tags = (records: Uint8Array[]) => records.map((r) => r[0]);

Deno.test("relay order: records are released strictly in sequence, each once", () => {
  const o = new OrderedCiphertext();
  assertEquals(tags(o.accept(0, rec(0))), [0]);
  assertEquals(tags(o.accept(2, rec(2))), [], "a gap holds later records");
  assertEquals(tags(o.accept(3, rec(3))), []);
  assertEquals(tags(o.accept(1, rec(1))), [1, 2, 3], "filling the gap releases the run");
  assertEquals(o.next, 4);
  // Stale and duplicate records are dropped, never released again.
  assertEquals(tags(o.accept(1, rec(1))), []);
  assertEquals(tags(o.accept(3, rec(3))), []);
  assertEquals(o.next, 4);
});

Deno.test("relay order: the first copy of a held record wins", () => {
  const o = new OrderedCiphertext();
  assertEquals(o.accept(1, rec(10)), []);
  assertEquals(o.accept(1, rec(99)), [], "a second copy is ignored");
  assertEquals(tags(o.accept(0, rec(0))), [0, 10]);
});

Deno.test("relay order: the reorder window and the held bytes are bounded", () => {
  const edge = new OrderedCiphertext();
  assertEquals(edge.accept(REORDER_WINDOW, rec(1)), [], "the window's last slot is accepted");
  const beyond = new OrderedCiphertext();
  const error = assertThrows(() => beyond.accept(REORDER_WINDOW + 1, rec(1)), SequenceError);
  assertEquals(error.message, "relay reorder window exceeded");
  // Many held frames within the window, but too many bytes.
  const heavy = new OrderedCiphertext();
  const size = REORDER_MAX_BYTES / 4;
  for (let seq = 1; seq <= 4; seq++) heavy.accept(seq, rec(seq, size));
  assertThrows(() => heavy.accept(5, rec(5, 1)), SequenceError);
  // After the gap closes, the budget is free again.
  const freed = new OrderedCiphertext();
  for (let seq = 1; seq <= 4; seq++) freed.accept(seq, rec(seq, size));
  assertEquals(freed.accept(0, rec(0)).length, 5);
  assertEquals(freed.accept(6, rec(6, size)), []);
});

Deno.test("relay order: outbound sequence numbers count up from zero", () => {
  const c = new SequenceCounter();
  assertEquals([c.take(), c.take(), c.take()], [0, 1, 2]);
});
