// Sandboxed execution (`sandbox` on process/start and fs/*), enforced with
// bubblewrap: what Codex 0.169.0 sends in its default read-only and its
// workspace-write modes, the escapes an agent could try, process semantics
// inside the sandbox, and the same matrix side by side with the reference.

import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  type NamedServer,
  oursServer,
  pathEntry,
  READ_ONLY,
  referenceServer,
  runSandboxed,
  sandboxContext,
  sandboxFixture,
  type SandboxRun,
  special,
  WORKSPACE_WRITE,
} from "../helpers/sandbox.ts";
import { eventually, type Msg } from "../helpers/wire_client.ts";
import { sandboxCommand, sandboxSupport } from "../../src/sandbox/bwrap.ts";
import { seccompProgram } from "../../src/sandbox/seccomp.ts";
import { lexists as exists } from "../../src/fs/metadata.ts";
import { SandboxFsGateway } from "../../src/sandbox/fs_gateway.ts";
import { plannerFor, sandboxPlan } from "../../src/server/handlers/sandbox_plan.ts";
import { decodeParams } from "../../src/protocol/decode.ts";
import { REQUESTS } from "../../src/protocol/spec.ts";

const available = sandboxSupport().available;
if (!available) {
  console.warn(`note: sandbox tests skipped: ${sandboxSupport().reason}`);
}

/** Ours, then the reference when installed; each initialized. */
async function servers(): Promise<NamedServer[]> {
  const list = [oursServer()];
  const ref = referenceServer();
  if (ref) list.push(ref);
  for (const { server } of list) await server.client.initialize();
  return list;
}

async function closeAll(list: NamedServer[]): Promise<void> {
  for (const { server } of list) await server[Symbol.asyncDispose]();
}

/** A run with the fixture's paths replaced, for comparing servers. */
function normalized(run: SandboxRun, base: string): SandboxRun {
  const clean = (s: string) => s.replaceAll(base, "$BASE");
  return { ...run, stdout: clean(run.stdout), stderr: clean(run.stderr) };
}

interface Scenario {
  readonly name: string;
  readonly script: string;
  /** Checks on our run (paths not normalized). */
  readonly expect: (run: SandboxRun) => void;
}

/**
 * Runs every scenario on ours (asserting `expect`) and on the reference,
 * and asserts both servers show the client the same thing.
 */
async function matrix(
  entries: Msg[],
  scenarios: (f: { ws: string; outside: string }) => Scenario[],
  network: "restricted" | "enabled" = "restricted",
): Promise<void> {
  const list = await servers();
  try {
    const results = new Map<string, SandboxRun[]>();
    for (const { name, server } of list) {
      // A fresh workspace per server: runs change it.
      await using f = await sandboxFixture();
      const sandbox = sandboxContext(f.ws, entries, network);
      for (const scenario of scenarios(f)) {
        const run = await runSandboxed(server.client, f.ws, scenario.script, sandbox);
        if (name === "ours") {
          try {
            scenario.expect(run);
          } catch (error) {
            throw new Error(
              `${scenario.name}: ${(error as Error).message}\n${JSON.stringify(run)}`,
            );
          }
        }
        results.set(scenario.name, [
          ...(results.get(scenario.name) ?? []),
          normalized(run, f.base),
        ]);
      }
    }
    for (const [scenario, [ours, reference]] of results) {
      if (reference) assertEquals(ours, reference, `${scenario}: ours vs the reference`);
    }
  } finally {
    await closeAll(list);
  }
}

const EROFS = "Read-only file system";

Deno.test({
  name: "sandbox: Codex's default read-only policy — reads work, writes and network fail",
  ignore: !available,
  async fn() {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let connections = 0;
    const accepting = (async () => {
      for await (const conn of listener) {
        connections++;
        conn.close();
      }
    })();
    const port = listener.addr.port;
    try {
      await matrix(READ_ONLY, ({ ws }) => [
        {
          name: "read",
          script: `cat ${ws}/sub/file`,
          expect: (r) => {
            assertEquals([r.sandboxType, r.exitCode, r.sandboxDenied], ["linuxSeccomp", 0, false]);
            assertEquals(r.stdout, "inside\n");
          },
        },
        {
          name: "write in the workspace",
          script: `echo x > ${ws}/new`,
          expect: (r) => {
            assertEquals([r.exitCode, r.sandboxDenied], [2, true]);
            assertStringIncludes(r.stderr, EROFS);
          },
        },
        {
          name: "write in /tmp",
          script: "touch /tmp/exec-server-sandbox-probe",
          expect: (r) => {
            assertEquals([r.exitCode, r.sandboxDenied], [1, true]);
            assertStringIncludes(r.stderr, EROFS);
          },
        },
        {
          name: "network to a local listener",
          script: `bash --norc --noprofile -c 'exec 3<>/dev/tcp/127.0.0.1/${port}'`,
          expect: (r) => {
            assertEquals([r.exitCode, r.sandboxDenied], [1, true]);
            assertStringIncludes(r.stderr, "socket: Operation not permitted");
          },
        },
      ]);
      assertEquals(connections, 0, "nothing reached the listener");
      assert(!(await exists("/tmp/exec-server-sandbox-probe")));
    } finally {
      listener.close();
      await accepting;
    }
  },
});

