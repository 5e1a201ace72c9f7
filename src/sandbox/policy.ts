/**
 * From a `sandbox` request to a mount plan: every entry resolved to real
 * paths (symlinks followed, workspace roots and `TMPDIR` filled in, globs
 * expanded) with one access per path, in the order bubblewrap must mount
 * them (outer before inner).
 *
 * The rules, as the reference applies them (found by experiment against
 * codex 0.169.0; the README's sandbox section lists them):
 *
 * - Overlapping entries for one path: `none` wins, then `write`, then
 *   `read`.
 * - Every writable directory named by a non-glob entry keeps its `.git`,
 *   `.agents`, `.aws` and `.codex` read-only (a Git pointer file's
 *   `gitdir:` target too), unless an entry names that path itself. Missing
 *   ones are mounted as read-only empty placeholders, so sandboxed code
 *   cannot create them (a planted `.codex/config.toml` or `.git/hooks`
 *   would run outside the sandbox later).
 * - A `read` or `none` entry whose path is missing but would be creatable
 *   (it lies in a writable area) becomes a placeholder too; a missing path
 *   elsewhere needs nothing (it cannot be created).
 * - Beyond the reference: the `tmpdir` entry never widens what can be
 *   written. It names `TMPDIR` from the request's environment, which the
 *   request chose (`TMPDIR=/` made the whole host writable on the
 *   reference); it is honoured only when that directory is the server's own
 *   `TMPDIR` or lies inside a root another entry already makes writable, and
 *   grants nothing otherwise.
 *
 * Resolution happens at spawn time, on the host, so a path that changes
 * afterwards changes nothing: bubblewrap mounts what was resolved, and a
 * symlink swapped in later still points into the read-only view.
 *
 * @module
 */

import type { globSync as GlobSync } from "node:fs";
import { dirname, isAbsolute, join, normalize, resolve } from "../util/posix_path.ts";
import type { FileSystemSandboxContext, SandboxAccess, SandboxEntry } from "../protocol/types.ts";
import { isHeldMountPoint } from "./mount_points.ts";

/** What a mount grants. */
export type MountAccess = "read" | "write" | "none";

/** One path of the plan. */
export interface MountRule {
  /** Absolute, canonical path. */
  readonly path: string;
  /** What the sandboxed code may do there. */
  readonly access: MountAccess;
  /**
   * What is there on the host. `missing-directory`/`missing-file`: nothing
   * yet; an empty read-only placeholder of that kind is mounted.
   */
  readonly kind: "directory" | "file" | "missing-directory" | "missing-file";
}

/** How the sandbox's `/` starts out before the rules apply. */
export type RootBase =
  /** `/` read-only. */
  | "read"
  /** `/` writable. */
  | "write"
  /** Only the system directories (`minimal`), read-only. */
  | "minimal"
  /** Nothing. */
  | "empty";

/** A resolved sandbox: what bubblewrap builds. */
export interface SandboxPlan {
  /** `unrestricted`: the filesystem as it is (only the network and the process tree are confined). */
  readonly fileSystem: "unrestricted" | {
    readonly root: RootBase;
    readonly rules: readonly MountRule[];
  };
  /** `restricted`: no network (own namespace, socket calls refused). */
  readonly network: "restricted" | "enabled";
  /** The plan as a string: equal keys build equal sandboxes. */
  readonly key: string;
}

/** The system directories a `minimal` entry makes readable. */
export const MINIMAL_PATHS: readonly string[] = ["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"];

/** Names kept read-only inside every writable root. */
export const PROTECTED_NAMES: readonly string[] = [".git", ".agents", ".aws", ".codex"];

/** Precedence when entries name the same path. */
const RANK: Record<MountAccess, number> = { read: 1, write: 2, none: 3 };

function mountAccess(access: SandboxAccess): MountAccess {
  return access === "deny" ? "none" : access;
}

/** Where the request's relative parts are anchored. */
export interface ResolveContext {
  /** The process's (or the operation's) working directory. */
  readonly cwd: string;
  /** The environment the sandboxed code gets (`TMPDIR`). */
  readonly env: Readonly<Record<string, string>>;
}

/**
 * Whether a `tmpdir` entry's directory may count: this server's own
 * `TMPDIR`, or inside (or equal to) a root another entry makes writable.
 */
function trustedTmpdir(path: string, requested: ReadonlyMap<string, MountAccess>): boolean {
  const own = Deno.env.get("TMPDIR");
  if (own && canonical(own) === path) return true;
  for (const [root, access] of requested) {
    if (access === "write" && (path === root || path.startsWith(`${root === "/" ? "" : root}/`))) {
      return true;
    }
  }
  return false;
}

/** `path` with symlinks resolved as far as it exists (a missing tail is kept). */
function canonical(path: string): string {
  const normalized = normalize(path);
  try {
    return Deno.realPathSync(normalized);
  } catch {
    const parent = dirname(normalized);
    if (parent === normalized) return normalized;
    return join(canonical(parent), normalized.slice(parent.length + (parent === "/" ? 0 : 1)));
  }
}

