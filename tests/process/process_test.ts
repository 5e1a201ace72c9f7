import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  collectProcess,
  eventually,
  inProcessStdio,
  isDead,
  startProcess,
  text,
} from "../helpers/wire_client.ts";

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>))
    .toHex();
}

Deno.test("process: output, exit and close share one seq counter; read mirrors the reference", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  const start = await startProcess(c, "p1", ["sh", "-c", "echo hi; echo err >&2; exit 3"], {
    env: {},
    arg0: null,
  });
  assertEquals(start.result, { processId: "p1", sandboxType: "none" });
  const run = await collectProcess(c, "p1");
  assertEquals(text(run.stdout), "hi\n");
  assertEquals(text(run.stderr), "err\n");
  assertEquals(run.exitCode, 3);
  // seqs are 1..4 with closed last
  assertEquals(run.events.map(([seq]) => seq).sort((a, b) => a - b), [1, 2, 3, 4]);
  assertEquals(run.events.at(-1), [4, "closed"]);
  const read = await c.request("process/read", { processId: "p1" });
  assertEquals(read.nextSeq, 5);
  assertEquals([read.exited, read.exitCode, read.closed, read.failure, read.sandboxDenied], [
    true,
    3,
    true,
    null,
    false,
  ]);
  assertEquals(read.chunks.map((ch: { seq: number }) => ch.seq), [1, 2]);
  assertEquals(read.chunks[0], { seq: 1, stream: "stdout", chunk: "aGkK" });
  const one = await c.request("process/read", { processId: "p1", afterSeq: 0, maxBytes: 1 });
  assertEquals(one.chunks.length, 1);
  assertEquals(one.nextSeq, 2);
  const after = await c.request("process/read", { processId: "p1", afterSeq: 1 });
  assertEquals(after.chunks.map((ch: { seq: number }) => ch.seq), [2]);
  const neg = await c.call("process/read", { processId: "p1", afterSeq: -1 });
  assertEquals(neg.error, { code: -32602, message: "invalid number" });
  const unknown = await c.call("process/read", { processId: "ghost" });
  assertEquals(unknown.error, { code: -32600, message: "unknown process id ghost" });
});

Deno.test("process/start errors name the problem", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "dup", ["sleep", "5"]);
  assertEquals((await startProcess(c, "dup", ["true"])).error, {
    code: -32600,
    message: "process dup already exists",
  });
  assertEquals((await startProcess(c, "e1", [])).error, {
    code: -32602,
    message: "argv must not be empty",
  });
  const notFound = await startProcess(c, "e2", ["no-such-cmd"]);
  // The reference's exact texts (Codex shows them to its model), with
  // Codex 0.171's kind.
  assertEquals(notFound.error, {
    code: -32603,
    message: "No such file or directory (os error 2)",
    data: { kind: "spawnNotFound" },
  });
  const rel = await startProcess(c, "e3", ["true"], { cwd: "/tmp" });
  assertEquals(rel.error, {
    code: -32602,
    message: "invalid URI: relative URL without a base",
  });
  const missing = await startProcess(c, "e4", ["true"], {
    cwd: "file:///tmp/definitely-missing-dir",
  });
  assertEquals(missing.error, {
    code: -32603,
    message: "No such file or directory (os error 2)",
    data: { kind: "spawnNotFound" },
  });
  const isFile = await startProcess(c, "e5", ["true"], { cwd: "file:///etc/passwd" });
  assertEquals(isFile.error, {
    code: -32603,
    message: "Not a directory (os error 20)",
    data: { kind: "spawnFailed" },
  });
  const plain = await Deno.makeTempFile();
  try {
    await Deno.chmod(plain, 0o644);
    const noExec = await startProcess(c, "e6", [plain]);
    assertEquals(noExec.error, {
      code: -32603,
      message: "Permission denied (os error 13)",
      data: { kind: "spawnPermissionDenied" },
    });
  } finally {
    await Deno.remove(plain);
  }
  const noEnv = await c.call("process/start", {
    processId: "e7",
    argv: ["true"],
    cwd: "file:///tmp",
    tty: false,
  });
  assertEquals(noEnv.error, { code: -32602, message: "missing field `env`" });
  const uuid = await startProcess(c, "e9", ["true"], { metadata: { threadId: "thread" } });
  assertEquals(uuid.error.code, -32602);
  assertStringIncludes(uuid.error.message, "found `t` at 1");
  assertEquals((await c.request("process/terminate", { processId: "dup" })).running, true);
});

