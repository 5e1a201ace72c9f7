// Placeholders shared by two servers: a missing `.git` in a workspace both
// sandbox (two sessions on one repository; `/tmp` in every workspace-write
// sandbox) is protected by a read-only placeholder bubblewrap creates on the
// host. The server whose sandbox ends first must not remove it while the
// other's sandbox still has it mounted: removing a mount point detaches it
// in every namespace, and there the protected path becomes creatable.

import { sandboxSupport } from "../../src/sandbox/bwrap.ts";
import { lockDirAt, placeholderCoordination } from "../../src/sandbox/mount_points.ts";
import { assert, assertEquals } from "../helpers/assert.ts";
import { scratchRoot } from "../helpers/reference.ts";
import { oursServer, sandboxContext, startSandboxed, WORKSPACE_WRITE } from "../helpers/sandbox.ts";
import type { WireClient } from "../helpers/wire_client.ts";

const decoder = new TextDecoder();

/** Reads `processId`'s output from `after` until `want` is in it (or it closed). */
async function readUntil(
  c: WireClient,
  processId: string,
  want: string,
  from = { after: 0, text: "" },
): Promise<{ after: number; text: string; closed: boolean }> {
  let { after, text } = from;
  for (;;) {
    const r = await c.request("process/read", { processId, afterSeq: after, waitMs: 5000 }, 30_000);
    for (const chunk of r.chunks) text += decoder.decode(Uint8Array.fromBase64(chunk.chunk));
    after = r.nextSeq - 1;
    if (r.closed || text.includes(want)) return { after, text, closed: r.closed };
  }
}

/** Starts `script` in `ws` under workspace-write, its stdin piped. */
async function startWaiting(c: WireClient, processId: string, ws: string, script: string) {
  await startSandboxed(c, processId, ws, script, sandboxContext(ws, WORKSPACE_WRITE), {
    pipeStdin: true,
  });
}

async function write(c: WireClient, processId: string, line: string) {
  const written = await c.call("process/write", {
    processId,
    chunk: new TextEncoder().encode(line).toBase64(),
    writeId: `${processId}-go`,
  });
  assertEquals(written.result, { status: "accepted" }, JSON.stringify(written));
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name:
    "mount points: a placeholder another server's sandbox still mounts stays until that one ends, then goes",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "placeholders-" });
    const ws = `${base}/ws`;
    await Deno.mkdir(ws);
    try {
      await using a = oursServer().server;
      await using b = oursServer().server;
      await a.client.initialize();
      await b.client.initialize();

      // A's sandbox makes the placeholder for the missing .git.
      await startWaiting(a.client, "first", ws, "echo up; read go");
      assert((await readUntil(a.client, "first", "up")).text.includes("up"));
      assert(Deno.lstatSync(`${ws}/.git`).isDirectory, "the placeholder is on the host");

      // B's sandbox starts while it is there, then waits.
      await startWaiting(
        b.client,
        "second",
        ws,
        "echo up; read go; mkdir .git 2>/dev/null; " +
          "if mkdir .git/hooks 2>/dev/null; then echo WRITABLE; else echo protected; fi",
      );
      const upB = await readUntil(b.client, "second", "up");
      assert(upB.text.includes("up"), upB.text);

      // A's sandbox ends (its server's cleanup runs as its exit is reported).
      await write(a.client, "first", "go\n");
      const endA = await readUntil(a.client, "first", "\u0000");
      assert(endA.closed);
      assert(exists(`${ws}/.git`), "still mounted by the other server's sandbox: kept");

      // In B's sandbox .git is still the read-only placeholder.
      await write(b.client, "second", "go\n");
      const endB = await readUntil(b.client, "second", "\u0000", upB);
      assert(endB.closed);
      assertEquals(endB.text.trim().split("\n").at(-1), "protected", endB.text);
      assert(!exists(`${ws}/.git/hooks`), "nothing was created in it");

      // The last sandbox gone, so is the placeholder, and its lock file.
      assert(!exists(`${ws}/.git`), "removed by the server whose sandbox ended last");
      const locks = `/tmp/exec-server-${Deno.uid()}/mount-points`;
      for (const entry of exists(locks) ? Deno.readDirSync(locks) : []) {
        const made = Deno.readTextFileSync(`${locks}/${entry.name}`);
        assert(!made.startsWith(ws), `lock file left for ${made}`);
      }
    } finally {
      await Deno.remove(base, { recursive: true });
    }
  },
});

Deno.test("mount points: the lock directory must be this user's alone — another's, a shared one or a symlink is refused, with why", async () => {
  const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "lockdir-" });
  try {
    // Made when missing, 0700.
    const made = lockDirAt(`${base}/fresh`);
    assertEquals(made, { dir: `${base}/fresh/mount-points` });
    assertEquals(Deno.statSync(`${base}/fresh`).mode! & 0o777, 0o700);
    // Someone made it first, open to others (the attacker's mkdir in /tmp).
    await Deno.mkdir(`${base}/open`);
    await Deno.chmod(`${base}/open`, 0o777);
    const open = lockDirAt(`${base}/open`);
    assert("problem" in open && open.problem.includes("not a directory of this user's alone"));
    // A symlink to a private directory is not that directory.
    await Deno.symlink(`${base}/fresh`, `${base}/link`);
    const link = lockDirAt(`${base}/link`);
    assert("problem" in link && link.problem.startsWith(`${base}/link `), JSON.stringify(link));
    // The inner directory is checked too.
    await Deno.mkdir(`${base}/inner/mount-points`, { recursive: true, mode: 0o700 });
    await Deno.chmod(`${base}/inner`, 0o700);
    await Deno.chmod(`${base}/inner/mount-points`, 0o755);
    const inner = lockDirAt(`${base}/inner`);
    assert("problem" in inner && inner.problem.startsWith(`${base}/inner/mount-points`));
  } finally {
    await Deno.remove(base, { recursive: true });
  }
  // This machine's is usable: the servers above agreed through it.
  assertEquals(placeholderCoordination(), null);
});
