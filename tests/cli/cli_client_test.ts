import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, firstLine } from "../helpers/wire_client.ts";
import { runCli } from "../helpers/cli.ts";
import { splitCommand } from "../../src/cli/client_args.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";
import { scratchRoot } from "../helpers/reference.ts";
import { VERSION } from "../../src/version.ts";

const dec = new TextDecoder();

const cli = (args: string[], stdin?: string) => runCli(args, { stdin });

Deno.test("cli exec: streams output, forwards stdin, exits with the remote code", async () => {
  const r = await cli([
    "exec",
    "--env",
    "GREETING=hi",
    "--",
    "sh",
    "-c",
    'echo "$GREETING"; echo err >&2; exit 7',
  ]);
  assertEquals([r.code, r.stdout, r.stderr], [7, "hi\n", "err\n"]);
  const cat = await cli(["exec", "--", "cat"], "piped input\n");
  assertEquals([cat.code, cat.stdout], [0, "piped input\n"]);
  const cwd = await cli(["exec", "--cwd", "/tmp", "--", "pwd"]);
  assertEquals(cwd.stdout, "/tmp\n");
  const bad = await cli(["exec", "--env", "NOEQUALS", "--", "true"]);
  assertEquals(bad.code, 2);
  assertStringIncludes(bad.stderr, "expected KEY=VALUE");
});

Deno.test("cli exec: Ctrl-C interrupts the remote process group", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "exec",
      "--",
      "sh",
      "-c",
      "trap 'echo interrupted; exit 42' INT; echo ready; while :; do sleep 0.05; done",
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const { line, rest } = await firstLine(child.stdout);
  assertEquals(line, "ready");
  child.kill("SIGINT");
  let tail = "";
  for (let r = await rest.read(); !r.done; r = await rest.read()) tail += dec.decode(r.value);
  assertStringIncludes(tail, "interrupted");
  assertEquals((await child.status).code, 42);
});

Deno.test("cli exec/fs/info against a WebSocket server with a token", async () => {
  const dir = await Deno.realPath(await Deno.makeTempDir());
  await Deno.writeTextFile(`${dir}/token`, "cli-test-token");
  const server = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "--listen",
      "ws://127.0.0.1:0",
      "--ws-auth",
      "capability-token",
      "--ws-token-file",
      `${dir}/token`,
      "--log-level",
      "error",
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const { line: url, rest } = await firstLine(server.stdout);
  try {
    const conn = ["--url", url, "--token-file", `${dir}/token`];
    const info = await cli(["info", ...conn]);
    assertEquals(info.code, 0);
    assertEquals(JSON.parse(info.stdout).platformOs, "linux");
    const denied = await cli(["info", "--url", url]);
    assert(denied.code !== 0);
    assertStringIncludes(denied.stderr, "401");
    await Deno.writeTextFile(`${dir}/local.txt`, "uploaded\n");
    assertEquals(
      (await cli(["fs", "put", ...conn, `${dir}/local.txt`, `${dir}/remote.txt`])).code,
      0,
    );
    assertEquals((await cli(["fs", "cat", ...conn, `${dir}/remote.txt`])).stdout, "uploaded\n");
    assertEquals(
      (await cli(["fs", "get", ...conn, `${dir}/remote.txt`, `${dir}/back.txt`])).code,
      0,
    );
    assertEquals(await Deno.readTextFile(`${dir}/back.txt`), "uploaded\n");
    assertEquals((await cli(["fs", "mkdir", "-p", ...conn, `${dir}/x/y`])).code, 0);
    const ls = await cli(["fs", "ls", ...conn, dir]);
    assertStringIncludes(ls.stdout, "d x\n");
    assertStringIncludes(ls.stdout, "- remote.txt\n");
    assertEquals(
      JSON.parse((await cli(["fs", "stat", ...conn, `${dir}/remote.txt`])).stdout).size,
      9,
    );
    assertEquals((await cli(["fs", "rm", "-r", ...conn, `${dir}/x`])).code, 0);
    const missing = await cli(["fs", "cat", ...conn, `${dir}/x/nothing`]);
    assert(missing.code !== 0);
    assertStringIncludes(missing.stderr, "No such file or directory");
    const exec = await cli(["exec", ...conn, "--", "sh", "-c", "exit 3"]);
    assertEquals(exec.code, 3);
  } finally {
    server.kill("SIGTERM");
    await server.status;
    await rest.cancel();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("splitCommand honours quotes", () => {
  assertEquals(splitCommand(`deno run -A "my cli.ts" --x 'a b' ""`), [
    "deno",
    "run",
    "-A",
    "my cli.ts",
    "--x",
    "a b",
    "",
  ]);
});

Deno.test("cli exec --stdio with an explicit server command", async () => {
  const r = await cli([
    "exec",
    "--stdio",
    `${Deno.execPath()} run -A ${CLI} --listen stdio --log-level error`,
    "--",
    "echo",
    "via stdio",
  ]);
  assertEquals([r.code, r.stdout], [0, "via stdio\n"]);
});

Deno.test({
  name: "cli exec --sandbox: Codex's modes confine the program; bad modes are usage errors",
  ignore: !sandboxSupport().available,
  async fn() {
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "cli-sandbox-" });
    try {
      const script = "echo in > inside.txt && cat inside.txt; echo out > /etc/exec-server-x";
      const ro = await cli([
        "exec",
        "--cwd",
        ws,
        "--sandbox",
        "read-only",
        "--",
        "sh",
        "-c",
        script,
      ]);
      assertEquals(ro.code, 2);
      assertStringIncludes(ro.stderr, "inside.txt: Read-only file system");
      const ww = await cli([
        "exec",
        "--cwd",
        ws,
        "--sandbox",
        "workspace-write",
        "--",
        "sh",
        "-c",
        script,
      ]);
      assertEquals([ww.code, ww.stdout], [2, "in\n"]);
      assertStringIncludes(ww.stderr, "/etc/exec-server-x: Read-only file system");
      const bad = await cli(["exec", "--sandbox", "open", "--", "true"]);
      assertEquals(bad.code, 2);
      assertStringIncludes(bad.stderr, "expected read-only or workspace-write");
    } finally {
      await Deno.remove(ws, { recursive: true });
    }
  },
});

Deno.test("cli: exact errors, --version everywhere, flags around fs subcommands, sorted ls", async () => {
  const version = await cli(["exec", "--version"]);
  assertEquals([version.code, version.stdout.trim()], [0, `exec-server ${VERSION}`]);
  const url = await cli(["exec", "--url", "localhost:8000", "--", "true"]);
  assertEquals(url.code, 2);
  assertStringIncludes(url.stderr, "--url expects a ws:// or wss:// URL, got localhost:8000");
  const dead = await cli(["exec", "--stdio", "sh -c 'exit 3'", "--", "true"]);
  assertEquals(dead.code, 1);
  assertStringIncludes(dead.stderr, "exited with code 3 before answering initialize");
  const missing = await cli(["fs", "cat", "/nonexistent-exec-server"]);
  assertEquals(
    missing.stderr.trim(),
    "Error: /nonexistent-exec-server: No such file or directory (os error 2)",
  );
  const dir = await Deno.makeTempDir();
  try {
    for (const name of ["b", "c", "a"]) await Deno.writeTextFile(`${dir}/${name}`, name);
    const before = await cli(["fs", "--log-level", "warn", "ls", dir]);
    const after = await cli(["fs", "ls", dir, "--log-level", "warn"]);
    assertEquals(before.stdout, "- a\n- b\n- c\n");
    assertEquals(after.stdout, before.stdout);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // The address that is taken is named.
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    const busy = await cli(["serve", "--listen", `ws://127.0.0.1:${port}`]);
    assertEquals(busy.code, 1);
    assertStringIncludes(busy.stderr, `cannot listen on 127.0.0.1:${port}: Address already in use`);
  } finally {
    taken.close();
  }
});

Deno.test("cli: client commands run with least privilege (no re-spawn with -A)", async () => {
  const server = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", "--listen", "ws://127.0.0.1:0", "--log-level", "error"],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const { line: url, rest } = await firstLine(server.stdout);
  try {
    const host = new URL(url).host;
    const narrow = async (flags: string[], args: string[]) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", ...flags, CLI, ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
    };
    const info = await narrow([`--allow-net=${host}`], ["info", "--url", url]);
    assertEquals(info.code, 0, info.stderr);
    const exec = await narrow([`--allow-net=${host}`], ["exec", "--url", url, "--", "echo", "ok"]);
    assertEquals([exec.code, exec.stdout], [0, "ok\n"]);
    // Locally: an exec-server inside the command, with the command's permissions.
    const local = await narrow(["--allow-env", "--allow-run", "--allow-read"], [
      "exec",
      "--",
      "sh",
      "-c",
      "echo local",
    ]);
    assertEquals([local.code, local.stdout], [0, "local\n"], local.stderr);
  } finally {
    server.kill("SIGTERM");
    await server.status;
    await rest.cancel();
  }
});

