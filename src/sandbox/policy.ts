/**
 * From a `sandbox` request to a mount plan: every entry resolved to real
 * paths (symlinks followed, workspace roots and `TMPDIR` filled in, globs
 * expanded) with one access per path, the most permissive when entries
 * overlap, in the order bubblewrap must mount them (outer before inner).
 *
 * Resolution happens at spawn time, on the host, so a path that changes
 * afterwards changes nothing: bubblewrap mounts what was resolved, and a
 * symlink swapped in later still points into the read-only view.
 *
 * @module
 */

import { globSync } from "node:fs";
import { isAbsolute, join, normalize, resolve } from "node:path";
import type { FileSystemSandboxContext, SandboxAccess, SandboxEntry } from "../protocol/types.ts";

/** What a mount grants. */
export type MountAccess = "read" | "write" | "none";

/** One path of the plan. */
export interface MountRule {
  /** Absolute, canonical path. */
  readonly path: string;
  /** What the sandboxed code may do there. */
  readonly access: MountAccess;
  /** What is there on the host. */
  readonly kind: "directory" | "file";
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
  /** `restricted`: an own network namespace with loopback only. */
  readonly network: "restricted" | "enabled";
  /** The plan as a string: equal keys build equal sandboxes. */
  readonly key: string;
}

/** The system directories a `minimal` entry makes readable. */
export const MINIMAL_PATHS: readonly string[] = ["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"];

const RANK: Record<MountAccess, number> = { none: 0, read: 1, write: 2 };

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

function canonical(path: string): string {
  try {
    return Deno.realPathSync(path);
  } catch {
    return normalize(path);
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

function entryPaths(
  entry: SandboxEntry,
  roots: readonly string[],
  base: string,
  env: Readonly<Record<string, string>>,
): string[] | "minimal" {
  const path = entry.path;
  switch (path.type) {
    case "path":
      return [path.path];
    case "glob_pattern": {
      const pattern = isAbsolute(path.pattern) ? path.pattern : join(base, path.pattern);
      try {
        return globSync(pattern).map((match) => resolve(base, match));
      } catch {
        return [];
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
      return bases.map((b) => below(b, subpath)).filter((p): p is string => p !== null);
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
  const byPath = new Map<string, MountRule>();
  let minimal = false;
  for (const entry of permissions.file_system.entries) {
    const paths = entryPaths(entry, roots, base, context.env);
    if (paths === "minimal") {
      if (mountAccess(entry.access) !== "none") minimal = true;
      continue;
    }
    const access = mountAccess(entry.access);
    for (const raw of paths) addRule(byPath, canonical(raw), access);
  }
  return buildPlan(byPath, minimal, network);
}

function buildPlan(
  byPath: Map<string, MountRule>,
  minimal: boolean,
  network: SandboxPlan["network"],
): SandboxPlan {
  const slash = byPath.get("/");
  byPath.delete("/");
  const granted = slash && slash.access !== "none" ? slash.access : null;
  const root: RootBase = granted ?? (minimal ? "minimal" : "empty");
  const depth = (p: string) => p.split("/").length;
  const rules = [...byPath.values()].sort((a, b) =>
    depth(a.path) - depth(b.path) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)
  );
  return { fileSystem: { root, rules }, network, key: JSON.stringify([root, rules, network]) };
}

function addRule(byPath: Map<string, MountRule>, path: string, access: MountAccess): void {
  let kind: MountRule["kind"];
  try {
    kind = Deno.statSync(path).isDirectory ? "directory" : "file";
  } catch {
    // Missing: nothing to mount, and nothing the sandbox could reach
    // through it that the enclosing rule does not already decide.
    return;
  }
  const previous = byPath.get(path);
  if (previous && RANK[previous.access] >= RANK[access]) return;
  byPath.set(path, { path, access, kind });
}

/**
 * `plan` with `paths` readable too, unless `/` already is (what a helper
 * running inside the sandbox needs to start).
 */
export function withReadable(plan: SandboxPlan, paths: readonly string[]): SandboxPlan {
  const fs = plan.fileSystem;
  if (fs === "unrestricted" || fs.root === "read" || fs.root === "write") return plan;
  const byPath = new Map(fs.rules.map((rule) => [rule.path, rule]));
  for (const path of paths) addRule(byPath, canonical(path), "read");
  return buildPlan(byPath, fs.root === "minimal", plan.network);
}
