/**
 * `environmentConfig/read`: the executor-side Codex configuration layers,
 * each cut down to the requested TOML key paths, in precedence order
 * (lowest first), as the reference reports them:
 *
 * 1. `system (/etc/codex/config.toml)`;
 * 2. `user ($CODEX_HOME/config.toml)` (`~/.codex` without `CODEX_HOME`);
 * 3. `project (DIR/.codex/config.toml)` for every directory from the
 *    project root (the nearest ancestor of `cwd` holding a root marker,
 *    `.git` unless `project_root_markers` says otherwise — a `.git` counts
 *    when it is a file or a directory with a `HEAD`; `cwd` itself when there
 *    is none) down to `cwd`, when DIR is trusted: the user
 *    configuration's `[projects."DIR"]`, or else that of the git repository
 *    DIR is in, has `trust_level = "trusted"`;
 * 4. `legacy managed_config.toml (/etc/codex/managed_config.toml)`.
 *
 * Requirements come from `/etc/codex/requirements.toml`. A layer holding
 * none of the requested paths is left out; `cloudInsertionIndex` is the
 * number of system layers listed (cloud layers go after them). A file that
 * does not parse fails the request with the reference's wording.
 *
 * @module
 */

import { loadToml } from "../util/toml.ts";
import { setOwn } from "../util/record.ts";
import { lexists } from "../fs/metadata.ts";
import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import { pathToUri } from "../protocol/path_uri.ts";
import type {
  ConfigLayer,
  ConfigLayerStack,
  EnvironmentConfigReadParams,
  EnvironmentConfigReadResult,
} from "../protocol/types.ts";
import { isTable, type TomlTable, writeToml } from "./toml_write.ts";

import { type ConfigLocations, defaultConfigLocations } from "./locations.ts";

export { type ConfigLocations, defaultConfigLocations };

interface ParseFailure {
  readonly line: number;
  readonly column: number;
  readonly reason: string;
}

function parseFailure(error: unknown): ParseFailure {
  const e = error as { line?: number; column?: number; message?: string };
  // smol-toml's message carries a code frame after the first line.
  const reason = String(e.message ?? error).split("\n")[0]!.replace(/^Invalid TOML document: /, "");
  return { line: e.line ?? 1, column: e.column ?? 1, reason };
}

function codeFrame(text: string, f: ParseFailure): string {
  const line = text.split("\n")[f.line - 1] ?? "";
  const gutter = " ".repeat(String(f.line).length);
  return `TOML parse error at line ${f.line}, column ${f.column}\n${gutter} |\n${f.line} | ${line}\n${gutter} | ${
    " ".repeat(Math.max(0, f.column - 1))
  }^\n${f.reason}\n`;
}

type Kind = "system" | "user" | "project" | "legacy" | "requirements";

/** Reads and parses `path`; `null` when it does not exist. */
async function readTable(path: string, kind: Kind): Promise<TomlTable | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound || error instanceof Deno.errors.NotADirectory) {
      return null;
    }
    throw failure(`${path}: ${(error as Error).message}`);
  }
  const toml = await loadToml();
  try {
    return toml.parse(text, { integersAsBigInt: true }) as TomlTable;
  } catch (error) {
    const f = parseFailure(error);
    if (kind === "project") {
      throw failure(`Error parsing project config file ${path}: ${codeFrame(text, f)}`);
    }
    if (kind === "requirements") {
      throw failure(`failed to parse requirements layer ${path}: ${codeFrame(text, f)}`);
    }
    throw failure(`${path}:${f.line}:${f.column}: ${f.reason}`);
  }
}

function failure(message: string): RpcError {
  return new RpcError(
    JsonRpcCode.InternalError,
    `failed to load executor-local config: ${message}`,
  );
}

/**
 * The parts of `table` at the given key paths (empty when none is there).
 * Tables met on the way are kept even when the rest of a path is missing,
 * as the reference keeps them (`[mcp_servers]` for `mcp_servers.x.y`).
 */
export function selectPaths(table: TomlTable, paths: readonly string[][]): TomlTable {
  const out: TomlTable = {};
  for (const path of paths) {
    let node: TomlTable = table;
    let target = out;
    for (const [i, key] of path.entries()) {
      if (!Object.hasOwn(node, key)) break;
      const value = node[key]!;
      if (i === path.length - 1) {
        setOwn(target, key, value);
        break;
      }
      if (!isTable(value)) break;
      const existing = Object.hasOwn(target, key) ? target[key] : undefined;
      const table = isTable(existing) ? existing : {};
      setOwn(target, key, table);
      target = table;
      node = value;
    }
  }
  return out;
}

function ancestors(dir: string): string[] {
  const out: string[] = [];
  let d = dir;
  for (;;) {
    out.push(d);
    if (d === "/") return out;
    d = d.slice(0, d.lastIndexOf("/")) || "/";
  }
}