/** `base/subpath`, or null when the subpath is absolute or climbs out of `base`. */
function below(base: string, subpath: string | null | undefined): string | null {
  if (subpath === undefined || subpath === null || subpath === "" || subpath === ".") return base;
  if (isAbsolute(subpath)) return null;
  const normalized = normalize(subpath);
  if (normalized === ".." || normalized.startsWith("../")) return null;
  return join(base, normalized);
}

let globSync: typeof GlobSync | undefined;

/**
 * Null when {@linkcode resolveSandbox} can resolve `sandbox` now; otherwise
 * (its policy holds the first glob pattern this process has seen) a promise
 * that resolves once it can: glob expansion (`node:fs`) loads then, not in
 * every server.
 */
export function sandboxReady(
  sandbox: FileSystemSandboxContext | null | undefined,
): Promise<void> | null {
  if (globSync || !sandbox) return null;
  const permissions = sandbox.permissions;
  if (permissions.type !== "managed" || permissions.file_system.type !== "restricted") return null;
  const hides = (e: SandboxEntry) =>
    e.path.type === "glob_pattern" && mountAccess(e.access) === "none";
  if (!permissions.file_system.entries.some(hides)) return null;
  return import("node:fs").then((fs) => {
    globSync ??= fs.globSync;
  });
}

interface EntryPaths {
  readonly paths: string[];
  /** Named directly (not by a glob): its writable directories get protected names. */
  readonly direct: boolean;
}

function entryPaths(
  entry: SandboxEntry,
  roots: readonly string[],
  base: string,
  env: Readonly<Record<string, string>>,
): EntryPaths | "minimal" {
  const path = entry.path;
  switch (path.type) {
    case "path":
      return { paths: [path.path], direct: true };
    case "glob_pattern": {
      // Glob patterns only hide (Codex's deny-read globs): one that would
      // grant `read` or `write` grants nothing, as in the reference.
      if (mountAccess(entry.access) !== "none") return { paths: [], direct: false };
      if (!globSync) {
        throw new Error("internal error: a glob pattern resolved before sandboxReady()");
      }
      const pattern = isAbsolute(path.pattern) ? path.pattern : join(base, path.pattern);
      try {
        return { paths: globSync(pattern).map((match) => resolve(base, match)), direct: false };
      } catch {
        return { paths: [], direct: false };
      }
    }
    case "special": {
      const { kind, subpath } = path.value;
      let bases: string[];
      switch (kind) {
        case "root":
          bases = ["/"];
          break;
        case "minimal":
          return "minimal";
        case "current_working_directory":
        case "project_roots":
          bases = [...roots];
          break;
        case "tmpdir":
          bases = env.TMPDIR ? [env.TMPDIR] : [];
          break;
        case "slash_tmp":
          bases = ["/tmp"];
          break;
        case "unknown":
          bases = [];
          break;
      }
      const paths = bases.map((b) => below(b, subpath)).filter((p): p is string => p !== null);
      return { paths, direct: true };
    }
  }
}

/**
 * Resolves a `sandbox` request; null when it asks for no confinement
 * (`permissions.type: "disabled"`).
 */
export function resolveSandbox(
  sandbox: FileSystemSandboxContext,
  context: ResolveContext,
): SandboxPlan | null {
  const permissions = sandbox.permissions;
  if (permissions.type === "disabled") return null;
  const network = permissions.network;
  if (permissions.type === "external" || permissions.file_system.type === "unrestricted") {
    return { fileSystem: "unrestricted", network, key: `unrestricted|${network}` };
  }
  const roots = (sandbox.workspaceRoots ?? sandbox.policyContext?.workspaceRoots ?? []).map(
    canonical,
  );
  const base = sandbox.cwd ?? sandbox.policyContext?.cwd ?? context.cwd;
  const requested = new Map<string, MountAccess>();
  const directWrites = new Set<string>();
  let minimal = false;
  // `tmpdir` entries last: whether they count depends on the others.
  const entries = permissions.file_system.entries;
  const isTmpdir = (e: SandboxEntry) => e.path.type === "special" && e.path.value.kind === "tmpdir";
  for (const entry of [...entries.filter((e) => !isTmpdir(e)), ...entries.filter(isTmpdir)]) {
    const resolved = entryPaths(entry, roots, base, context.env);
    const access = mountAccess(entry.access);
    if (resolved === "minimal") {
      if (access !== "none") minimal = true;
      continue;
    }
    for (const raw of resolved.paths) {
      const path = canonical(raw);
      if (isTmpdir(entry) && !trustedTmpdir(path, requested)) continue;
      const previous = requested.get(path);
      if (!previous || RANK[access] > RANK[previous]) requested.set(path, access);
      if (resolved.direct && access === "write") directWrites.add(path);
    }
  }
  // Protected names inside writable roots, unless named explicitly.
  for (const root of directWrites) {
    if (requested.get(root) !== "write" || kindOf(root) !== "directory") continue;
    for (const name of PROTECTED_NAMES) {
      const path = join(root, name);
      if (!requested.has(path)) requested.set(path, "read");
      // A pointer file's repository is protected as the pointer is, even when
      // the policy names `.git` itself (Codex does): its config and hooks run
      // outside any sandbox the next time the user runs git.
      if (name === ".git" && requested.get(path) !== "write") {
        for (const target of gitMetadataOf(path)) {
          if (!requested.has(target)) requested.set(target, "read");
        }
      }
    }
  }
  const slash = requested.get("/");
  requested.delete("/");
  const rootBase: RootBase = slash === "read" || slash === "write"
    ? slash
    : (minimal ? "minimal" : "empty");
  return buildPlan(rootBase, rulesFor(requested, rootBase), network);
}

