import { assert, assertEquals, assertStringIncludes } from "./helpers/assert.ts";
import { CLI, firstLine } from "./helpers/wire_client.ts";
import { splitCommand } from "../src/cli/client_args.ts";
import { sandboxSupport } from "../src/sandbox/bwrap.ts";
import { scratchRoot } from "./helpers/reference.ts";

const dec = new TextDecoder();

async function cli(args: string[], stdin?: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

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