Deno.test({
  name:
    "sandbox: workspace-write — the workspace and /tmp are writable, metadata and the outside are not",
  ignore: !available,
  async fn() {
    await matrix(WORKSPACE_WRITE, ({ ws, outside }) => [
      {
        name: "write, rename and remove in the workspace",
        script:
          `echo a > ${ws}/a && mv ${ws}/a ${ws}/b && cat ${ws}/b && rm ${ws}/b && mkdir ${ws}/d`,
        expect: (r) => assertEquals([r.exitCode, r.stdout], [0, "a\n"]),
      },
      {
        name: "write in /tmp",
        script: "f=$(mktemp) && echo t > $f && cat $f && rm $f",
        expect: (r) => assertEquals([r.exitCode, r.stdout], [0, "t\n"]),
      },
      {
        name: ".git stays read-only",
        script: `echo x > ${ws}/.git/config; echo y > ${ws}/.git/hooks/pre-commit`,
        expect: (r) => {
          assertEquals(r.sandboxDenied, true);
          assertEquals(r.stderr.split(EROFS).length, 3, r.stderr);
        },
      },
      {
        name: ".codex, .agents and .aws cannot be created",
        script: `ls -d ${ws}/.aws; mkdir ${ws}/.codex; echo x > ${ws}/.agents/skill`,
        expect: (r) => {
          assertEquals(r.sandboxDenied, true);
          assertStringIncludes(r.stderr, "File exists");
          assertStringIncludes(r.stderr, EROFS);
        },
      },
      {
        name: "write outside",
        script: `echo x > ${outside}/x`,
        expect: (r) => assertStringIncludes(r.stderr, EROFS),
      },
      {
        name: "through a symlink out",
        script: `echo x > ${ws}/link/x`,
        expect: (r) => assertStringIncludes(r.stderr, EROFS),
      },
      {
        name: "through a dangling symlink out",
        script: `echo x > ${ws}/dangle`,
        expect: (r) => assertStringIncludes(r.stderr, EROFS),
      },
      {
        name: "through .. and /proc/self/root",
        script: `echo x > ${ws}/../outside/x; echo x > /proc/self/root${outside}/x`,
        expect: (r) => assertEquals(r.stderr.split(EROFS).length, 3, r.stderr),
      },
      {
        name: "a hard link to an outside file",
        script: `ln ${outside}/s.txt ${ws}/hard`,
        expect: (r) => assertStringIncludes(r.stderr, "Invalid cross-device link"),
      },
      {
        name: "reads outside still work",
        script: `cat ${outside}/s.txt ${ws}/link/s.txt`,
        expect: (r) => assertEquals([r.exitCode, r.stdout], [0, "secret\nsecret\n"]),
      },
    ]);
  },
});

Deno.test({
  name:
    "sandbox: a writable root keeps the device nodes and the path's own restrictions (linuxRootWritePreservesDevices, linuxApprovedRootWritePreservesRestrictions)",
  ignore: !available,
  async fn() {
    const entriesFor = (outside: string) => [special("root", "write"), pathEntry(outside, "none")];
    // The outside directory is only known per fixture: build entries from a probe fixture's
    // layout (the same relative layout for every server).
    await using probe = await sandboxFixture();
    const rel = probe.outside.slice(probe.base.length);
    const list = await servers();
    try {
      const runs: SandboxRun[] = [];
      for (const { server } of list) {
        await using f = await sandboxFixture();
        const outside = f.base + rel;
        const sandbox = sandboxContext(f.ws, entriesFor(outside), "restricted");
        const run = await runSandboxed(
          server.client,
          f.ws,
          `echo x > /dev/null && echo devnull; test -c /dev/urandom && echo urandom; ` +
            `echo w > ${f.ws}/w && echo ws-write; cat ${outside}/s.txt; echo y > ${outside}/y`,
          sandbox,
        );
        runs.push(normalized(run, f.base));
      }
      const ours = runs[0]!;
      // The whole run in the message: an empty stdout means the sandbox never started.
      assertEquals(ours.stdout, "devnull\nurandom\nws-write\n", JSON.stringify(ours));
      assertEquals(ours.stderr.split("Permission denied").length, 3, ours.stderr);
      if (runs[1]) assertEquals(ours, runs[1], "ours vs the reference");
    } finally {
      await closeAll(list);
    }
  },
});

