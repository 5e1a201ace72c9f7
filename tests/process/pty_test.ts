import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  collectProcess,
  eventually,
  inProcessStdio,
  startProcess,
  text,
  type WireClient,
} from "../helpers/wire_client.ts";
import { ptyBackend } from "../../src/process/pty/spawn_pty.ts";
import { delay } from "../../src/util/async.ts";

const available = ptyBackend().backend !== null;
if (!available) console.warn(`note: PTY tests skipped: ${ptyBackend().reason}`);
const tty = { tty: true, env: { PATH: "/usr/local/bin:/usr/bin:/bin" } };

/** Collects terminal output until `pattern` appears. */
async function until(
  c: WireClient,
  processId: string,
  pattern: string | RegExp,
  timeoutMs = 5000,
): Promise<string> {
  let out = "";
  const deadline = Date.now() + timeoutMs;
  while (!(typeof pattern === "string" ? out.includes(pattern) : pattern.test(out))) {
    const m = await c.notification(
      "process/output",
      (p) => p.processId === processId,
      deadline - Date.now(),
    );
    assertEquals(m.params.stream, "pty");
    out += text(Uint8Array.fromBase64(m.params.chunk));
  }
  return out;
}

const write = (c: WireClient, processId: string, data: string) =>
  c.request("process/write", { processId, chunk: btoa(data), writeId: crypto.randomUUID() });

Deno.test({
  name: "pty: a real controlling terminal, its size, and resize with SIGWINCH",
  ignore: !available,
  async fn() {
    await using s = inProcessStdio();
    const c = s.client;
    const info = await c.initialize();
    assertEquals([
      info.environmentInfo.capabilities.tty,
      info.environmentInfo.capabilities.ptyResize,
    ], [true, true]);
    await startProcess(c, "t", [
      "sh",
      "-c",
      "test -t 0 -a -t 1 && echo TTY-OK; tty; stty size; trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done",
    ], { ...tty, rows: 30, cols: 100 });
    const first = await until(c, "t", "ready");
    assertStringIncludes(first, "TTY-OK\r\n");
    assert(/\/dev\/pts\/\d+\r\n/.test(first), first);
    assertStringIncludes(first, "30 100\r\n");
    assertEquals(await c.request("process/resize", { processId: "t", rows: 50, cols: 132 }), {});
    assertStringIncludes(await until(c, "t", "50 132"), "50 132\r\n");
    await c.request("process/terminate", { processId: "t" });
    const run = await collectProcess(c, "t");
    assertEquals(run.exitCode, 137);
    assertEquals(run.signal, "SIGKILL", "signal deaths are reported truthfully");
    const notTty = await startProcess(c, "p", ["sleep", "1"]);
    assert(notTty.result);
    const e = await c.call("process/resize", { processId: "p", rows: 10, cols: 10 });
    assertEquals(e.error.code, -32600);
    assertStringIncludes(e.error.message, "not running on a terminal");
    assertEquals(
      (await c.call("process/resize", { processId: "ghost", rows: 1, cols: 1 })).error.code,
      -32600,
    );
    await c.request("process/terminate", { processId: "p" });
  },
});

Deno.test({
  name: "pty: default size 24x80, interactive read, Ctrl-C, EOF, colour only on a terminal",
  ignore: !available,
  async fn() {
    await using s = inProcessStdio();
    const c = s.client;
    await c.initialize();
    await startProcess(c, "r", [
      "sh",
      "-c",
      "stty size; printf 'name? '; read name; echo \"hello $name\"",
    ], tty);
    assertStringIncludes(await until(c, "r", "name? "), "24 80\r\n");
    await write(c, "r", "world\n");
    const r = await collectProcess(c, "r");
    assertStringIncludes(text(r.stdout), "hello world");
    assertEquals(r.exitCode, 0);

    await startProcess(c, "s", ["sleep", "30"], tty);
    await delay(200);
    await write(c, "s", "\x03");
    const slept = await collectProcess(c, "s");
    assertEquals([slept.exitCode, slept.signal], [130, "SIGINT"]);

    await startProcess(c, "cat", ["cat"], tty);
    await write(c, "cat", "line\n");
    await until(c, "cat", "line\r\nline\r\n"); // echo, then cat's copy
    await write(c, "cat", "\x04");
    assertEquals((await collectProcess(c, "cat")).exitCode, 0, "^D at an empty line is EOF");

    // closeStdin on a terminal sends ^D
    await startProcess(c, "cat2", ["cat"], tty);
    await c.request("process/closeStdin", { processId: "cat2" });
    assertEquals((await collectProcess(c, "cat2")).exitCode, 0);

    await startProcess(c, "color", ["ls", "--color=auto", "-d", "/tmp"], {
      ...tty,
      env: { ...tty.env, TERM: "xterm-256color" },
    });
    assertStringIncludes(text((await collectProcess(c, "color")).stdout), "\x1b[");
    await startProcess(c, "plain", ["ls", "--color=auto", "-d", "/tmp"], { env: tty.env });
    assert(!text((await collectProcess(c, "plain")).stdout).includes("\x1b["));
  },
});

Deno.test({
  name: "pty: job control in an interactive bash",
  ignore: !available,
  async fn() {
    await using s = inProcessStdio();
    const c = s.client;
    await c.initialize();
    await startProcess(c, "b", ["bash", "--norc", "--noprofile", "-i"], {
      ...tty,
      env: { ...tty.env, PS1: "$ " },
    });
    await until(c, "b", "$ ");
    await write(c, "b", "sleep 30\n");
    await delay(300);
    await write(c, "b", "\x03");
    await write(c, "b", "echo status=$?\n");
    assertStringIncludes(await until(c, "b", "status=130"), "status=130");
    await write(c, "b", "exit 5\n");
    assertEquals((await collectProcess(c, "b")).exitCode, 5);
  },
});

