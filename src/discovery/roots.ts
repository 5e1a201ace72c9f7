/**
 * `capabilityRoots/discoverV1`: what Codex's skills and plugins are made of,
 * collected from directories the harness names, as raw files (the harness
 * parses them):
 *
 * - every `SKILL.md` in the root's tree, with its skill's
 *   `agents/openai.yaml` as metadata when there is one;
 * - every `.codex-plugin/plugin.json` in the tree (namespace manifests);
 * - the root's own plugin: its `.codex-plugin/plugin.json`, `.mcp.json` and
 *   `.app.json`.
 *
 * The tree is read breadth-first in name order (hidden directories
 * included, directory symlinks followed once), six directory levels below
 * the root and at most 2,000 directories; a scan that stops at a limit says
 * so in `warnings`. Files over 1 MiB are skipped with a warning, and so are
 * unreadable directories and files. Everything is read through a
 * {@linkcode TreeReader}, which runs inside the root's sandbox when it has
 * one. Results are sorted by path.
 *
 * @module
 */

import { pathToUri } from "../protocol/path_uri.ts";
import type {
  CapabilityFile,
  CapabilityRootResult,
  CapabilitySkillFiles,
  FsWalkOptions,
} from "../protocol/types.ts";

/** How the scan reads the environment (directly, or inside a sandbox). */
export interface TreeReader {
  /** Whether `path` is a directory; throws the OS error when it cannot be inspected. */
  isDirectory(path: string): Promise<boolean>;
  /** A breadth-first listing (`fs/walk` semantics, native paths). */
  walk(path: string, options: FsWalkOptions): Promise<{
    entries: Array<{ path: string; kind: "directory" | "file" }>;
    errors: Array<{ path: string; message: string }>;
    truncated: boolean;
  }>;
  /** A file's size in bytes. */
  size(path: string): Promise<number>;
  /** A file's contents. */
  readFile(path: string): Promise<Uint8Array>;
}

/** Limits of one root's scan. */
export const SCAN_LIMITS = {
  /** Directory levels read below the root (the root is level 0). */
  depth: 6,
  /** Directories read. */
  directories: 2_000,
  /** Entries listed. */
  entries: 20_000,
  /** Largest file returned. */
  fileBytes: 1024 * 1024,
} as const;

const decoder = new TextDecoder();

/** How a capability tree is listed: hidden directories too, links followed, {@linkcode SCAN_LIMITS}. */
export const SCAN_OPTIONS: FsWalkOptions = {
  // Files sit one level below the deepest directory read.
  maxDepth: SCAN_LIMITS.depth + 1,
  maxDirectories: SCAN_LIMITS.directories,
  maxEntries: SCAN_LIMITS.entries,
  followDirectorySymlinks: true,
  pruneHiddenDirectories: false,
};

/** One capability file, or why it was skipped (too large, unreadable). */
export async function readCapabilityFile(
  reader: TreeReader,
  path: string,
): Promise<{ file: CapabilityFile } | { warning: string }> {
  const uri = pathToUri(path);
  try {
    if ((await reader.size(path)) > SCAN_LIMITS.fileBytes) {
      return { warning: `capability file ${uri} exceeds the ${SCAN_LIMITS.fileBytes}-byte limit` };
    }
    return { file: { path: uri, contents: decoder.decode(await reader.readFile(path)) } };
  } catch (error) {
    return { warning: `failed to read capability file ${uri}: ${errorText(error)}` };
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Scans one root; failures of the root itself go into `error`. */
export async function discoverRoot(
  id: string,
  root: string,
  reader: TreeReader,
): Promise<CapabilityRootResult> {
  const result: CapabilityRootResult = {
    id,
    path: pathToUri(root),
    plugin: null,
    skills: [],
    namespaceManifests: [],
    warnings: [],
    error: null,
  };
  try {
    if (!(await reader.isDirectory(root))) {
      result.error = `capability root ${result.path} is not a directory`;
      return result;
    }
  } catch (error) {
    result.error = `failed to inspect capability root ${result.path}: ${errorText(error)}`;
    return result;
  }
  const listing = await reader.walk(root, SCAN_OPTIONS);
  for (const e of listing.errors) {
    result.warnings.push(`failed to scan capability path ${pathToUri(e.path)}: ${e.message}`);
  }
  if (listing.truncated) {
    result.warnings.push(`capability scan reached its traversal limit (root: ${result.path})`);
  }
  const files = new Set(listing.entries.filter((e) => e.kind === "file").map((e) => e.path));
  const read = async (path: string): Promise<CapabilityFile | null> => {
    const got = await readCapabilityFile(reader, path);
    if ("file" in got) return got.file;
    result.warnings.push(got.warning);
    return null;
  };
  const sorted = [...files].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const base = root === "/" ? "" : root;
  for (const path of sorted) {
    if (path.endsWith("/SKILL.md")) {
      const instructions = await read(path);
      if (!instructions) continue;
      const metadataPath = `${path.slice(0, -"SKILL.md".length)}agents/openai.yaml`;
      const skill: CapabilitySkillFiles = {
        instructions,
        metadata: files.has(metadataPath) ? await read(metadataPath) : null,
      };
      result.skills.push(skill);
    } else if (path.endsWith("/.codex-plugin/plugin.json")) {
      const manifest = await read(path);
      if (manifest) result.namespaceManifests.push(manifest);
    }
  }
  const manifestPath = `${base}/.codex-plugin/plugin.json`;
  if (files.has(manifestPath)) {
    const manifest = result.namespaceManifests.find((m) => m.path === pathToUri(manifestPath));
    if (manifest) {
      const optional = async (name: string) =>
        files.has(`${base}/${name}`) ? await read(`${base}/${name}`) : null;
      result.plugin = {
        manifest,
        mcpConfig: await optional(".mcp.json"),
        appsConfig: await optional(".app.json"),
      };
    }
  }
  return result;
}