/** The plan's rules for `requested` paths on top of `root`: placeholders where needed, outer first. */
function rulesFor(requested: Map<string, MountAccess>, root: RootBase): MountRule[] {
  const rules: MountRule[] = [];
  const sorted = [...requested].sort(([a], [b]) => depth(a) - depth(b) || (a < b ? -1 : 1));
  for (const [path, access] of sorted) {
    const kind = kindOf(path);
    if (kind !== "missing") {
      rules.push({ path, access, kind });
      continue;
    }
    // A missing path matters only where it could be created.
    if (access === "write" || effectiveAccess(rules, root, path) !== "write") continue;
    rules.push({
      path,
      access,
      kind: PROTECTED_NAMES.includes(path.slice(path.lastIndexOf("/") + 1))
        ? "missing-directory"
        : "missing-file",
    });
  }
  return rules;
}

/** What the plan so far grants at `path` (the deepest enclosing rule, else the root). */
function effectiveAccess(rules: readonly MountRule[], root: RootBase, path: string): MountAccess {
  let best: MountRule | null = null;
  for (const rule of rules) {
    if (path.startsWith(`${rule.path}/`) && (!best || rule.path.length > best.path.length)) {
      best = rule;
    }
  }
  // Inside a file or a placeholder nothing can be created.
  if (best) return best.kind === "directory" ? best.access : "read";
  return root === "write" ? "write" : "read";
}

function depth(path: string): number {
  return path.split("/").length;
}

function kindOf(path: string): "directory" | "file" | "missing" {
  // A placeholder another sandbox put there is not a real path.
  if (isHeldMountPoint(path)) return "missing";
  try {
    return Deno.statSync(path).isDirectory ? "directory" : "file";
  } catch {
    return "missing";
  }
}

/**
 * Where a `.git` pointer file (`gitdir: PATH`: worktrees, submodules) leads,
 * canonical: the directory it names and, for a worktree, the repository it
 * shares (`commondir`, holding `config` and `hooks/`). Empty for a `.git`
 * directory or anything unreadable.
 */
function gitMetadataOf(dotGit: string): string[] {
  const gitdir = pointerTarget(dotGit, /^gitdir:\s*(.+?)\s*$/m);
  if (gitdir === null) return [];
  const common = pointerTarget(join(gitdir, "commondir"), /^\s*(.+?)\s*$/m);
  return common === null || common === gitdir ? [gitdir] : [gitdir, common];
}

/** The path a small pointer file names (relative to the file's directory), canonical. */
function pointerTarget(file: string, pattern: RegExp): string | null {
  let text: string;
  try {
    if (!Deno.lstatSync(file).isFile) return null;
    text = Deno.readTextFileSync(file);
  } catch {
    return null;
  }
  const match = pattern.exec(text);
  if (!match) return null;
  return canonical(resolve(dirname(file), match[1]!));
}

function buildPlan(
  root: RootBase,
  rules: readonly MountRule[],
  network: SandboxPlan["network"],
): SandboxPlan {
  return { fileSystem: { root, rules }, network, key: JSON.stringify([root, rules, network]) };
}

/** True when `plan` lets every path be read (nothing hidden). */
export function readsEverything(plan: SandboxPlan): boolean {
  const fs = plan.fileSystem;
  if (fs === "unrestricted") return true;
  return (fs.root === "read" || fs.root === "write") && fs.rules.every((r) => r.access !== "none");
}

/**
 * `plan` with the system directories (as `minimal` grants them) and `paths`
 * readable too, unless `/` already is: what a helper program running
 * inside the sandbox needs to start.
 */
export function withReadable(plan: SandboxPlan, paths: readonly string[]): SandboxPlan {
  const fs = plan.fileSystem;
  if (fs === "unrestricted" || fs.root === "read" || fs.root === "write") return plan;
  const requested = new Map(fs.rules.map((rule) => [rule.path, rule.access]));
  for (const path of paths) {
    const real = canonical(path);
    if (!requested.has(real)) requested.set(real, "read");
  }
  return buildPlan("minimal", rulesFor(requested, "minimal"), plan.network);
}
