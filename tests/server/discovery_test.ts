import { assert, assertEquals } from "../helpers/assert.ts";
import { type Msg, spawnCommandServer, spawnStdioServer } from "../helpers/wire_client.ts";
import { referenceBin, referenceHome, scratchRoot } from "../helpers/reference.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";

const SKILL = (name: string) => `---\nname: ${name}\ndescription: the ${name} skill\n---\nbody\n`;

/** Skills at several depths, a nested plugin, a plugin root, a big file, a wide tree. */
async function tree() {
  const root = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "discover-" });
  const w = async (path: string, text: string) => {
    await Deno.mkdir(`${root}/${path}`.replace(/\/[^/]+$/, ""), { recursive: true });
    await Deno.writeTextFile(`${root}/${path}`, text);
  };
  await w("ws/.agents/skills/hello/SKILL.md", SKILL("hello"));
  await w("ws/.agents/skills/hello/agents/openai.yaml", 'interface:\n  display_name: "Hello"\n');
  await w("ws/.codex/skills/hidden/SKILL.md", SKILL("hidden"));
  await w("ws/skills/top/SKILL.md", "no front matter\n");
  await w("ws/a/b/c/d/e/f/SKILL.md", SKILL("level6"));
  await w("ws/a/b/c/d/e/f/g/SKILL.md", SKILL("level7"));
  await w("ws/vendor/p/.codex-plugin/plugin.json", '{"name":"nested"}\n');
  await w("ws/big/SKILL.md", SKILL("big") + "x".repeat(1024 * 1024));
  await w("plugin/.codex-plugin/plugin.json", '{"name":"p","skills":"./skills/"}\n');
  await w("plugin/.mcp.json", '{"mcpServers":{}}\n');
  await w("plugin/skills/s1/SKILL.md", SKILL("s1"));
  for (let i = 0; i < 2050; i++) await Deno.mkdir(`${root}/wide/d${i}`, { recursive: true });
  await w("wide/d0/SKILL.md", SKILL("first"));
  await w("wide/d999/SKILL.md", SKILL("late"));
  await w("afile", "x");
  return root;
}

function requests(root: string, sandboxed: boolean): Msg[] {
  const uri = (p: string) => `file://${root}/${p}`;
  const sandbox = (entries: Msg[]) => ({
    permissions: {
      type: "managed",
      file_system: { type: "restricted", entries },
      network: "restricted",
    },
    cwd: uri("ws"),
    windowsSandboxLevel: "disabled",
  });
  const list: Msg[] = [
    {
      roots: [
        { id: "ws", path: uri("ws") },
        { id: "plugin", path: uri("plugin") },
        { id: "missing", path: uri("missing") },
        { id: "file", path: uri("afile") },
      ],
    },
    { roots: [{ id: "wide", path: uri("wide") }] },
    { roots: [] },
    { roots: [{ id: "x" }] },
  ];
  if (sandboxed) {
    list.push({
      roots: [
        {
          id: "only-agents",
          path: uri("ws"),
          sandbox: sandbox([{ path: { type: "path", path: uri("ws/.agents") }, access: "read" }]),
        },
        {
          id: "hide-hello",
          path: uri("ws"),
          sandbox: sandbox([
            { path: { type: "special", value: { kind: "root" } }, access: "read" },
            { path: { type: "path", path: uri("ws/.agents/skills/hello") }, access: "none" },
          ]),
        },
      ],
    });
  }
  return list;
}

async function answers(
  server: ReturnType<typeof spawnStdioServer>,
  root: string,
  sandboxed: boolean,
) {
  await using s = server;
  await s.client.initialize();
  const out: Msg[] = [];
  for (const params of requests(root, sandboxed)) {
    const m = await s.client.call("capabilityRoots/discoverV1", params);
    out.push("result" in m ? { result: m.result } : { error: m.error });
  }
  return out;
}