Deno.test({
  name: "sandbox: glob patterns hide what they match and grant nothing (side by side)",
  ignore: !available,
  async fn() {
    // Each server is a fresh process: its first glob policy loads the glob
    // expansion (a plain server does not) before the request runs.
    const glob = (pattern: string, access: string) => ({
      path: { type: "glob_pattern", pattern },
      access,
    });
    const entries = [
      special("root", "read"),
      glob("private/*", "none"),
      glob("*.md", "deny"),
      glob("sub/*", "write"),
      glob("sub", "write"),
    ];
    await matrix(entries, ({ ws }) => [
      {
        name: "read a hidden match",
        script: `cat ${ws}/private/p`,
        expect: (r) => {
          assertEquals([r.exitCode, r.sandboxDenied], [1, true]);
          assertStringIncludes(r.stderr, "Permission denied");
        },
      },
      {
        name: "write a file a write glob matches",
        script: `echo globbed > ${ws}/sub/file`,
        expect: (r) => {
          assertEquals([r.exitCode, r.sandboxDenied], [2, true]);
          assertStringIncludes(r.stderr, EROFS);
        },
      },
      {
        name: "create in a directory a write glob matches",
        script: `echo globbed > ${ws}/sub/new`,
        expect: (r) => {
          assertEquals([r.exitCode, r.sandboxDenied], [2, true]);
          assertStringIncludes(r.stderr, EROFS);
        },
      },
      {
        name: "read what no glob hides",
        script: `cat ${ws}/sub/file`,
        expect: (r) => assertEquals([r.exitCode, r.stdout], [0, "inside\n"]),
      },
    ]);
  },
});

Deno.test({
  name: "sandbox: placeholders never outlive the sandbox and never touch existing files",
  ignore: !available,
  async fn() {
    await using f = await sandboxFixture();
    const { server } = oursServer();
    await using _ = server;
    await server.client.initialize();
    const entries = [...WORKSPACE_WRITE, pathEntry(`${f.ws}/secret-to-be`, "none")];
    const sandbox = sandboxContext(f.ws, entries);
    const run = await runSandboxed(
      server.client,
      f.ws,
      `ls -a ${f.ws}; echo x > ${f.ws}/secret-to-be`,
      sandbox,
    );
    // Inside: the protected names and the denied path exist and are closed.
    assertStringIncludes(run.stdout, ".codex\n");
    assertStringIncludes(run.stdout, "secret-to-be\n");
    assertStringIncludes(run.stderr, "Read-only file system");
    // Sandboxes sharing a placeholder: the first one ending must not take
    // it from the second (the host path it mounts over stays until both end).
    const c = server.client;
    const ww = sandboxContext(f.ws, WORKSPACE_WRITE);
    const hold = (processId: string, script: string) =>
      c.request("process/start", {
        processId,
        argv: ["/bin/sh", "-c", script],
        cwd: `file://${f.ws}`,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        pipeStdin: true,
        sandbox: ww,
      });
    await hold("first", "echo ready; cat");
    await c.notification("process/output", (p) => p.processId === "first");
    await hold("second", `read x; mkdir ${f.ws}/.codex/hooks; echo $?`);
    await c.request("process/terminate", { processId: "first" });
    await c.notification("process/closed", (p) => p.processId === "first");
    await c.request("process/write", { processId: "second", chunk: btoa("go\n"), writeId: "w" });
    const second = await c.notification("process/closed", (p) => p.processId === "second");
    const read = await c.request("process/read", { processId: "second" });
    const said = read.chunks.map((x: Msg) => atob(x.chunk)).join("");
    assertStringIncludes(said, "Read-only file system");
    assertEquals(second.params.processId, "second");
    // Outside, once they ended: nothing left behind.
    const names = [];
    for await (const e of Deno.readDir(f.ws)) names.push(e.name);
    assertEquals(names.sort(), [".git", "dangle", "link", "private", "sub"]);
  },
});