Deno.test("program lookup: child PATH when given, server PATH otherwise, ./ relative to cwd", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "a", ["sh", "-c", "echo ok"], { env: {} });
  assertEquals(text((await collectProcess(c, "a")).stdout), "ok\n");
  const none = await startProcess(c, "b", ["sh", "-c", "echo ok"], {
    env: { PATH: "/nonexistent" },
  });
  assertEquals(none.error.code, -32603);
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/hello.sh`, "#!/bin/sh\necho hello from script\n");
    await Deno.chmod(`${dir}/hello.sh`, 0o755);
    await startProcess(c, "c", ["./hello.sh"], { cwd: `file://${dir}` });
    assertEquals(text((await collectProcess(c, "c")).stdout), "hello from script\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // arg0 replaces what the child sees as argv[0]
  await startProcess(c, "d", ["sh", "-c", "echo $0; tr '\\0' ' ' < /proc/$$/cmdline"], {
    env: {},
    arg0: "renamed",
  });
  const d = text((await collectProcess(c, "d")).stdout);
  assert(d.startsWith("renamed\nrenamed "), d);
});

Deno.test("process/write: statuses, idempotent writeIds, ordering, closeStdin", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "cat", ["cat"], { pipeStdin: true });
  const w = (chunk: string, writeId: string, processId = "cat") =>
    c.call("process/write", { processId, chunk: btoa(chunk), writeId });
  assertEquals((await w("hello\n", "w1")).result, { status: "accepted" });
  assertEquals(
    (await w("hello\n", "w1")).result,
    { status: "accepted" },
    "retry is acknowledged, not rewritten",
  );
  assertEquals((await w("x", "")).error, { code: -32602, message: "writeId must not be empty" });
  const badB64 = await c.call("process/write", { processId: "cat", chunk: "!!!!", writeId: "w9" });
  assertEquals(badB64.error, { code: -32602, message: "Invalid symbol 33, offset 0." });
  assertEquals((await w("x", "w2", "ghost")).result, { status: "unknownProcess" });
  // Many writes sent back-to-back apply in arrival order.
  const lines = Array.from({ length: 500 }, (_, i) => `line ${i}\n`);
  await Promise.all(lines.map((l, i) => w(l, `seq-${i}`)));
  assertEquals((await c.call("process/closeStdin", { processId: "cat" })).result, {
    status: "accepted",
  });
  const run = await collectProcess(c, "cat");
  assertEquals(text(run.stdout), "hello\n" + lines.join(""));
  assertEquals(run.exitCode, 0, "cat saw EOF");
  assertEquals((await w("late", "w3")).result, { status: "stdinClosed" });
  // Without pipeStdin stdin is /dev/null.
  await startProcess(c, "nopipe", ["sh", "-c", "readlink /proc/self/fd/0; sleep 0.3"]);
  assertEquals((await w("x", "w4", "nopipe")).result, { status: "stdinClosed" });
  assertEquals(text((await collectProcess(c, "nopipe")).stdout), "/dev/null\n");
  assertEquals((await c.call("process/closeStdin", { processId: "ghost" })).result, {
    status: "unknownProcess",
  });
});

