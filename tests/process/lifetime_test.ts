// No process outlives its server: a server killed with SIGKILL (no chance
// to clean up) takes every process group it started with it — plain pipes,
// terminals and sandboxes, each running a shell with a child of its own.
// Judged from outside, by what is still alive. The reference (0.169.0)
// kills its direct children only (a parent-death signal): the two `sleep`s
// of the pipes group survive it, so this runs against ours alone.

import { assertEquals } from "../helpers/assert.ts";
import {
  eventually,
  freshMarker,
  livingWithMarker,
  type Msg,
  type SpawnedServer,
  spawnStdioServer,
  webSocketClient,
} from "../helpers/wire_client.ts";
import { scratchRoot } from "../helpers/reference.ts";
import { startWsServer } from "../helpers/ws_server.ts";
import { READ_ONLY, runSandboxed, sandboxContext } from "../helpers/sandbox.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";

const PATH = "/usr/local/bin:/usr/bin:/bin";

Deno.test(`lifetime: kill -9 of the server kills its pipe, terminal and sandbox process groups`, async () => {
  const marker = freshMarker();
  const server = await startWsServer("ours");
  try {
    const c = await webSocketClient(server.url);
    await c.initialize();
    // Each is a shell with a child (a grandchild of the server) that would
    // outlive the shell alone.
    const script = "sleep 300 & sleep 300; wait";
    const starts: Msg[] = [
      { processId: "pipes", tty: false },
      { processId: "terminal", tty: true },
    ];
    if (sandboxSupport().available) {
      starts.push({
        processId: "sandboxed",
        tty: false,
        sandbox: sandboxContext("/tmp", READ_ONLY),
      });
    }
    for (const extra of starts) {
      await c.request("process/start", {
        argv: ["sh", "-c", script],
        cwd: "file:///tmp",
        env: { PATH, MARK: marker },
        ...extra,
      });
    }
    // Both sleeps of every start are running before the kill.
    const expected = starts.length * 3;
    const up = await eventually(() => livingWithMarker(marker).length >= expected, 30_000);
    assertEquals(up, true, `started: ${livingWithMarker(marker).length} of ${expected}`);
    server.child.kill("SIGKILL");
    await server.child.status;
    c.ws.close();
    const gone = await eventually(() => livingWithMarker(marker).length === 0, 30_000);
    assertEquals(gone ? [] : describe(livingWithMarker(marker)), [], "alive after kill -9");
  } finally {
    for (const pid of livingWithMarker(marker)) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    await server[Symbol.asyncDispose]();
  }
});

/** `pid: command line` of each pid (what survived). */
function describe(pids: number[]): string[] {
  return pids.map((pid) => {
    try {
      return `${pid}: ${Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " ")}`;
    } catch {
      return `${pid}: ?`;
    }
  });
}

Deno.test({
  name:
    "lifetime: a killed server's private sandbox directory is reclaimed by the next server, a live one's never",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const tmp = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "tmpdir-" });
    const privateDirs = () =>
      [...Deno.readDirSync(tmp)].map((e) => e.name).filter((n) =>
        n.startsWith("exec-server-sandbox-")
      ).sort();
    const sandboxedRun = async (s: SpawnedServer) => {
      await s.client.initialize();
      const run = await runSandboxed(s.client, "/tmp", "true", sandboxContext("/tmp", READ_ONLY));
      assertEquals(run.exitCode, 0);
    };
    try {
      const env = { TMPDIR: tmp };
      const killed = spawnStdioServer(["serve", "--listen", "stdio", "--log-level", "error"], env);
      await sandboxedRun(killed);
      const [stale] = privateDirs();
      killed.child.kill("SIGKILL");
      await killed[Symbol.asyncDispose]();
      await using live = spawnStdioServer(["serve", "--listen", "stdio"], env);
      await sandboxedRun(live);
      const liveDir = privateDirs().find((n) => n !== stale)!;
      await using next = spawnStdioServer(["serve", "--listen", "stdio"], env);
      await sandboxedRun(next);
      const after = privateDirs();
      assertEquals(after.includes(stale!), false, "the killed server's directory is gone");
      assertEquals(after.includes(liveDir), true, "the live server's directory is kept");
      assertEquals(after.length, 2);
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
});
