/**
 * `capabilities/discoverV2`: the skills and plugins installed in the
 * executor's Codex home, parsed for the harness.
 *
 * - Skills: every `SKILL.md` under `$CODEX_HOME/skills` (hidden
 *   directories such as `.system` included, six levels deep). Its YAML
 *   front matter gives `name`, `description` (both required) and
 *   `metadata.short-description`; `agents/openai.yaml` beside it gives
 *   `dependencies.tools` and `policy` (`allow_implicit_invocation`,
 *   `products`). A skill that does not parse is left out and the answer
 *   says that discovery may be incomplete.
 * - Plugins: each `[plugins."NAME@MARKETPLACE"]` in `$CODEX_HOME/config.toml`
 *   (enabled or not: the harness decides, as with the reference), installed under
 *   `plugins/cache/MARKETPLACE/NAME/VERSION/` (the greatest version when
 *   several are), with its manifest, `.mcp.json`, `.app.json` and the skills
 *   under the manifest's `skills` directory (default `skills/`), named
 *   `NAME:SKILL`.
 *
 * Everything is read through a {@linkcode TreeReader}, so a request's
 * sandbox decides what can be seen; a Codex home it hides yields nothing.
 *
 * @module
 */

import { isRecord } from "../util/record.ts";
import { loadToml } from "../util/toml.ts";
import { pathToUri } from "../protocol/path_uri.ts";
import type {
  CapabilitiesDiscoverResult,
  CapabilityFile,
  DiscoveredPlugin,
  DiscoveredSkill,
  SkillDependencies,
  SkillPolicy,
} from "../protocol/types.ts";
import { readCapabilityFile, SCAN_OPTIONS, type TreeReader } from "./roots.ts";

const INCOMPLETE = "some capability metadata could not be loaded; discovery may be incomplete";

type Yaml = typeof import("yaml");
let yaml: Yaml | null = null;

function record(v: unknown): Record<string, unknown> | null {
  return isRecord(v) ? v : null;
}

function text(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

/** The YAML front matter of a `SKILL.md`; null when there is none or it does not parse. */
function frontMatter(markdown: string): Record<string, unknown> | null {
  const m = /^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n|$)/.exec(markdown);
  if (!m) return null;
  try {
    return record(yaml!.parse(m[1]!));
  } catch {
    return null;
  }
}

function dependencies(meta: Record<string, unknown> | null): SkillDependencies | null {
  const tools = record(meta?.dependencies)?.tools;
  if (!Array.isArray(tools)) return null;
  return {
    tools: tools.map(record).filter((t) => t !== null).map((t) => ({
      type: text(t.type) ?? "",
      value: text(t.value) ?? "",
      description: text(t.description),
      transport: text(t.transport),
      command: text(t.command),
      url: text(t.url),
      oauthCallbackPort: null,
    })),
  };
}

function policy(meta: Record<string, unknown> | null): SkillPolicy | null {
  const p = record(meta?.policy);
  if (!p) return null;
  return {
    allowImplicitInvocation: typeof p.allow_implicit_invocation === "boolean"
      ? p.allow_implicit_invocation
      : null,
    products: Array.isArray(p.products) ? p.products.filter((x) => typeof x === "string") : [],
  };
}

interface Scan {
  readonly reader: TreeReader;
  incomplete: boolean;
}

/** A file the answer carries; null when it is too large or unreadable. */
async function readFile(scan: Scan, path: string): Promise<CapabilityFile | null> {
  const got = await readCapabilityFile(scan.reader, path);
  return "file" in got ? got.file : null;
}

async function readText(scan: Scan, path: string): Promise<string | null> {
  return (await readFile(scan, path))?.contents ?? null;
}

async function isDirectory(reader: TreeReader, path: string): Promise<boolean> {
  try {
    return await reader.isDirectory(path);
  } catch {
    return false;
  }
}

