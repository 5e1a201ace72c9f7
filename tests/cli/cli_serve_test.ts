import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, firstLine, spawnStdioServer, webSocketClient } from "../helpers/wire_client.ts";
import { parseListen, parseServeArgs } from "../../src/cli/serve.ts";
import { UsageError } from "../../src/cli/common.ts";
import { COMMANDS } from "../helpers/cli_reference.ts";
import { runCli as runCliIn } from "../helpers/cli.ts";

// Deno KV for `relay` (its default store); harmless elsewhere.
const runCli = (args: string[]) => runCliIn(args, { denoFlags: ["--unstable-kv"] });

Deno.test("cli: stdio serve speaks only protocol on stdout, logs JSON on stderr, exits 0 at EOF", async () => {
  await using s = spawnStdioServer(["serve", "--listen", "stdio", "--log-level", "debug"]);
  const init = await s.client.initialize();
  assert(init.sessionId);
  assertEquals(await s.client.request("environment/status"), { status: "ready" });
  await s.client.close();
  assertEquals((await s.status).code, 0);
  const stderr = await s.stderr;
  const lines = stderr.trim().split("\n");
  assert(lines.length > 0);
  for (const line of lines) {
    const record = JSON.parse(line);
    assert(
      typeof record.ts === "string" && typeof record.level === "string" &&
        typeof record.event === "string",
      line,
    );
  }
  assert(s.client.received.every((m) => m.jsonrpc === "2.0"));
});

Deno.test("cli: a 64 MiB line is accepted; one byte more closes the connection and exits 0", async () => {
  await using s = spawnStdioServer(["--listen", "stdio", "--log-level", "error"]);
  const limit = 64 * 1024 * 1024;
  const head = '{"id":5,"method":"initialize","params":{"clientName":"';
  const tail = '"}}';
  const exact = head + "x".repeat(limit - head.length - tail.length) + tail;
  assertEquals(new TextEncoder().encode(exact).length, limit);
  await s.client.send(exact);
  const reply = await s.client.take((m) => m.id === 5, 60_000);
  assert(reply.result.sessionId);
  const over = '{"id":6,"method":"environment/status","params":{"x":"' + "y".repeat(limit) + '"}}';
  await s.client.send(over).catch(() => {});
  assertEquals((await s.status).code, 0);
  await s.client.ended;
  assert(!s.client.received.some((m) => m.id === 6));
});

Deno.test("cli: ws listener prints its URL first and stops cleanly on SIGTERM", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "--listen", "ws://127.0.0.1:0", "--log-level", "warn"],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const { line, rest } = await firstLine(child.stdout);
  assert(/^ws:\/\/127\.0\.0\.1:\d+$/.test(line), line);
  const c = await webSocketClient(line);
  await c.initialize();
  assertEquals(await c.request("environment/status"), { status: "ready" });
  await c.close();
  child.kill("SIGTERM");
  assertEquals((await child.status).code, 0);
  await rest.cancel();
});

Deno.test("cli: --exit-on-stdin-close ends a ws server when its stdin closes", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "--listen",
      "ws://127.0.0.1:0",
      "--exit-on-stdin-close",
      "--log-level",
      "error",
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const { rest } = await firstLine(child.stdout);
  await child.stdin.close();
  assertEquals((await child.status).code, 0);
  await rest.cancel();
});

Deno.test("cli: --listen validation uses the reference's messages", async () => {
  const bad = await runCli(["--listen", "ws://localhost:0"]);
  assertEquals(bad.code, 1);
  assertStringIncludes(
    bad.stderr,
    "Error: invalid websocket --listen URL `ws://localhost:0`; expected `ws://IP:PORT`",
  );
  const scheme = await runCli(["--listen", "tcp://127.0.0.1:0"]);
  assertEquals(scheme.code, 1);
  assertStringIncludes(
    scheme.stderr,
    "Error: unsupported --listen URL `tcp://127.0.0.1:0`; expected `ws://IP:PORT` or `stdio`",
  );
  const authOnStdio = await runCli([
    "--listen",
    "stdio",
    "--ws-auth",
    "capability-token",
    "--ws-token-sha256",
    "a".repeat(64),
  ]);
  assertEquals(authOnStdio.code, 1);
  assertStringIncludes(
    authOnStdio.stderr,
    "Error: WebSocket auth requires a WebSocket listener, not stdio",
  );
  const zero = await runCli(["--concurrent-requests", "0"]);
  assertEquals(zero.code, 2);
  assertStringIncludes(
    zero.stderr,
    "invalid value '0' for '--concurrent-requests <COUNT>': must be at least 1",
  );
});