Deno.test({
  name: "pty: 10 MiB of output byte-exact; errors; arg0 is not the program",
  ignore: !available,
  async fn() {
    await using s = inProcessStdio();
    const c = s.client;
    await c.initialize();
    await startProcess(c, "big", [
      "sh",
      "-c",
      "stty -opost; head -c 10485760 /dev/zero | tr '\\0' x",
    ], tty);
    const big = await collectProcess(c, "big", 60_000);
    assertEquals(big.stdout.length, 10 * 1024 * 1024);
    assert(big.stdout.every((b) => b === 0x78));
    // As the reference words a terminal start it cannot resolve.
    const missing = await startProcess(c, "m", ["no-such-program"], tty);
    assertEquals(missing.error, {
      code: -32603,
      message:
        'Unable to spawn no-such-program because:\nNo viable candidates found in PATH "/usr/local/bin:/usr/bin:/bin"',
      data: { kind: "spawnFailed" },
    });
    const noPath = await startProcess(c, "m2", ["no-such-program"], { tty: true, env: {} });
    assertEquals(noPath.error, {
      code: -32603,
      message: "Unable to spawn no-such-program because:\nUnable to resolve the PATH",
      data: { kind: "spawnFailed" },
    });
    const absent = await startProcess(c, "m3", ["/no/such/program"], tty);
    assertEquals(absent.error, {
      code: -32603,
      message: "No such file or directory (os error 2)",
      data: { kind: "spawnNotFound" },
    });
    await startProcess(c, "a0", ["sh", "-c", "echo $0"], { ...tty, arg0: "renamed" });
    assertStringIncludes(text((await collectProcess(c, "a0")).stdout), "renamed\r\n");
  },
});

Deno.test({
  name: "pty: many terminals opened and closed leak no file descriptors",
  ignore: !available,
  async fn() {
    await using s = inProcessStdio();
    const c = s.client;
    await c.initialize();
    // Terminal descriptors only (ptmx masters and pts slaves): other test
    // files run in parallel in this process and open sockets and pipes.
    const fds = () =>
      [...Deno.readDirSync("/proc/self/fd")].filter((e) => {
        try {
          return /^\/dev\/(ptmx|pts\/)/.test(Deno.readLinkSync(`/proc/self/fd/${e.name}`));
        } catch {
          return false;
        }
      }).length;
    // warm up (Deno creates a couple of descriptors around its first child)
    await startProcess(c, "w", ["true"], tty);
    await collectProcess(c, "w", 5000);
    const before = fds();
    for (let round = 0; round < 3; round++) {
      const ids = Array.from({ length: 20 }, (_, i) => `leak-${round}-${i}`);
      await Promise.all(ids.map((id) => startProcess(c, id, ["sh", "-c", "echo hi"], tty)));
      await Promise.all(ids.map((id) => collectProcess(c, id, 5000)));
    }
    // killed ones too, including right after the start (before setsid ran)
    for (let i = 0; i < 10; i++) {
      await startProcess(c, `k${i}`, ["sleep", "30"], tty);
      await c.request("process/terminate", { processId: `k${i}` });
      assertEquals((await collectProcess(c, `k${i}`, 5000)).exitCode, 137);
    }
    assert(
      await eventually(() => fds() <= before, 30_000),
      `terminal descriptors grew from ${before} to ${fds()}`,
    );
  },
});

Deno.test({
  name: "cli exec --tty: a remote terminal, raw mode here, and the local terminal restored",
  ignore: !available || !(() => {
    try {
      return Deno.statSync("/usr/bin/script").isFile;
    } catch {
      return false;
    }
  })(),
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const cli = new URL("../../cli.ts", import.meta.url).pathname;
      const inner =
        `stty -g > ${dir}/before; ${Deno.execPath()} run -A ${cli} exec --tty -- sh -c 'test -t 0 && echo remote-tty; stty size; exit 3'; echo "code=$?"; stty -g > ${dir}/after`;
      const out = await new Deno.Command("script", {
        args: ["-qec", inner, "/dev/null"],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout);
      assertStringIncludes(text, "remote-tty");
      assertStringIncludes(text, "24 80");
      assertStringIncludes(text, "code=3");
      assertEquals(
        await Deno.readTextFile(`${dir}/after`),
        await Deno.readTextFile(`${dir}/before`),
        "terminal settings restored",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "client: RemoteProcess.resize changes a remote terminal's size",
  ignore: !available,
  async fn() {
    const { connect } = await import("../../src/client/client.ts");
    await using client = await connect({
      command: {
        program: Deno.execPath(),
        args: [
          "run",
          "-A",
          new URL("../../cli.ts", import.meta.url).pathname,
          "--listen",
          "stdio",
          "--log-level",
          "error",
        ],
      },
    });
    const p = await client.spawn([
      "sh",
      "-c",
      "trap 'stty size; exit 0' WINCH; stty size; while :; do sleep 0.05; done",
    ], { tty: true, rows: 10, cols: 40, envPolicy: null, env: { PATH: "/usr/bin:/bin" } });
    const reader = p.stdout.getReader();
    let out = "";
    while (!out.includes("10 40")) out += new TextDecoder().decode((await reader.read()).value);
    await p.resize(33, 99);
    while (!out.includes("33 99")) out += new TextDecoder().decode((await reader.read()).value);
    reader.releaseLock();
    assertEquals((await p.status).code, 0);
  },
});