Deno.test({
  name: "sandbox: a path swapped between a directory and a symlink out never lets a write escape",
  ignore: !available,
  async fn() {
    await using f = await sandboxFixture();
    const { server } = oursServer();
    await using _ = server;
    await server.client.initialize();
    const race = `${f.ws}/race`;
    await Deno.mkdir(`${f.ws}/race-dir`);
    await Deno.symlink(f.outside, `${f.ws}/race-link`);
    let flipping = true;
    const flipper = (async () => {
      let toLink = true;
      while (flipping) {
        try {
          Deno.renameSync(toLink ? `${f.ws}/race-link` : `${f.ws}/race-dir`, race);
          Deno.renameSync(race, toLink ? `${f.ws}/race-link` : `${f.ws}/race-dir`);
        } catch { /* the sandbox holds it */ }
        toLink = !toLink;
        await new Promise((r) => setTimeout(r, 0));
      }
    })();
    try {
      const run = await runSandboxed(
        server.client,
        f.ws,
        `i=0; while [ $i -lt 300 ]; do echo x > ${race}/escaped 2>/dev/null; i=$((i+1)); done; echo done`,
        sandboxContext(f.ws, WORKSPACE_WRITE),
      );
      assertEquals(run.stdout, "done\n");
    } finally {
      flipping = false;
      await flipper;
    }
    assert(!(await exists(`${f.outside}/escaped`)), "a write landed outside");
  },
});

Deno.test({
  name: "sandbox: signals, terminate with grace, the whole tree, stdin and a terminal inside",
  ignore: !available,
  async fn() {
    await using f = await sandboxFixture();
    const { server } = oursServer();
    await using _ = server;
    const c = server.client;
    await c.initialize();
    const sandbox = sandboxContext(f.ws, WORKSPACE_WRITE);
    const start = (processId: string, script: string, extra: Msg = {}) =>
      c.request("process/start", {
        processId,
        argv: ["/bin/sh", "-c", script],
        cwd: `file://${f.ws}`,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox,
        ...extra,
      });
    const output = async (processId: string, until: string) => {
      let text = "";
      let after = 0;
      while (!text.includes(until)) {
        const r = await c.request("process/read", { processId, afterSeq: after, waitMs: 2000 });
        for (const chunk of r.chunks) {
          text += new TextDecoder().decode(Uint8Array.fromBase64(chunk.chunk));
        }
        after = r.nextSeq - 1;
        if (r.closed) break;
      }
      return text;
    };
    const exited = (processId: string) =>
      c.notification("process/exited", (p) => p.processId === processId, 15_000)
        .then((m) => m.params);

    // A trap runs: the signal reaches the program, not bwrap.
    await start(
      "trap",
      "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done",
    );
    await output("trap", "ready");
    await c.request("process/signal", { processId: "trap", signal: "interrupt" });
    assertEquals((await exited("trap")).exitCode, 7);

    // terminate with grace: SIGTERM first (trap runs), the exit follows.
    await start("grace", "trap 'echo bye; exit 3' TERM; echo ready; while :; do sleep 0.05; done");
    await output("grace", "ready");
    await c.request("process/terminate", { processId: "grace", graceMs: 2000 });
    assertEquals((await exited("grace")).exitCode, 3);

    // The whole tree: background children die with the sandbox.
    await start("tree", "sleep 31337 & sleep 31338 & echo ready; wait");
    await output("tree", "ready");
    assert(await eventually(() => sleepers().length >= 2), "the children run");
    await c.request("process/terminate", { processId: "tree" });
    assertEquals((await exited("tree")).exitCode, 137);
    assert(await eventually(() => sleepers().length === 0), `survivors: ${sleepers()}`);

    // stdin.
    await start("cat", "cat", { pipeStdin: true });
    await c.request("process/write", { processId: "cat", chunk: btoa("hello\n"), writeId: "w1" });
    await c.request("process/closeStdin", { processId: "cat" });
    assertEquals(await output("cat", "hello\n"), "hello\n");

    // A real terminal inside the sandbox, resizable.
    await start("tty", "tty; stty size; read x; stty size", { tty: true, rows: 30, cols: 100 });
    const first = await output("tty", "30 100");
    // bubblewrap shows the terminal as /dev/console (so does the reference).
    assertStringIncludes(first, "/dev/console");
    await c.request("process/resize", { processId: "tty", rows: 40, cols: 120 });
    await c.request("process/write", { processId: "tty", chunk: btoa("\n"), writeId: "w2" });
    assertStringIncludes(await output("tty", "40 120"), "40 120");
  },
});