function join(dir: string, name: string): string {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

/** The nearest ancestor of `dir` (inclusive) holding one of `markers`. */
async function projectRoot(dir: string, markers: readonly string[]): Promise<string | null> {
  for (const d of ancestors(dir)) {
    for (const marker of markers) {
      // `.git` counts only as a repository's (see repositoryKind).
      const found = marker === ".git"
        ? await repositoryKind(d) !== null
        : await lexists(join(d, marker));
      if (found) return d;
    }
  }
  return null;
}

/**
 * What `dir/.git` is when it makes `dir` a repository: a directory with a
 * `HEAD`, or a file (a worktree or submodule); null otherwise (an empty
 * `.git` directory marks nothing).
 */
async function repositoryKind(dir: string): Promise<"directory" | "file" | null> {
  try {
    const info = await Deno.lstat(join(dir, ".git"));
    if (!info.isDirectory) return "file";
    return await lexists(join(dir, ".git/HEAD")) ? "directory" : null;
  } catch {
    return null;
  }
}

/**
 * The repository a directory's trust is looked up by: the nearest
 * repository around it; a linked worktree counts as its main repository.
 */
async function gitRootForTrust(dir: string): Promise<string | null> {
  for (const d of ancestors(dir)) {
    const kind = await repositoryKind(d);
    if (kind === null) continue;
    if (kind === "directory") return d;
    try {
      const text = await Deno.readTextFile(join(d, ".git"));
      const m = /^gitdir:\s*(\S.*?)\s*$/m.exec(text);
      const worktree = m ? /^(.*)\/\.git\/worktrees\/[^/]+$/.exec(m[1]!) : null;
      return worktree ? worktree[1] || "/" : d;
    } catch {
      return d;
    }
  }
  return null;
}

function trustOf(projects: unknown, dir: string): boolean | undefined {
  if (!isTable(projects)) return undefined;
  const entry = projects[dir];
  if (!isTable(entry)) return undefined;
  const level = entry.trust_level;
  return typeof level === "string" ? level.toLowerCase() === "trusted" : undefined;
}

function rootMarkers(...tables: Array<TomlTable | null>): string[] {
  for (const t of tables.toReversed()) {
    const m = t?.project_root_markers;
    if (Array.isArray(m) && m.every((x) => typeof x === "string")) return m as string[];
  }
  return [".git"];
}

function stack(found: FoundLayer[], paths: readonly string[][]): ConfigLayerStack {
  const layers: ConfigLayer[] = [];
  let cloudInsertionIndex = 0;
  for (const layer of found) {
    const selected = selectPaths(layer.table, paths);
    if (Object.keys(selected).length === 0) continue;
    layers.push({
      source: layer.source,
      baseDir: pathToUri(layer.baseDir),
      toml: writeToml(selected),
    });
    if (layer.system) cloudInsertionIndex = layers.length;
  }
  return { layers, cloudInsertionIndex };
}

/** One configuration file that applies, with its parsed table. */
export interface FoundLayer {
  /** As the reference names it: `user (/home/u/.codex/config.toml)`. */
  readonly source: string;
  /** Directory relative paths in it are resolved against. */
  readonly baseDir: string;
  /** The parsed file. */
  readonly table: TomlTable;
  /** A system layer (cloud layers go after these). */
  readonly system: boolean;
}

/**
 * The configuration layers that apply to `cwd`, lowest precedence first
 * (system, user, trusted project directories from the root down, legacy
 * managed). Throws the reference's wording when a file does not parse.
 */
export async function loadConfigLayers(
  cwd: string,
  where: ConfigLocations = defaultConfigLocations(),
): Promise<FoundLayer[]> {
  const systemDir = where.systemDir ?? "/etc/codex";
  const systemPath = join(systemDir, "config.toml");
  const userPath = join(where.codexHome, "config.toml");
  const legacyPath = join(systemDir, "managed_config.toml");

  const system = await readTable(systemPath, "system");
  const user = await readTable(userPath, "user");
  const found: FoundLayer[] = [];
  if (system) {
    found.push({
      source: `system (${systemPath})`,
      baseDir: systemDir,
      table: system,
      system: true,
    });
  }
  if (user) {
    found.push({
      source: `user (${userPath})`,
      baseDir: where.codexHome,
      table: user,
      system: false,
    });
  }
  const markers = rootMarkers(system, user);
  const root = (await projectRoot(cwd, markers)) ?? cwd;
  const dirs = ancestors(cwd).filter((d) =>
    d === root || d.startsWith(root === "/" ? "/" : `${root}/`)
  )
    .reverse();
  for (const dir of dirs) {
    const file = join(join(dir, ".codex"), "config.toml");
    if (!(await lexists(file))) continue;
    const repo = await gitRootForTrust(dir);
    const trusted = trustOf(user?.projects, dir) ??
      (repo !== null ? trustOf(user?.projects, repo) : undefined) ?? false;
    if (!trusted) continue;
    const table = await readTable(file, "project");
    if (table) {
      found.push({
        source: `project (${file})`,
        baseDir: join(dir, ".codex"),
        table,
        system: false,
      });
    }
  }
  const legacy = await readTable(legacyPath, "legacy");
  if (legacy) {
    found.push({
      source: `legacy managed_config.toml (${legacyPath})`,
      baseDir: systemDir,
      table: legacy,
      system: false,
    });
  }
  return found;
}

/** Answers `environmentConfig/read` (params already decoded and checked). */
export async function readEnvironmentConfig(
  params: EnvironmentConfigReadParams,
  where: ConfigLocations = defaultConfigLocations(),
): Promise<EnvironmentConfigReadResult> {
  const systemDir = where.systemDir ?? "/etc/codex";
  const requirementsPath = join(systemDir, "requirements.toml");
  const found = await loadConfigLayers(params.cwd, where);
  const requirements = await readTable(requirementsPath, "requirements");
  let hostname = "";
  try {
    hostname = Deno.hostname();
  } catch { /* no permission: leave empty */ }
  return {
    userHomeDir: pathToUri(where.userHome),
    codexHomeDir: pathToUri(where.codexHome),
    hostname,
    config: stack(found, params.configPaths),
    requirements: stack(
      requirements
        ? [{ source: requirementsPath, baseDir: systemDir, table: requirements, system: true }]
        : [],
      params.requirementsPaths,
    ),
  };
}