Deno.test("signals go to the process group; terminate kills the tree", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  // No wait: a signal sent before the child is its group's leader reaches it directly.
  await startProcess(c, "int", ["sleep", "30"]);
  assertEquals(
    (await c.call("process/signal", { processId: "int", signal: "interrupt" })).result,
    {},
  );
  const int = await collectProcess(c, "int");
  assertEquals([int.exitCode, int.signal], [130, "SIGINT"]);
  for (
    const [name, code] of [["terminate", 143], ["hangup", 129], ["user1", 138], ["quit", 131], [
      "kill",
      137,
    ]] as const
  ) {
    await startProcess(c, name, ["sleep", "30"]);
    await c.request("process/signal", { processId: name, signal: name });
    assertEquals((await collectProcess(c, name)).exitCode, code, name);
  }
  const bad = await c.call("process/signal", { processId: "int", signal: "bogus" });
  assertEquals(bad.error.code, -32602);
  assertStringIncludes(
    bad.error.message,
    "unknown variant `bogus`, expected one of `interrupt`, `terminate`",
  );
  assertEquals(
    (await c.call("process/signal", { processId: "ghost", signal: "interrupt" })).result,
    {},
  );
  assertEquals(
    (await c.call("process/signal", { processId: "int", signal: "interrupt" })).result,
    {},
    "exited: no-op",
  );

  // terminate: SIGKILL to the whole group, including grandchildren.
  await startProcess(c, "tree", ["sh", "-c", "sleep 1000 & sleep 1000 & echo $!; wait"]);
  const first = await c.notification("process/output", (p) => p.processId === "tree");
  const grandchild = Number(text(Uint8Array.fromBase64(first.params.chunk)).trim());
  assert(grandchild > 0 && !isDead(grandchild));
  assertEquals((await c.request("process/terminate", { processId: "tree" })).running, true);
  const tree = await collectProcess(c, "tree");
  assertEquals(tree.exitCode, 137);
  assert(await eventually(() => isDead(grandchild)), "grandchild survived");
  assertEquals((await c.request("process/terminate", { processId: "tree" })).running, false);
  assertEquals((await c.request("process/terminate", { processId: "ghost" })).running, false);
});

Deno.test("terminate with graceMs sends SIGTERM first, then SIGKILL", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "polite", [
    "sh",
    "-c",
    "trap 'echo bye; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
  ]);
  await c.notification("process/output", (p) => p.processId === "polite");
  await c.request("process/terminate", { processId: "polite", graceMs: 2000 });
  const polite = await collectProcess(c, "polite");
  assertEquals(polite.exitCode, 7);
  assertStringIncludes(text(polite.stdout), "bye");
  await startProcess(c, "stubborn", [
    "sh",
    "-c",
    "trap '' TERM; echo ready; while :; do sleep 0.05; done",
  ]);
  await c.notification("process/output", (p) => p.processId === "stubborn");
  const t0 = Date.now();
  await c.request("process/terminate", { processId: "stubborn", graceMs: 300 });
  const stubborn = await collectProcess(c, "stubborn");
  assertEquals(stubborn.exitCode, 137);
  assert(Date.now() - t0 >= 250, "killed before the grace ended");
});

Deno.test("long polls return early on output, at the timeout otherwise, and never block other requests", async () => {
  await using s = inProcessStdio({ concurrency: 1 });
  const c = s.client;
  await c.initialize();
  await startProcess(c, "o2", ["sh", "-c", "sleep 0.5; echo late; sleep 0.5"]);
  const t0 = performance.now();
  const poll = c.call("process/read", { processId: "o2", afterSeq: 0, waitMs: 5000 });
  // With one request slot, other requests still get through while the poll waits.
  assertEquals(await c.request("environment/status"), { status: "ready" });
  assert(performance.now() - t0 < 300, "status waited behind the long poll");
  const r = (await poll).result;
  const elapsed = performance.now() - t0;
  assert(elapsed >= 400 && elapsed < 2500, `returned after ${elapsed} ms`);
  assertEquals(r.chunks[0].chunk, btoa("late\n"));
  const t1 = performance.now();
  const empty = await c.request("process/read", { processId: "o2", afterSeq: 1, waitMs: 200 });
  const waited = performance.now() - t1;
  assert(
    empty.chunks.length === 0 && !empty.closed && waited >= 180 && waited < 1500,
    `waited ${waited}`,
  );
  const atExit = await c.request("process/read", { processId: "o2", afterSeq: 1, waitMs: 5000 });
  assert(atExit.exited);
  const last = await c.request("process/read", {
    processId: "o2",
    afterSeq: atExit.nextSeq - 1,
    waitMs: 5000,
  });
  assert(last.closed);
});