/** Host pids of the tree test's sleepers. */
function sleepers(): number[] {
  const found = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const cmdline = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`);
      const [program, seconds] = cmdline.split("\0");
      if (program === "sleep" && (seconds === "31337" || seconds === "31338")) {
        const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
        if (stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z") {
          found.push(Number(entry.name));
        }
      }
    } catch { /* gone */ }
  }
  return found;
}

Deno.test({
  name: "sandbox fs/*: the same results and errors as the reference for every policy and path",
  ignore: !available,
  async fn() {
    await using f = await sandboxFixture();
    const list = await servers();
    const data = btoa("data");
    const u = (p: string) => `file://${p}`;
    const ro = sandboxContext(f.ws, READ_ONLY);
    const ww = sandboxContext(f.ws, WORKSPACE_WRITE);
    const hidden = sandboxContext(f.ws, [...READ_ONLY, pathEntry(`${f.ws}/private`, "none")]);
    // What apply_patch sends: the policy context and the home directory.
    const patch = {
      ...ww,
      policyContext: { cwd: u(f.ws), workspaceRoots: [u(f.ws)] },
      userHomeDir: u("/root"),
    };
    const calls: Array<[string, Msg]> = [
      ["fs/readFile", { path: u(`${f.ws}/sub/file`), sandbox: ro }],
      ["fs/writeFile", { path: u(`${f.ws}/new.txt`), dataBase64: data, sandbox: ro }],
      ["fs/writeFile", { path: u(`${f.ws}/new.txt`), dataBase64: data, sandbox: ww }],
      ["fs/writeFile", { path: u(`${f.ws}/patched.txt`), dataBase64: data, sandbox: patch }],
      ["fs/writeFile", { path: u(`${f.ws}/sub/file`), dataBase64: data, sandbox: patch }],
      ["fs/writeFile", { path: u(`${f.ws}/.git/config`), dataBase64: data, sandbox: ww }],
      ["fs/writeFile", { path: u(`${f.ws}/link/x.txt`), dataBase64: data, sandbox: ww }],
      ["fs/writeFile", { path: u(`${f.ws}/dangle`), dataBase64: data, sandbox: ww }],
      ["fs/writeFile", { path: u(`${f.outside}/y.txt`), dataBase64: data, sandbox: ww }],
      ["fs/writeFile", { path: u(`${f.ws}/.codex/config.toml`), dataBase64: data, sandbox: ww }],
      ["fs/createDirectory", { path: u(`${f.ws}/.agents`), sandbox: ww }],
      ["fs/createDirectory", { path: u(`${f.ws}/d1`), sandbox: ro }],
      ["fs/remove", { path: u(`${f.ws}/sub/file`), sandbox: ro }],
      ["fs/copy", {
        sourcePath: u(`${f.outside}/s.txt`),
        destinationPath: u(`${f.ws}/copied`),
        recursive: false,
        sandbox: ww,
      }],
      ["fs/copy", {
        sourcePath: u(`${f.ws}/sub/file`),
        destinationPath: u(`${f.outside}/c2`),
        recursive: false,
        sandbox: ww,
      }],
      ["fs/readDirectory", { path: u(`${f.ws}/private`), sandbox: ro }],
      ["fs/readFile", { path: u(`${f.ws}/private/p`), sandbox: hidden }],
      ["fs/canonicalize", { path: u(`${f.ws}/link`), sandbox: ww }],
      ["fs/remove", { path: u(`${f.ws}/new.txt`), sandbox: ww }],
    ];
    const answers = new Map<string, Msg[]>();
    const leftovers: string[] = [];
    try {
      for (const { name, server } of list) {
        for (const [i, [method, params]] of calls.entries()) {
          const res = await server.client.call(method, params, 30_000);
          const answer = res.error
            ? { error: res.error }
            : { result: JSON.parse(JSON.stringify(res.result).replaceAll(f.base, "$BASE")) };
          const key = `${i} ${method} ${params.path ?? params.destinationPath}`;
          answers.set(key, [...(answers.get(key) ?? []), answer]);
          if (name === "ours" && (i === 3 || i === 4)) {
            const written = i === 3 ? "patched.txt" : "sub/file";
            assertEquals(await Deno.readTextFile(`${f.ws}/${written}`), "data");
          }
        }
        // Reset what the writes changed for the next server.
        for (const p of ["patched.txt", "copied"]) {
          await Deno.remove(`${f.ws}/${p}`).catch(() => {});
        }
        await Deno.writeTextFile(`${f.ws}/sub/file`, "inside\n");
        if (name === "ours") {
          // Once our server has ended, none of its sandboxes' placeholders is
          // left in the workspace (their removal follows each sandbox's exit).
          await server[Symbol.asyncDispose]();
          await eventually(
            async () => !(await exists(`${f.ws}/.codex`)) && !(await exists(`${f.ws}/.agents`)),
            5000,
          );
          for (const p of [".codex", ".agents"]) {
            if (await exists(`${f.ws}/${p}`)) leftovers.push(p);
          }
          // The reference's own placeholders are its business.
          for (const p of [".codex", ".agents"]) {
            await Deno.remove(`${f.ws}/${p}`, { recursive: true }).catch(() => {});
          }
        }
      }
    } finally {
      await closeAll(list);
    }
    const ours = [...answers.values()].map((a) => a[0]!);
    assertEquals(ours[1], {
      error: { code: -32603, message: "Read-only file system (os error 30)" },
    });
    assertEquals(ours[2], { result: {} });
    assertEquals(ours[4], { result: {} });
    assertEquals(ours[9], {
      error: { code: -32603, message: "Read-only file system (os error 30)" },
    });
    assertEquals(ours[16], { error: { code: -32600, message: "Permission denied (os error 13)" } });
    for (const [key, [a, b]] of answers) {
      if (b) assertEquals(a, b, `${key}: ours vs the reference`);
    }
    // Nothing created outside; no placeholder of ours left in the workspace.
    assert(!(await exists(`${f.outside}/y.txt`)) && !(await exists(`${f.outside}/x.txt`)));
    assertEquals(leftovers, [], "placeholders left in the workspace by our server");
  },
});