Deno.test("capabilityRoots/discoverV1: skills, plugins and limits, as the reference finds them", async () => {
  const root = await tree();
  const sandboxed = sandboxSupport().available;
  try {
    const ours = await answers(spawnStdioServer(), root, sandboxed);
    const rel = (uri: string) => uri.replace(`file://${root}/`, "");
    const [ws, plugin, missing, file] = ours[0]!.result.roots;
    assertEquals(ws.skills.map((s: Msg) => rel(s.instructions.path)), [
      "ws/.agents/skills/hello/SKILL.md",
      "ws/.codex/skills/hidden/SKILL.md",
      "ws/a/b/c/d/e/f/SKILL.md",
      "ws/skills/top/SKILL.md",
    ]);
    assertEquals(rel(ws.skills[0].metadata.path), "ws/.agents/skills/hello/agents/openai.yaml");
    assertEquals(ws.skills[0].instructions.contents, SKILL("hello"));
    assertEquals(ws.namespaceManifests.map((m: Msg) => rel(m.path)), [
      "ws/vendor/p/.codex-plugin/plugin.json",
    ]);
    assertEquals(ws.warnings, [
      `capability file file://${root}/ws/big/SKILL.md exceeds the 1048576-byte limit`,
    ]);
    assertEquals(plugin.plugin.mcpConfig.contents, '{"mcpServers":{}}\n');
    assertEquals(plugin.plugin.appsConfig, null);
    assertEquals(rel(plugin.plugin.manifest.path), "plugin/.codex-plugin/plugin.json");
    assertEquals(
      missing.error,
      `failed to inspect capability root file://${root}/missing: No such file or directory (os error 2)`,
    );
    assertEquals(file.error, `capability root file://${root}/afile is not a directory`);
    const wide = ours[1]!.result.roots[0];
    assertEquals(wide.skills.map((s: Msg) => rel(s.instructions.path)), ["wide/d0/SKILL.md"]);
    assertEquals(wide.warnings, [
      `capability scan reached its traversal limit (root: file://${root}/wide)`,
    ]);
    assertEquals(ours[2], { result: { roots: [] } });
    assertEquals(ours[3]!.error, { code: -32602, message: "missing field `path`" });
    if (sandboxed) {
      const [onlyAgents, hideHello] = ours[4]!.result.roots;
      assertEquals(onlyAgents.skills.map((s: Msg) => rel(s.instructions.path)), [
        "ws/.agents/skills/hello/SKILL.md",
      ]);
      assert(!hideHello.skills.some((s: Msg) => s.instructions.path.includes("/hello/")));
      assertEquals(
        hideHello.warnings[0],
        `failed to scan capability path file://${root}/ws/.agents/skills/hello: Permission denied (os error 13)`,
      );
    }

    const ref = referenceBin();
    if (!ref) {
      console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");
      return;
    }
    const theirs = await answers(
      spawnCommandServer(ref, ["exec-server", "--listen", "stdio"], {
        CODEX_HOME: referenceHome(),
      }),
      root,
      sandboxed,
    );
    for (const [i, a] of ours.entries()) assertEquals(a, theirs[i], `request ${i}`);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/** A Codex home with skills (system, hidden, nested, broken, with metadata) and a plugin. */
async function codexHome(): Promise<string> {
  const home = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "discover-home-" });
  const w = async (path: string, text: string) => {
    await Deno.mkdir(`${home}/${path}`.replace(/\/[^/]+$/, ""), { recursive: true });
    await Deno.writeTextFile(`${home}/${path}`, text);
  };
  await w("skills/a/SKILL.md", "---\nname: a\ndescription: A skill\n---\nbody\n");
  await w(
    "skills/c/SKILL.md",
    '---\nname: c\ndescription: "quoted: desc"\nmetadata:\n  short-description: sd\n---\n',
  );
  await w(
    "skills/c/agents/openai.yaml",
    "dependencies:\n  tools:\n    - type: env_var\n      value: FOO\n      description: why\n" +
      "policy:\n  allow_implicit_invocation: false\n  products: [codex]\n",
  );
  await w("skills/.system/sys/SKILL.md", "---\nname: sys\ndescription: system\n---\n");
  await w("skills/nested/deep/d/SKILL.md", "---\nname: d\ndescription: deep\n---\n");
  await w("skills/broken/SKILL.md", "no front matter\n");
  await w(
    "plugins/cache/mkt/p1/1.0.0/.codex-plugin/plugin.json",
    '{"name":"p1","version":"1.0.0","skills":"./skills/"}\n',
  );
  await w("plugins/cache/mkt/p1/1.0.0/.mcp.json", '{"mcpServers":{}}\n');
  await w("plugins/cache/mkt/p1/1.0.0/skills/ps/SKILL.md", "---\nname: ps\ndescription: p\n---\n");
  await w("plugins/cache/mkt/off/1.0.0/.codex-plugin/plugin.json", '{"name":"off"}\n');
  await w(
    "config.toml",
    '[plugins."p1@mkt"]\nenabled = true\n[plugins."off@mkt"]\nenabled = false\n',
  );
  return home;
}

Deno.test("capabilities/discoverV2: the Codex home's skills and enabled plugins, as the reference parses them", async () => {
  const home = await codexHome();
  try {
    const params = [
      { cwd: `file://${home}` },
      {
        cwd: `file://${home}`,
        sandbox: {
          permissions: {
            type: "managed",
            file_system: {
              type: "restricted",
              entries: [{ path: { type: "special", value: { kind: "minimal" } }, access: "read" }],
            },
            network: "restricted",
          },
          cwd: `file://${home}`,
          windowsSandboxLevel: "disabled",
        },
      },
      {},
    ];
    const run = async (server: ReturnType<typeof spawnStdioServer>) => {
      await using s = server;
      await s.client.initialize();
      const out: Msg[] = [];
      for (const p of params) {
        const m = await s.client.call("capabilities/discoverV2", p);
        out.push("result" in m ? { result: m.result } : { error: m.error });
      }
      return out;
    };
    const env = { CODEX_HOME: home };
    const ours = await run(spawnStdioServer(["serve", "--listen", "stdio"], env));
    const found = ours[0]!.result;
    assertEquals(found.skills.map((s: Msg) => s.name), ["sys", "a", "c", "d"]);
    assertEquals(found.warnings, [
      "some capability metadata could not be loaded; discovery may be incomplete",
    ]);
    assertEquals(found.skills[2].shortDescription, "sd");
    assertEquals(found.skills[2].policy, { allowImplicitInvocation: false, products: ["codex"] });
    assertEquals(found.skills[2].dependencies.tools[0].value, "FOO");
    assertEquals(found.plugins.map((p: Msg) => [p.id, p.skills.map((s: Msg) => s.name)]), [
      ["off@mkt", []],
      ["p1@mkt", ["p1:ps"]],
    ]);
    if (sandboxSupport().available) {
      assertEquals(
        ours[1]!.result,
        { plugins: [], skills: [], warnings: [] },
        "hidden by the sandbox",
      );
    }
    assertEquals(ours[2]!.error, { code: -32602, message: "missing field `cwd`" });
    const ref = referenceBin();
    if (!ref) return;
    const theirs = await run(spawnCommandServer(ref, ["exec-server", "--listen", "stdio"], env));
    for (const [i, a] of ours.entries()) assertEquals(a, theirs[i], `request ${i}`);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
