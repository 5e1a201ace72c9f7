import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { type Msg, spawnCommandServer, spawnStdioServer } from "../helpers/wire_client.ts";
import { referenceBin, scratchRoot } from "../helpers/reference.ts";
import { selectPaths } from "../../src/codex_config/layers.ts";
import { writeToml } from "../../src/codex_config/toml_write.ts";
import { parse } from "smol-toml";

/** A Codex home and projects: trusted (root and sub-directory), untrusted, broken. */
async function workspace() {
  const root = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "envcfg-" });
  const w = (path: string, text: string) =>
    Deno.mkdir(`${root}/${path}`.replace(/\/[^/]+$/, ""), { recursive: true })
      .then(() => Deno.writeTextFile(`${root}/${path}`, text));
  await w(
    "home/config.toml",
    [
      'model = "gpt-5.5"',
      "[mcp_servers.docs]",
      'command = "docs-server"',
      'args = ["--x", "y z"]',
      "startup_timeout_sec = 2.5",
      "[mcp_servers.docs.env]",
      'TOKEN = "abc"',
      "[profiles.x]",
      'model = "y"',
      `[projects."${root}/proj"]`,
      'trust_level = "trusted"',
      `[projects."${root}/bad"]`,
      'trust_level = "trusted"',
      `[projects."${root}/loose"]`,
      'trust_level = "trusted"',
      `[projects."${root}/untrusted"]`,
      'trust_level = "untrusted"',
      "",
    ].join("\n"),
  );
  // Repositories as trust sees them: a `.git` with a HEAD (an empty `.git`
  // directory marks the project root but is no repository).
  await w("proj/.git/HEAD", "ref: refs/heads/main\n");
  await w("proj/.codex/config.toml", '[mcp_servers.proj]\nurl = "http://127.0.0.1:1/mcp"\n');
  await w("proj/sub/.codex/config.toml", '[mcp_servers.sub]\ncommand = "sub"\nenabled = false\n');
  await w("untrusted/.git/HEAD", "ref: refs/heads/main\n");
  await w("untrusted/.codex/config.toml", '[mcp_servers.evil]\ncommand = "evil"\n');
  await w("bad/.git/HEAD", "ref: refs/heads/main\n");
  // A trusted directory whose sub-directory is trusted only through the repo.
  await w("loose/.codex/config.toml", '[mcp_servers.loose]\ncommand = "l"\n');
  await w("loose/sub/.codex/config.toml", '[mcp_servers.loosesub]\ncommand = "ls"\n');
  await Deno.mkdir(`${root}/loose/.git`);
  await w("bad/.codex/config.toml", "bad = = toml\n");
  return root;
}

function requests(root: string): Msg[] {
  const read = (cwd: string, configPaths: unknown, requirementsPaths: unknown = []) => ({
    cwd: `file://${root}/${cwd}`,
    configPaths,
    requirementsPaths,
  });
  return [
    read("proj/sub", [["mcp_servers"]], [["mcp_servers"]]),
    read("proj", [["model"], ["profiles", "x"]]),
    read("proj/sub", [["mcp_servers", "docs", "command"]]),
    read("proj/sub", [["mcp_servers", "nothing", "here"]]),
    read("untrusted", [["mcp_servers"]]),
    read("missing/dir", [["mcp_servers"]]),
    read("bad", [["mcp_servers"]]),
    read("proj", [], []),
    read("proj", [[]]),
    { configPaths: [["a"]], requirementsPaths: [] },
    read("proj", [["a", 1]]),
    read("loose/sub", [["mcp_servers"]]),
  ];
}

async function answers(server: ReturnType<typeof spawnStdioServer>, root: string) {
  await using s = server;
  await s.client.initialize();
  const out: Msg[] = [];
  for (const params of requests(root)) {
    out.push(await s.client.call("environmentConfig/read", params));
  }
  return out.map((m) => ("result" in m ? { result: m.result } : { error: m.error }));
}