Deno.test({
  name: "sandbox: never a silent fallback — without bubblewrap sandboxed requests fail clearly",
  async fn() {
    await using f = await sandboxFixture();
    const { server } = oursServer([], { EXEC_SERVER_BWRAP: "/nonexistent/bwrap" });
    await using _ = server;
    const c = server.client;
    const info = (await c.initialize()).environmentInfo;
    assertEquals(info.capabilities.linuxSandbox, false);
    assertEquals(info.capabilities.sandboxedFileStreaming, false);
    assertEquals(info.sandbox.available, false);
    assertStringIncludes(info.sandbox.reason, "bubblewrap");
    const refused = await c.call("process/start", {
      processId: "p",
      argv: ["/bin/sh", "-c", `touch ${f.ws}/escaped`],
      cwd: `file://${f.ws}`,
      env: {},
      tty: false,
      sandbox: sandboxContext(f.ws, READ_ONLY),
    });
    assertEquals(refused.error.code, -32603);
    assertStringIncludes(refused.error.message, "sandbox requested but unavailable");
    assertStringIncludes(refused.error.message, "apt-get install bubblewrap");
    const write = await c.call("fs/writeFile", {
      path: `file://${f.ws}/escaped`,
      dataBase64: btoa("x"),
      sandbox: sandboxContext(f.ws, WORKSPACE_WRITE),
    });
    assertEquals(write.error.code, -32603);
    assert(!(await exists(`${f.ws}/escaped`)), "nothing ran unconfined");
    // Unsandboxed requests are unaffected.
    const plain = await runSandboxed(c, f.ws, "echo fine", null);
    assertEquals([plain.sandboxType, plain.stdout], ["none", "fine\n"]);
  },
});

