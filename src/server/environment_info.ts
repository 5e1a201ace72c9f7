/**
 * What `environment/info` reports about the machine the server runs on.
 *
 * @module
 */

import { pathToUri } from "../protocol/path_uri.ts";
import type {
  Capabilities,
  EnvironmentInfo,
  SandboxAvailability,
  ShellInfo,
} from "../protocol/types.ts";
import { VERSION } from "../version.ts";

/** The login shell of the current user, from the account database. */
export function loginShell(): ShellInfo {
  let path: string | undefined;
  try {
    const uid = Deno.uid();
    const passwd = Deno.readTextFileSync("/etc/passwd");
    for (const line of passwd.split("\n")) {
      const fields = line.split(":");
      if (fields.length >= 7 && Number(fields[2]) === uid) {
        path = fields[6]?.trim() || undefined;
        break;
      }
    }
  } catch {
    // No account database (or no permission): fall back below.
  }
  path ??= Deno.env.get("SHELL") || "/bin/sh";
  const name = path.slice(path.lastIndexOf("/") + 1) || "sh";
  return { name, path };
}

function platformOs(): string {
  switch (Deno.build.os) {
    case "darwin":
      return "macos";
    case "windows":
      return "windows";
    default:
      return Deno.build.os;
  }
}

function resolveAgainstCwd(path: string): string {
  if (path.startsWith("/")) return path;
  const cwd = Deno.cwd();
  return `${cwd.endsWith("/") ? cwd : cwd + "/"}${path}`;
}

/** Collects the environment description; computed once per server. */
export function environmentInfo(
  capabilities: Capabilities,
  sandbox?: SandboxAvailability,
): EnvironmentInfo {
  const tmpdir = Deno.env.get("TMPDIR");
  const home = Deno.env.get("HOME") ?? "/";
  return {
    shell: loginShell(),
    executorVersion: VERSION,
    prependPathDirs: [],
    cwd: pathToUri(Deno.cwd()),
    userHomeDir: pathToUri(home),
    platformOs: platformOs(),
    temporaryDirectories: tmpdir ? [pathToUri(resolveAgainstCwd(tmpdir))] : [],
    tempDir: pathToUri(tmpdir ? resolveAgainstCwd(tmpdir) : "/tmp"),
    capabilities,
    ...(sandbox ? { sandbox } : {}),
  };
}
