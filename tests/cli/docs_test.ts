// The README and docs/: the README stays short; every TypeScript block in
// them type-checks against this checkout (the README's library example
// also runs); every `exec-server COMMAND` in a shell block names a real
// command; relative links resolve; docs/cli.md's reference is every
// command's current `--help`.

import { assert, assertEquals } from "../helpers/assert.ts";
import { ROOT } from "../helpers/wire_client.ts";
import { CLI_PAGE, cliReference, COMMANDS, pageReference } from "../helpers/cli_reference.ts";

const PAGES = [
  `${ROOT}README.md`,
  ...[...Deno.readDirSync(`${ROOT}docs`)].filter((e) => e.name.endsWith(".md")).map((e) =>
    `${ROOT}docs/${e.name}`
  ).sort(),
];

interface Block {
  page: string;
  lang: string;
  code: string;
}

function blocks(): Block[] {
  const out: Block[] = [];
  for (const page of PAGES) {
    const text = Deno.readTextFileSync(page);
    for (const m of text.matchAll(/```([a-z]*)[^\n]*\n([\s\S]*?)```/g)) {
      out.push({ page: page.slice(ROOT.length), lang: m[1]!, code: m[2]! });
    }
  }
  return out;
}

/** A block as a module of this checkout (the package's specifiers mapped to its files). */
function local(code: string): string {
  return code
    .replace(/"jsr:@org\/exec-server\/([a-z]+)"/g, (_, sub) => `"${ROOT}${sub}.ts"`)
    .replace(/"jsr:@org\/exec-server"/g, `"${ROOT}mod.ts"`) + "\nexport {};\n";
}

Deno.test("docs: the README is a front page (at most ~250 lines) and links every docs page", () => {
  const readme = Deno.readTextFileSync(`${ROOT}README.md`);
  const lines = readme.split("\n").length;
  assert(lines <= 260, `README.md has ${lines} lines`);
  for (const page of PAGES.slice(1)) {
    const name = page.slice(ROOT.length);
    assert(readme.includes(`(${name})`), `README.md does not link ${name}`);
  }
});

Deno.test("docs: relative links resolve", () => {
  for (const page of PAGES) {
    const text = Deno.readTextFileSync(page);
    for (const m of text.matchAll(/\]\((?!https?:|#|mailto:)([^)#\s]+)/g)) {
      const target = new URL(m[1]!, `file://${page}`).pathname;
      try {
        Deno.statSync(target);
      } catch {
        throw new Error(`${page.slice(ROOT.length)} links ${m[1]}, which does not exist`);
      }
    }
  }
});

Deno.test("docs: every TypeScript block type-checks; the README's library example runs", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}.cache` });
  try {
    const ts = blocks().filter((b) => b.lang === "ts" || b.lang === "typescript");
    assert(ts.length >= 3, String(ts.length));
    const files = ts.map((b, i) => {
      const file = `${dir}/${b.page.replace(/\W+/g, "_")}_${i}.ts`;
      Deno.writeTextFileSync(file, local(b.code));
      return file;
    });
    const check = await new Deno.Command(Deno.execPath(), {
      args: ["check", "--config", `${ROOT}deno.test.json`, ...files],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(check.code, 0, new TextDecoder().decode(check.stderr));

    const example = files[ts.findIndex((b) => b.page === "README.md")]!;
    const run = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--config", `${ROOT}deno.json`, example],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(run.stdout);
    assertEquals([run.code, stdout], [0, "0 hello\n\n"], new TextDecoder().decode(run.stderr));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("docs: every `exec-server COMMAND` in a shell block is a command", () => {
  const known = new Set([...COMMANDS, "help"]);
  for (const block of blocks().filter((b) => b.lang === "sh")) {
    for (
      const m of block.code.matchAll(
        /^\s*(?:\$ )?exec-server (?:--?\S+ )*([a-z][a-z-]*)(?![\w:-])/gm,
      )
    ) {
      assert(known.has(m[1]!), `${block.page}: \`exec-server ${m[1]}\` is not a command`);
    }
  }
});

Deno.test("docs: docs/cli.md's reference is every command's --help, as the CLI prints it", async () => {
  const current = pageReference(await Deno.readTextFile(CLI_PAGE));
  assert(current !== null, "docs/cli.md has no generated reference");
  assertEquals(
    current,
    await cliReference(),
    "docs/cli.md is out of date: run deno run -A tests/helpers/cli_reference.ts",
  );
});