Deno.test({
  name: "sandbox: `disabled` runs unconfined; bad policies get the reference's errors",
  ignore: !available,
  async fn() {
    await using f = await sandboxFixture();
    const list = await servers();
    const base = sandboxContext(f.ws, READ_ONLY);
    const bad: Msg[] = [
      { ...base, permissions: { type: "disabled" } },
      { ...base, permissions: { ...base.permissions, network: "open" } },
      { ...base, permissions: { type: "bogus" } },
      {
        ...base,
        permissions: {
          ...base.permissions,
          file_system: { type: "restricted", entries: [special("nowhere", "read")] },
        },
      },
      {
        ...base,
        permissions: {
          ...base.permissions,
          file_system: { type: "restricted", entries: [special("root", "execute")] },
        },
      },
      { permissions: base.permissions },
      { ...base, windowsSandboxLevel: "max" },
    ];
    const answers: Msg[][] = [];
    try {
      for (const { server } of list) {
        const mine: Msg[] = [];
        for (const [i, sandbox] of bad.entries()) {
          const res = await server.client.call("process/start", {
            processId: `bad${i}`,
            argv: ["/bin/sh", "-c", "echo ran"],
            cwd: `file://${f.ws}`,
            env: {},
            tty: false,
            sandbox,
          });
          mine.push(res.error ?? res.result);
        }
        answers.push(mine);
      }
    } finally {
      await closeAll(list);
    }
    const [ours, reference] = answers;
    // `disabled` runs unconfined, and we say so. The reference reports
    // `linuxSeccomp` although nothing confines the child (README).
    assertEquals(ours![0], { processId: "bad0", sandboxType: "none" });
    if (reference) assertEquals(reference[0], { processId: "bad0", sandboxType: "linuxSeccomp" });
    for (const answer of ours!.slice(1)) assertEquals(answer.code, -32602, JSON.stringify(answer));
    if (reference) assertEquals(ours!.slice(1), reference.slice(1));
  },
});

Deno.test({
  name: "sandbox: --linux-sandbox-pid-namespace inherit shares the server's PID namespace",
  ignore: !available,
  async fn() {
    await using f = await sandboxFixture();
    for (const [mode, isolated] of [["isolate", true], ["inherit", false]] as const) {
      const { server } = oursServer(["--linux-sandbox-pid-namespace", mode]);
      await using _ = server;
      await server.client.initialize();
      const run = await runSandboxed(
        server.client,
        f.ws,
        "echo $$",
        sandboxContext(f.ws, READ_ONLY),
      );
      const pid = Number(run.stdout.trim());
      assertEquals(pid <= 3, isolated, `${mode}: pid ${pid}`);
    }
    const bad = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "cli.ts", "serve", "--linux-sandbox-pid-namespace", "shared"],
      stdout: "null",
      stderr: "piped",
    }).outputSync();
    assertEquals(bad.code, 2);
    assertStringIncludes(new TextDecoder().decode(bad.stderr), "expected isolate or inherit");
  },
});

/** Runs a classic BPF seccomp program on one x86_64 syscall: true = allowed. */
function allows(program: Uint8Array, nr: number, arg0 = 0): boolean {
  const view = new DataView(program.buffer);
  const data = [nr, 0xc000003e, 0, 0, arg0]; // nr, arch, ip (2 words), args[0] low
  let acc = 0;
  for (let pc = 0; pc * 8 < program.byteLength;) {
    const code = view.getUint16(pc * 8, true);
    const jt = view.getUint8(pc * 8 + 2);
    const jf = view.getUint8(pc * 8 + 3);
    const k = view.getUint32(pc * 8 + 4, true);
    if (code === 0x20) acc = data[k / 4]!; // LD W ABS
    else if (code === 0x06) return k === 0x7fff0000; // RET
    else if (code === 0x15) pc += acc === k ? jt : jf; // JEQ
    else if (code === 0x35) pc += acc >= k ? jt : jf; // JGE
    else throw new Error(`unexpected BPF op ${code}`);
    pc++;
  }
  throw new Error("fell off the program");
}

Deno.test("seccomp program: routed allows IP sockets only, still refuses inspection", () => {
  const [SOCKET, CONNECT, PTRACE] = [41, 42, 101];
  const [AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK] = [1, 2, 10, 16, 17, 40];
  const routed = seccompProgram("routed", "x86_64")!;
  const restricted = seccompProgram("restricted", "x86_64")!;
  const enabled = seccompProgram("enabled", "x86_64")!;
  for (const family of [AF_UNIX, AF_INET, AF_INET6]) assert(allows(routed, SOCKET, family));
  for (const family of [AF_NETLINK, AF_PACKET, AF_VSOCK]) assert(!allows(routed, SOCKET, family));
  assert(allows(routed, CONNECT) && !allows(routed, PTRACE));
  assert(allows(restricted, SOCKET, AF_UNIX) && !allows(restricted, SOCKET, AF_INET));
  assert(!allows(restricted, CONNECT) && !allows(restricted, PTRACE));
  assert(allows(enabled, SOCKET, AF_NETLINK) && !allows(enabled, SOCKET, AF_VSOCK));
  assert(allows(enabled, PTRACE));
});