Deno.test("cli exec --tty under narrow permissions names the missing ones", async () => {
  const run = async (flags: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...flags, CLI, "exec", "--tty", "--", "echo", "tty-ok"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  };
  const narrow = await run(["--allow-net", "--allow-env"]);
  assertEquals(narrow.code, 1);
  assertStringIncludes(
    narrow.stderr,
    "terminals need Deno permissions this server lacks: run it with --allow-ffi --allow-read --allow-write --allow-run",
  );
  const some = await run(["--allow-net", "--allow-env", "--allow-ffi", "--allow-run"]);
  assertStringIncludes(some.stderr, "run it with --allow-read --allow-write;");
  const all = await run([
    "--allow-net",
    "--allow-env",
    "--allow-ffi",
    "--allow-run",
    "--allow-read",
    "--allow-write",
  ]);
  assertEquals([all.code, all.stdout.trim()], [0, "tty-ok"], all.stderr);
});

Deno.test("cli --remote at a closed port names the URL and the cause", async () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/token`, "harness-token");
    const r = await cli([
      "exec",
      "--remote",
      `http://127.0.0.1:${port}`,
      "--environment-id",
      "env1",
      "--token-file",
      `${dir}/token`,
      "--",
      "true",
    ]);
    assertEquals(r.code, 1);
    assertStringIncludes(
      r.stderr,
      `cannot reach http://127.0.0.1:${port}/cloud/environment/env1/connect: `,
    );
    assertStringIncludes(r.stderr, "Connection refused");
    assert(!r.stderr.includes("fetch failed"), r.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: a blank --environment-id is refused wherever it is taken", async () => {
  const token = await Deno.makeTempFile();
  try {
    await Deno.writeTextFile(token, "t");
    for (
      const args of [
        [
          "exec",
          "--remote",
          "http://127.0.0.1:9",
          "--environment-id",
          "  ",
          "--token-file",
          token,
          "--",
          "true",
        ],
        ["serve", "--remote", "http://127.0.0.1:9", "--environment-id", " "],
        [
          "forward",
          "--remote",
          "http://127.0.0.1:9",
          "--environment-id",
          "\t",
          "--to",
          "ws://127.0.0.1:9",
        ],
      ]
    ) {
      const out = await cli(args);
      assertEquals(out.code, 2, `${args[0]}: ${out.stderr}`);
      assertStringIncludes(out.stderr, "--environment-id is blank");
    }
  } finally {
    await Deno.remove(token);
  }
});
