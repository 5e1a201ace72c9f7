import { assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, firstLine, ROOT } from "../helpers/wire_client.ts";
import { VERSION } from "../../src/version.ts";
import { mcpInitialize } from "../helpers/mcp.ts";

const dec = new TextDecoder();

// The README's install line from a checkout, into a private root (offline:
// every dependency is already in the lock file and the cache).
Deno.test("install from a checkout: the installed command runs every kind of subcommand", async () => {
  const root = await Deno.makeTempDir();
  try {
    const install = await new Deno.Command(Deno.execPath(), {
      args: [
        "install",
        "-g",
        "-A",
        "--unstable-kv",
        "--config",
        `${ROOT}deno.json`,
        "--root",
        root,
        "-n",
        "exec-server",
        CLI,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(install.code, 0, dec.decode(install.stderr));
    const bin = `${root}/bin/exec-server`;
    const run = async (args: string[], stdin = "") => {
      const child = new Deno.Command(bin, {
        args,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(stdin));
      await w.close();
      const out = await child.output();
      return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
    };
    assertEquals((await run(["--version"])).stdout, `exec-server ${VERSION}\n`);

    // mcp: the MCP SDK resolves through the installed import map.
    const mcp = await run(
      ["mcp"],
      JSON.stringify(mcpInitialize()) + "\n",
    );
    assertEquals(mcp.code, 0, mcp.stderr);
    assertEquals(JSON.parse(mcp.stdout.split("\n")[0]!).result.serverInfo.name, "exec-server");

    // proxy with a TOML config (smol-toml) prints its addresses.
    await Deno.writeTextFile(
      `${root}/proxy.toml`,
      `enabled = true\n[domains]\n"example.test" = "allow"\n`,
    );
    for (
      const [args, expect] of [
        [["proxy", "--config", `${root}/proxy.toml`, "--ephemeral", "--home", root], "http"],
        [["relay", "--listen", "http://127.0.0.1:0"], "http://127.0.0.1:"],
      ] as const
    ) {
      const child = new Deno.Command(bin, {
        args: [...args],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const { line, rest } = await firstLine(child.stdout);
      child.kill("SIGTERM");
      const status = await child.status;
      const stderr = await new Response(child.stderr).text();
      await rest.cancel();
      assertStringIncludes(line, expect, stderr);
      assertEquals(status.code, 0, `${args[0]}: ${stderr}`);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