Deno.test("exited precedes closed while a background child holds the pipes", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "a", ["sh", "-c", "sleep 0.6 & echo leader-done"]);
  const exited = await c.notification("process/exited", (p) => p.processId === "a");
  const t0 = performance.now();
  const r = await c.request("process/read", { processId: "a" });
  assert(r.exited && !r.closed);
  await c.notification("process/closed", (p) => p.processId === "a");
  assert(performance.now() - t0 > 300);
  assertEquals(exited.params.exitCode, 0);
});

Deno.test("large output is byte-exact and ordered; 20 concurrent processes do not mix", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  const dir = await Deno.makeTempDir();
  try {
    const data = new Uint8Array(48 * 1024 * 1024);
    for (let i = 0; i < data.length; i += 65536) {
      crypto.getRandomValues(data.subarray(i, i + 65536));
    }
    await Deno.writeFile(`${dir}/data.bin`, data);
    await startProcess(c, "big", ["cat", `${dir}/data.bin`]);
    const big = await collectProcess(c, "big", 60_000);
    assertEquals(big.stdout.length, data.length);
    assertEquals(await sha256Hex(big.stdout), await sha256Hex(data));
    const outputs = big.events.filter(([, k]) => k === "output").map(([seq]) => seq);
    assertEquals(outputs, [...outputs].sort((a, b) => a - b), "output arrives in seq order");
    const ids = Array.from({ length: 20 }, (_, i) => `par${i}`);
    await Promise.all(ids.map((id, i) => startProcess(c, id, ["sh", "-c", `seq 1 ${20000 + i}`])));
    const runs = await Promise.all(ids.map((id) => collectProcess(c, id)));
    runs.forEach((run, i) => {
      const lines = text(run.stdout).trimEnd().split("\n");
      assertEquals(lines.length, 20000 + i);
      assertEquals(lines.at(-1), String(20000 + i));
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("retention: a closed process is readable for the retention time, then forgotten", async () => {
  await using s = inProcessStdio({ processRetentionMs: 300 });
  const c = s.client;
  await c.initialize();
  await startProcess(c, "r", ["echo", "x"]);
  await collectProcess(c, "r");
  assert((await c.request("process/read", { processId: "r" })).closed);
  assertEquals((await startProcess(c, "r", ["true"])).error.message, "process r already exists");
  // Retained for a while after it closed, then forgotten.
  assert(
    await eventually(
      async () =>
        (await c.call("process/read", { processId: "r" })).error?.message ===
          "unknown process id r",
      5000,
    ),
  );
  assertEquals(
    (await startProcess(c, "r", ["true"])).result.processId,
    "r",
    "the id is free again",
  );
  await collectProcess(c, "r");
});

Deno.test("stdio EOF kills every process group of the session", async () => {
  const s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "bg", ["sh", "-c", "sleep 1000 & echo $!; wait"]);
  const first = await c.notification("process/output", (p) => p.processId === "bg");
  const grandchild = Number(text(Uint8Array.fromBase64(first.params.chunk)).trim());
  await s.closeInput();
  await s.served;
  assert(await eventually(() => isDead(grandchild)), "grandchild outlived the connection");
  await s[Symbol.asyncDispose]();
});

Deno.test("a noisy process does not hold back a quiet one", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  await startProcess(c, "flood", ["head", "-c", "200M", "/dev/zero"]);
  await c.notification("process/output", (p) => p.processId === "flood");
  const t0 = performance.now();
  await startProcess(c, "quick", ["echo", "hi"]);
  const quick = await collectProcess(c, "quick");
  assertEquals(text(quick.stdout), "hi\n");
  assert(performance.now() - t0 < 3000, "quick process starved");
  await c.request("process/terminate", { processId: "flood" });
});

Deno.test("PATH lookup: names remembered as absent are found once their directory gains them", async () => {
  const { findInPath, SETSID } = await import("../../src/process/spawn.ts");
  // Found at load time (a lookup that failed there once made every start
  // fall back to a forking spawn, 2.5 times the CPU).
  assertEquals(SETSID, findInPath("setsid", "/usr/bin:/bin:/usr/sbin:/sbin"));
  assert(SETSID !== null, "setsid is installed (util-linux)");
  const root = await Deno.makeTempDir();
  try {
    const [early, late] = [`${root}/early`, `${root}/late`];
    await Deno.mkdir(early);
    await Deno.mkdir(late);
    await Deno.writeTextFile(`${late}/tool`, "#!/bin/sh\n", { mode: 0o755 });
    // Both directories unchanged for a minute: their misses are remembered.
    const old = new Date(Date.now() - 60_000);
    await Deno.utime(early, old, old);
    await Deno.utime(late, old, old);
    const path = `${early}:${late}`;
    assertEquals(findInPath("tool", path), `${late}/tool`);
    assertEquals(findInPath("tool", path), `${late}/tool`);
    // A file that is not executable is not a candidate, and is looked at again.
    await Deno.writeTextFile(`${early}/tool`, "#!/bin/sh\n", { mode: 0o644 });
    assertEquals(findInPath("tool", path), `${late}/tool`);
    await Deno.chmod(`${early}/tool`, 0o755);
    assertEquals(findInPath("tool", path), `${early}/tool`);
    // Removed from the later directory: no stale hit.
    await Deno.remove(`${early}/tool`);
    await Deno.remove(`${late}/tool`);
    assertEquals(findInPath("tool", path), null);
    assertEquals(findInPath("tool", `${root}/missing:${late}`), null);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("process: read buffers handed from process to process keep each one's bytes", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  // Streams that fill their first read move to 64 KiB buffers; both sizes
  // go back for reuse when the stream ends, full of these bytes.
  const big = [
    "sh",
    "-c",
    "head -c 200000 /dev/zero | tr '\\0' x; head -c 9000 /dev/zero | tr '\\0' y >&2",
  ];
  for (const id of ["big1", "big2", "big3"]) await startProcess(c, id, big);
  for (const id of ["big1", "big2", "big3"]) {
    const run = await collectProcess(c, id);
    assertEquals([run.stdout.length, run.stderr.length], [200000, 9000]);
  }
  // Shorter output, different letters, at once: a stale byte of another
  // process (or of the same buffer's earlier use) shows.
  const letters = "abcdefghijklmnopqrstuvwxyz";
  const small = Array.from(letters, (ch, i) => ({
    id: `s${i}`,
    ch,
    out: 1 + i * 2600, // 1 B .. 65 001 B: both buffer sizes, some a read more
    err: 1 + i * 379,
  }));
  await Promise.all(small.map(({ id, ch, out, err }) =>
    startProcess(c, id, [
      "sh",
      "-c",
      `head -c ${out} /dev/zero | tr '\\0' ${ch}; head -c ${err} /dev/zero | tr '\\0' ${ch.toUpperCase()} >&2`,
    ])
  ));
  for (const { id, ch, out, err } of small) {
    const run = await collectProcess(c, id);
    assertEquals(text(run.stdout), ch.repeat(out), id);
    assertEquals(text(run.stderr), ch.toUpperCase().repeat(err), id);
  }
});