Deno.test("seccomp program: well-formed for both architectures, refusing by default", () => {
  for (const arch of ["x86_64", "aarch64"]) {
    for (const network of ["restricted", "enabled", "routed"] as const) {
      const program = seccompProgram(network, arch)!;
      assertEquals(program.byteLength % 8, 0);
      const view = new DataView(program.buffer);
      // First: load the architecture; last: return EPERM (the refusal path).
      assertEquals([view.getUint16(0, true), view.getUint32(4, true)], [0x20, 4]);
      const last = program.byteLength - 8;
      assertEquals([view.getUint16(last, true), view.getUint32(last + 4, true)], [0x06, 0x50001]);
    }
  }
  assertEquals(seccompProgram("restricted", "mips"), null);
});

Deno.test({
  name:
    "sandbox fs gateway: a protected path removed between planning and bubblewrap's setup is planned again, and stays protected",
  ignore: !sandboxSupport().available,
  fn: async () => {
    await using fx = await sandboxFixture();
    await Deno.mkdir(`${fx.ws}/.codex`);
    const { sandbox } = decodeParams(REQUESTS["fs/writeFile"].decode, {
      path: `file://${fx.ws}`,
      dataBase64: "",
      sandbox: sandboxContext(fx.ws, WORKSPACE_WRITE),
    });
    // Planned while .codex exists (a read-only bind of it); it is gone by
    // the time bubblewrap mounts it, which then fails the whole setup.
    const planner = plannerFor(sandbox, "write")!;
    await Deno.remove(`${fx.ws}/.codex`);
    await using gateway = new SandboxFsGateway();
    const write = (path: string) =>
      gateway.call(planner, "fs/writeFile", {
        path: `file://${path}`,
        dataBase64: btoa("x"),
      }).then(() => "written", (e) => (e as Error).message);
    assertEquals(await write(`${fx.ws}/sub/new`), "written");
    assertEquals(await Deno.readTextFile(`${fx.ws}/sub/new`), "x");
    // The new plan protects .codex as missing: it cannot be created.
    assertStringIncludes(await write(`${fx.ws}/.codex/config.toml`), "os error");
    assertEquals(await exists(`${fx.ws}/.codex/config.toml`), false);
  },
});

Deno.test({
  name:
    "sandbox launch: a protected directory or file removed between planning and bubblewrap's setup neither fails the launch nor becomes writable",
  ignore: !sandboxSupport().available,
  fn: async () => {
    await using fx = await sandboxFixture();
    const run = async (script: string) => {
      const { sandbox } = decodeParams(REQUESTS["fs/writeFile"].decode, {
        path: `file://${fx.ws}`,
        dataBase64: "",
        sandbox: sandboxContext(fx.ws, WORKSPACE_WRITE),
      });
      // The placeholders bubblewrap made on the host last time (a mount
      // point it had to create) and the fixture's .git directory go first.
      for (const name of [".codex", ".git"]) {
        await Deno.remove(`${fx.ws}/${name}`, { recursive: true }).catch(() => {});
      }
      await Deno.mkdir(`${fx.ws}/.codex`);
      await Deno.writeTextFile(`${fx.ws}/.git`, "gitdir: /nowhere\n");
      // Planned while both exist (read-only binds of them); gone by the
      // time bubblewrap mounts them.
      const plan = sandboxPlan(sandbox)!;
      await Deno.remove(`${fx.ws}/.codex`);
      await Deno.remove(`${fx.ws}/.git`);
      const [program, ...args] = sandboxCommand(plan, fx.ws, ["/bin/sh", "-c", script]);
      const out = await new Deno.Command(program!, { args, stdout: "piped", stderr: "piped" })
        .output();
      const text = new TextDecoder();
      return { code: out.code, stdout: text.decode(out.stdout), stderr: text.decode(out.stderr) };
    };
    const launched = await run("echo launched; touch ok");
    assertEquals([launched.code, launched.stdout], [0, "launched\n"], launched.stderr);
    assertEquals(await exists(`${fx.ws}/ok`), true);
    const writes = await run(
      "mkdir -p .codex/x 2>/dev/null || echo no-dir; " +
        "echo x > .codex/config.toml 2>/dev/null || echo no-file; " +
        "echo x > .git 2>/dev/null || echo no-git",
    );
    assertEquals(writes.stdout, "no-dir\nno-file\nno-git\n", writes.stderr);
    // Nothing was written through to the host either.
    for (const path of [".codex/x", ".codex/config.toml"]) {
      assertEquals(await exists(`${fx.ws}/${path}`), false, path);
    }
    const git = await Deno.readTextFile(`${fx.ws}/.git`).catch(() => "");
    assertEquals(git, "", "the placeholder stays empty");
  },
});