Deno.test("serve args: listen targets and auth flag combinations", () => {
  assertEquals(parseListen("stdio"), { kind: "stdio" });
  assertEquals(parseListen("stdio://"), { kind: "stdio" });
  assertEquals(parseListen("ws://[::1]:0"), { kind: "ws", hostname: "::1", port: 0 });
  assertEquals(parseListen("ws://0.0.0.0:8080"), { kind: "ws", hostname: "0.0.0.0", port: 8080 });
  const fails = (args: string[], text: string, env: Record<string, string> = {}) => {
    try {
      parseServeArgs(args, env);
    } catch (error) {
      assert(error instanceof UsageError);
      assertStringIncludes(error.message, text);
      return;
    }
    throw new Error(`expected failure for ${args.join(" ")}`);
  };
  fails(
    ["--ws-auth", "capability-token"],
    "`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set",
  );
  fails(["--ws-token-sha256", "a".repeat(64)], "requires `--ws-auth`");
  fails(
    ["--ws-auth", "capability-token", "--ws-token-file", "relative.txt"],
    "must be an absolute path",
  );
  fails(["--ws-auth", "capability-token", "--ws-token-sha256", "xyz"], "64 hexadecimal characters");
  fails(["--ws-auth", "signed-bearer-token"], "`--ws-shared-secret-file` is required");
  fails(["--ws-auth", "bogus"], "invalid value 'bogus'");
  fails(["--listen", "ws://999.1.1.1:0"], "invalid websocket --listen URL");
  fails([], "CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE", {
    CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE: "yes",
  });
  fails(["--process-retention", "soon"], "expected a duration");
  const ok = parseServeArgs([
    "--process-retention",
    "500ms",
    "--session-ttl",
    "2m",
    "--http-body-limit",
    "1M",
  ], {
    CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE: "true",
  });
  assert(ok !== "help");
  assertEquals(
    [ok.processRetentionMs, ok.sessionTtlMs, ok.httpBodyLimitBytes, ok.exitOnStdinClose],
    [500, 120_000, 1024 * 1024, true],
  );
});