/** Skills under `dir`, sorted by path; unparsable ones mark the scan incomplete. */
async function skillsUnder(
  scan: Scan,
  dir: string,
): Promise<Array<Omit<DiscoveredSkill, "discoveryRoot">>> {
  if (!(await isDirectory(scan.reader, dir))) return [];
  const listing = await scan.reader.walk(dir, SCAN_OPTIONS);
  const files = new Set(listing.entries.filter((e) => e.kind === "file").map((e) => e.path));
  const paths = [...files].filter((p) => p.endsWith("/SKILL.md")).sort((a, b) =>
    a < b ? -1 : a > b ? 1 : 0
  );
  const out: Array<Omit<DiscoveredSkill, "discoveryRoot">> = [];
  for (const path of paths) {
    const markdown = await readText(scan, path);
    const front = markdown === null ? null : frontMatter(markdown);
    const name = text(front?.name);
    const description = text(front?.description);
    if (!name || !description) {
      scan.incomplete = true;
      continue;
    }
    const metaPath = `${path.slice(0, -"SKILL.md".length)}agents/openai.yaml`;
    let meta: Record<string, unknown> | null = null;
    if (files.has(metaPath)) {
      const raw = await readText(scan, metaPath);
      try {
        meta = raw === null ? null : record(yaml!.parse(raw));
      } catch {
        meta = null;
      }
      if (raw === null || meta === null) scan.incomplete = true;
    }
    out.push({
      name,
      description,
      shortDescription: text(record(front?.metadata)?.["short-description"]),
      path: pathToUri(path),
      dependencies: dependencies(meta),
      policy: policy(meta),
    });
  }
  return out;
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).map((x) => Number.isNaN(Number(x)) ? x : Number(x));
  const pb = b.split(/[.-]/).map((x) => Number.isNaN(Number(x)) ? x : Number(x));
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? -1;
    const y = pb[i] ?? -1;
    if (x === y) continue;
    if (typeof x === "number" && typeof y === "number") return x - y;
    return String(x) < String(y) ? -1 : 1;
  }
  return 0;
}

async function plugin(scan: Scan, codexHome: string, id: string): Promise<DiscoveredPlugin | null> {
  const at = id.lastIndexOf("@");
  if (at <= 0 || at === id.length - 1) return null;
  const name = id.slice(0, at);
  const marketplace = id.slice(at + 1);
  const base = `${codexHome}/plugins/cache/${marketplace}/${name}`;
  if (!(await isDirectory(scan.reader, base))) return null;
  const listing = await scan.reader.walk(base, {
    maxDepth: 1,
    maxDirectories: 1,
    maxEntries: 1000,
    followDirectorySymlinks: true,
    pruneHiddenDirectories: true,
  });
  const versions = listing.entries.filter((e) => e.kind === "directory")
    .map((e) => e.path.slice(base.length + 1)).sort(compareVersions);
  const version = versions.at(-1);
  if (version === undefined) return null;
  const root = `${base}/${version}`;
  const file = (path: string) => readFile(scan, path);
  const manifest = await file(`${root}/.codex-plugin/plugin.json`);
  if (!manifest) {
    scan.incomplete = true;
    return null;
  }
  let parsed: Record<string, unknown> | null = null;
  try {
    parsed = record(JSON.parse(manifest.contents));
  } catch {
    scan.incomplete = true;
    return null;
  }
  const skillsDir = text(parsed?.skills) ?? "skills";
  const dir = `${root}/${skillsDir.replace(/^\.\//, "").replace(/\/+$/, "")}`;
  const skills = (await skillsUnder(scan, dir)).map((s) => ({ ...s, name: `${name}:${s.name}` }));
  return {
    id,
    displayName: text(parsed?.name) ?? name,
    remotePluginId: null,
    version: text(parsed?.version) ?? version,
    root: pathToUri(root),
    files: {
      manifest,
      mcpConfig: await file(`${root}/.mcp.json`),
      appsConfig: await file(`${root}/.app.json`),
    },
    skills,
  };
}

/** Answers `capabilities/discoverV2` for the Codex home at `codexHome`. */
export async function discoverCapabilities(
  codexHome: string,
  reader: TreeReader,
): Promise<CapabilitiesDiscoverResult> {
  yaml ??= await import("yaml");
  const toml = await loadToml();
  const scan: Scan = { reader, incomplete: false };
  const skillsRoot = `${codexHome}/skills`;
  const skills: DiscoveredSkill[] = (await skillsUnder(scan, skillsRoot)).map((s) => ({
    ...s,
    discoveryRoot: { id: "codex-home-skills", path: pathToUri(skillsRoot) },
  }));
  const plugins: DiscoveredPlugin[] = [];
  const configText = await readText(scan, `${codexHome}/config.toml`);
  if (configText !== null) {
    let config: Record<string, unknown> | null = null;
    try {
      config = record(toml.parse(configText));
    } catch {
      scan.incomplete = true;
    }
    const table = record(config?.plugins) ?? {};
    for (const id of Object.keys(table).sort()) {
      const found = await plugin(scan, codexHome, id);
      if (found) plugins.push(found);
    }
  }
  return { plugins, skills, warnings: scan.incomplete ? [INCOMPLETE] : [] };
}
