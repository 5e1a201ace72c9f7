/**
 * The `sandbox` objects Codex 0.169.0 sends in its two confined modes, for
 * clients that want the same confinement (`exec --sandbox`, `spawn`).
 *
 * @module
 */

import { toPathUri } from "../protocol/path_uri.ts";
import type { FileSystemSandboxContext, SandboxEntry } from "../protocol/types.ts";

/** Codex's sandbox modes that confine. */
export type SandboxMode = "read-only" | "workspace-write";

function special(
  kind: "root" | "project_roots" | "slash_tmp" | "tmpdir",
  access: "read" | "write",
  subpath?: string,
): SandboxEntry {
  return {
    path: { type: "special", value: subpath ? { kind, subpath } : { kind } },
    access,
    ...(subpath ? { missing_path_behavior: "skip" as const } : {}),
  };
}

/**
 * Codex's policy for `mode` with `workspace` as the project root (a path
 * or `file:` URL): everything readable; in `workspace-write` also the
 * workspace, `/tmp` and `$TMPDIR` writable (their `.git`, `.agents`,
 * `.codex`, `.aws` kept read-only); the network closed.
 *
 * @example
 * ```ts ignore
 * await client.spawn(["make"], { sandbox: codexSandbox("workspace-write", "/repo"), cwd: "/repo" });
 * ```
 */
export function codexSandbox(mode: SandboxMode, workspace: string | URL): FileSystemSandboxContext {
  const entries: SandboxEntry[] = [special("root", "read")];
  if (mode === "workspace-write") {
    entries.push(
      special("project_roots", "write"),
      special("slash_tmp", "write"),
      special("tmpdir", "write"),
      ...[".git", ".agents", ".codex", ".aws"].map((name) =>
        special("project_roots", "read", name)
      ),
    );
  }
  const root = toPathUri(workspace);
  return {
    permissions: {
      type: "managed",
      file_system: { type: "restricted", entries },
      network: "restricted",
    },
    cwd: root,
    workspaceRoots: [root],
    windowsSandboxLevel: "disabled",
    windowsSandboxProxySettingsMode: "reconcile",
    useLegacyLandlock: false,
  };
}
