import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { CLI } from "../helpers/wire_client.ts";
import { runCli } from "../helpers/cli.ts";
import { formatBytes, progressLine, progressStream } from "../../src/cli/progress.ts";
import { VERSION } from "../../src/version.ts";

const dec = new TextDecoder();

Deno.test("progress: line shows bytes, percentage, rate and ETA", () => {
  const line = progressLine("put big.bin", 50 * 1024 * 1024, 200 * 1024 * 1024, 2000);
  assertEquals(
    line,
    "put big.bin  [#####               ] 25%  50.0 MiB / 200.0 MiB  25.0 MiB/s  ETA 6s",
  );
  assertEquals(progressLine("get x", 1536, undefined, 1000), "get x  1.5 KiB  1.5 KiB/s");
  assertStringIncludes(progressLine("x", 0, 10, 0), "ETA --");
  assertEquals(formatBytes(0), "0 B");
  assertEquals(formatBytes(3 * 1024 ** 3), "3.0 GiB");
});

Deno.test("progress: redraws at most once per interval and ends with a newline", async () => {
  const writes: string[] = [];
  let t = 0;
  const output = { writeSync: (b: Uint8Array) => (writes.push(dec.decode(b)), b.length) };
  const chunks = Array.from({ length: 10 }, () => new Uint8Array(100));
  const got: number[] = [];
  await ReadableStream.from(chunks)
    .pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          t += 30; // 30 ms per chunk: ~every 4th chunk redraws at 100 ms
          c.enqueue(chunk);
        },
      }),
    )
    .pipeThrough(progressStream({ label: "put f", total: 1000, output, now: () => t }))
    .pipeTo(new WritableStream({ write: (c) => void got.push(c.byteLength) }));
  assertEquals(got.reduce((a, b) => a + b), 1000, "every byte passes through");
  assert(writes.length >= 3 && writes.length <= 5, `drew ${writes.length} times`);
  assert(writes.every((w) => w.startsWith("\r")));
  const last = writes.at(-1)!;
  assert(last.endsWith("\n"));
  assertStringIncludes(last, "100%");
  assertStringIncludes(last, "1000 B / 1000 B");
});

const cli = (args: string[]) => runCli(args);

/**
 * Runs `command` under `script` (a pseudo-terminal) until `until` shows up. The command is
 * `exec`ed by a fixed `/bin/sh`, so a Ctrl-C reaches our process, never a shell in between
 * (dash dies of SIGINT and `script` would report 130 whatever the server did).
 */
async function onTerminal(command: string, until: string, interrupt = false): Promise<string> {
  const child = new Deno.Command("script", {
    args: ["-qec", `exec ${command}`, "/dev/null"],
    env: { SHELL: "/bin/sh" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.getReader();
  const writer = child.stdin.getWriter();
  let text = "";
  try {
    while (!text.includes(until)) {
      const r = await reader.read();
      if (r.done) break;
      text += dec.decode(r.value);
    }
    if (interrupt) await writer.write(new Uint8Array([3])); // Ctrl-C on the terminal
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += dec.decode(r.value);
  } finally {
    await writer.close().catch(() => {});
    await child.stderr.cancel();
  }
  const status = await child.status;
  assertEquals(status.code, 0, text);
  return text;
}

const haveScript = new Deno.Command("sh", { args: ["-c", "command -v script"] }).outputSync()
  .success;

Deno.test("cli fs put/get: progress on request, quiet when piped", async () => {
  const dir = await Deno.realPath(await Deno.makeTempDir());
  try {
    await Deno.writeFile(`${dir}/big.bin`, new Uint8Array(3 * 1024 * 1024).fill(7));
    const quiet = await cli(["fs", "put", `${dir}/big.bin`, `${dir}/up.bin`]);
    assertEquals([quiet.code, quiet.stderr], [0, ""], "no progress when stderr is piped");
    const put = await cli(["fs", "put", "--progress", `${dir}/big.bin`, `${dir}/up2.bin`]);
    assertEquals(put.code, 0, put.stderr);
    assertStringIncludes(put.stderr, `put ${dir}/big.bin`);
    assertStringIncludes(put.stderr, "100%  3.0 MiB / 3.0 MiB");
    assert(put.stderr.endsWith("\n"));
    const get = await cli(["fs", "get", `${dir}/up2.bin`, `${dir}/down.bin`, "--progress"]);
    assertEquals(get.code, 0, get.stderr);
    assertStringIncludes(get.stderr, "100%  3.0 MiB / 3.0 MiB");
    assertEquals((await Deno.stat(`${dir}/down.bin`)).size, 3 * 1024 * 1024);
    const off = await cli(["fs", "get", "--no-progress", `${dir}/up2.bin`, `${dir}/d2.bin`]);
    assertEquals([off.code, off.stderr], [0, ""]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "cli on a terminal: fs put draws progress, serve prints a startup line and stops on Ctrl-C",
  ignore: !haveScript,
  fn: async () => {
    const dir = await Deno.realPath(await Deno.makeTempDir());
    try {
      await Deno.writeFile(`${dir}/f.bin`, new Uint8Array(1024 * 1024));
      const deno = `${Deno.execPath()} run -A ${CLI}`;
      const put = await onTerminal(`${deno} fs put ${dir}/f.bin ${dir}/g.bin`, "\n");
      assertStringIncludes(put, "100%  1.0 MiB / 1.0 MiB");
      const serve = await onTerminal(
        `${deno} --listen ws://127.0.0.1:0 --log-level error`,
        "Ctrl-C to stop",
        true,
      );
      assert(
        new RegExp(`exec-server ${VERSION} listening on ws://127\\.0\\.0\\.1:\\d+ \\(Ctrl-C`)
          .test(serve),
        serve,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("cli serve: no human line when stderr is piped", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "--listen", "stdio"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  await child.stdin.close();
  const out = await child.output();
  assertEquals(out.code, 0);
  const stderr = dec.decode(out.stderr);
  assert(!stderr.includes("serving JSON-RPC on stdio"), stderr);
  for (const line of stderr.split("\n").filter(Boolean)) JSON.parse(line); // only the JSON log
});