Deno.test("environmentConfig/read: Codex's config layers, cut to the requested paths", async () => {
  const root = await workspace();
  try {
    const env = { CODEX_HOME: `${root}/home` };
    const ours = await answers(spawnStdioServer(["serve", "--listen", "stdio"], env), root);
    const layers = (i: number) =>
      ours[i]!.result.config.layers.map((l: Msg) => [l.source.replace(root, "R"), l.toml]);
    const hasSystem = ours[0]!.result.config.cloudInsertionIndex === 1;
    const sys = hasSystem ? 1 : 0; // a machine-wide /etc/codex/config.toml comes first
    assertEquals(ours[0]!.result.codexHomeDir, `file://${root}/home`);
    assertEquals(layers(0).slice(sys), [
      [
        "user (R/home/config.toml)",
        '[mcp_servers.docs]\ncommand = "docs-server"\nargs = ["--x", "y z"]\nstartup_timeout_sec = 2.5\n\n[mcp_servers.docs.env]\nTOKEN = "abc"\n',
      ],
      [
        "project (R/proj/.codex/config.toml)",
        '[mcp_servers.proj]\nurl = "http://127.0.0.1:1/mcp"\n',
      ],
      [
        "project (R/proj/sub/.codex/config.toml)",
        '[mcp_servers.sub]\ncommand = "sub"\nenabled = false\n',
      ],
    ]);
    assertEquals(ours[0]!.result.config.layers[sys + 1].baseDir, `file://${root}/proj/.codex`);
    assertEquals(layers(1).slice(-1), [[
      "user (R/home/config.toml)",
      'model = "gpt-5.5"\n\n[profiles.x]\nmodel = "y"\n',
    ]]);
    assertEquals(layers(2).at(-1)![1], "[mcp_servers]\n", "tables on the way are kept");
    assert(!JSON.stringify(ours[4]).includes("evil"), "an untrusted project is not read");
    assertEquals(layers(5).at(-1)![0], "user (R/home/config.toml)", "a missing cwd is no error");
    assertEquals(ours[6]!.error.code, -32603);
    assertStringIncludes(
      ours[6]!.error.message,
      `failed to load executor-local config: Error parsing project config file ${root}/bad/.codex/config.toml: TOML parse error at line 1, column `,
    );
    const loose = JSON.stringify(ours[11]);
    // Whether `loose` itself is read depends on the repository around the
    // scratch directory; its sub-directory is never trusted (no repository).
    assert(!loose.includes("loosesub"), "no repository: no trust below");
    assertEquals(ours.slice(7, 11).map((a) => a.error?.message), [
      "at least one config or requirements path is required",
      "TOML paths must contain at least one key segment",
      "missing field `cwd`",
      "invalid type: number, expected a string",
    ]);

    const ref = referenceBin();
    if (!ref) {
      console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");
      return;
    }
    const theirs = await answers(
      spawnCommandServer(ref, ["exec-server", "--listen", "stdio"], env),
      root,
    );
    for (const [i, a] of ours.entries()) {
      const b = theirs[i]!;
      if (a.error || b.error) {
        assertEquals(a.error?.code, b.error?.code, `request ${i}`);
        // The TOML parser's own explanation differs; the frame does not.
        const head = (m: string) => m.split(": TOML parse error")[0];
        assertEquals(head(a.error.message), head(b.error.message), `request ${i}`);
      } else {
        assertEquals(a, b, `request ${i}`);
      }
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("environmentConfig/read: TOML selection and layout", () => {
  const doc = parse(
    [
      "top = 1",
      "f = 1.0",
      "[a]",
      'x = "q\\"uote"',
      "inline = { k = 1, l = [1, 2] }",
      "[[a.list]]",
      "n = 1",
      "[[a.list]]",
      "n = 2",
      '["odd key"]',
      "v = true",
      "",
    ].join("\n"),
    { integersAsBigInt: true },
  ) as Record<string, never>;
  assertEquals(
    writeToml(doc),
    'top = 1\nf = 1.0\n\n[a]\nx = "q\\"uote"\n\n[a.inline]\nk = 1\nl = [1, 2]\n\n[[a.list]]\nn = 1\n\n[[a.list]]\nn = 2\n\n["odd key"]\nv = true\n',
  );
  assertEquals(selectPaths(doc, [["a", "x"], ["missing"]]), { a: { x: 'q"uote' } });
  assertEquals(writeToml(selectPaths(doc, [["a", "nope", "deeper"]])), "[a]\n");
  assertEquals(writeToml({}), "");
});