Deno.test("cli: capability-token file secrets shorter checks and help", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/short`, "  too-short  ");
    const r = await runCli([
      "--ws-auth",
      "signed-bearer-token",
      "--ws-shared-secret-file",
      `${dir}/short`,
    ]);
    assertEquals(r.code, 1);
    assertStringIncludes(r.stderr, "at least 32 bytes");
    await Deno.writeTextFile(`${dir}/empty`, "   \n");
    const e = await runCli(["--ws-auth", "capability-token", "--ws-token-file", `${dir}/empty`]);
    assertStringIncludes(e.stderr, "is empty");
    const help = await runCli(["serve", "--help"]);
    assertEquals(help.code, 0);
    for (
      const flag of [
        "--listen",
        "--concurrent-requests",
        "--exit-on-stdin-close",
        "--ws-auth",
        "--ws-token-file",
        "--ws-token-sha256",
        "--ws-shared-secret-file",
        "--ws-issuer",
        "--ws-audience",
        "--ws-max-clock-skew-seconds",
        "--allow-unauthenticated",
        "--process-retention",
        "--session-ttl",
        "--log-level",
      ]
    ) {
      assertStringIncludes(help.stdout, flag);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: the package's default entry (mod.ts) runs the command line; relay without KV says why", async () => {
  const mod = new URL("../../mod.ts", import.meta.url).pathname;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", mod, "serve", "--listen", "stdio", "--log-level", "error"],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(
    new TextEncoder().encode('{"id":1,"method":"initialize","params":{"clientName":"x"}}\n'),
  );
  const { line, rest } = await firstLine(child.stdout);
  assert(JSON.parse(line).result.sessionId, line);
  await writer.close();
  await rest.cancel();
  assertEquals((await child.status).code, 0);
  // Without --unstable-kv (a deno.json-less install): a clear message, exit 1.
  const relay = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-config", mod, "relay", "--listen", "http://127.0.0.1:0"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(relay.code, 1);
  assertStringIncludes(new TextDecoder().decode(relay.stderr), "--unstable-kv");
});

Deno.test("cli: SIGINT ends cleanly while a dead client's chatty process is paused by backpressure", async () => {
  const server = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", "--listen", "ws://127.0.0.1:0", "--log-level", "debug"],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const { line: url, rest } = await firstLine(server.stdout);
  const logs = server.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  const waitLog = async (event: string) => {
    while (!seen.includes(`"event":"${event}"`)) {
      const { value, done } = await logs.read();
      if (done) throw new Error(`server ended before ${event}: ${seen}`);
      seen += value;
    }
  };
  const client = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "exec",
      "--url",
      url,
      "--",
      "sh",
      "-c",
      "while :; do echo spam31344; done",
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const out = client.stdout.getReader();
  await out.read(); // it runs
  client.kill("SIGKILL");
  await client.status;
  await out.cancel();
  await waitLog("connection.closed");
  // Nobody receives its output now: it is held, and the child is (or was
  // already, by the client's flow control) paused.
  await waitLog("process.output_paused");
  server.kill("SIGINT");
  const status = await server.status;
  await rest.cancel();
  await logs.cancel();
  assertEquals(status.code, 0, seen);
  assert(!seen.includes("Top-level await"), seen);
});

Deno.test("cli help: every command lists -h/--help and --version; remote flags where taken", async () => {
  const commands = [...COMMANDS, "relay token"];
  const helps = await Promise.all(commands.map(async (c) => {
    const { code, stdout } = await runCli([...c.split(" "), "--help"]);
    return { c, code, text: stdout };
  }));
  for (const { c, code, text } of helps) {
    assertEquals(code, 0, c);
    assertStringIncludes(text, "-h, --help", c);
    assertStringIncludes(text, "--version", c);
  }
  for (
    const { c, text } of helps.filter((h) =>
      ["exec", "fs", "info", "mcp", "mcp-bridge"].includes(h.c)
    )
  ) {
    assertStringIncludes(text, "--remote <URL> --environment-id <ID>", c);
  }
});

Deno.test("cli: a bad --log-level is a usage error (exit 2), whichever command takes it", async () => {
  const runs = await Promise.all(["serve", "info", "mcp", "relay"].map(async (c) => {
    const { code, stderr } = await runCli([c, "--log-level", "loud"]);
    return { c, code, text: stderr };
  }));
  for (const { c, code, text } of runs) {
    assertEquals(code, 2, `${c}: ${text}`);
    assertStringIncludes(text, "invalid log level `loud`", c);
  }
});

Deno.test("cli relay: token create needs --store, as its help says", async () => {
  const help = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", CLI, "relay", "--help"],
    stdout: "piped",
    stderr: "null",
  }).output();
  const text = new TextDecoder().decode(help.stdout);
  assertStringIncludes(
    text,
    "token create --role executor|harness --environment ID --store URL|PATH",
  );
  const missing = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--unstable-kv",
      CLI,
      "relay",
      "token",
      "create",
      "--role",
      "harness",
      "--environment",
      "e",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(missing.code, 2);
  assertStringIncludes(new TextDecoder().decode(missing.stderr), "--store URL|PATH is required");
});

Deno.test("cli forward: the reference's sandbox and proxy flags are refused, naming where they belong", async () => {
  const base = ["forward", "--remote", "http://127.0.0.1:9", "--environment-id", "e", "--to"];
  for (
    const extra of [
      ["--linux-sandbox-transparent-tcp"],
      ["--tcp-upstream-proxy", "proxy.example:3128"],
      ["--linux-sandbox-pid-namespace", "inherit"],
    ]
  ) {
    const { code, stderr } = await runCli([...base, "ws://127.0.0.1:9", ...extra]);
    assertEquals(code, 2, stderr);
    assertStringIncludes(stderr, `${extra[0]} has no effect on forward`);
    assertStringIncludes(stderr, `start it with ${extra[0]}`);
  }
});
