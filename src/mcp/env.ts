/**
 * Environments for MCP stdio servers, local and remote.
 *
 * Local: the child gets only DEFAULT_ENV_VARS taken from this process, the
 * named `envVars`, then the literal `env`. Remote: an overlay (the named
 * local variables and `env`, never PATH/HOME and friends, which must come
 * from the remote side) plus a policy the exec-server applies to its own
 * environment: `core` inheritance, or — when a variable is named with
 * `source: "remote"` — `all` filtered to the defaults and those names. Both
 * skip the default `*KEY*`/`*SECRET*`/`*TOKEN*` excludes.
 *
 * @module
 */

import type { EnvPolicy } from "../protocol/types.ts";
import type { McpEnvVar, McpServerSpec } from "./server_spec.ts";

/** Variables every MCP server gets from its host. */
export const DEFAULT_ENV_VARS: readonly string[] = [
  "HOME",
  "LOGNAME",
  "PATH",
  "SHELL",
  "USER",
  "__CF_USER_TEXT_ENCODING",
  "LANG",
  "LC_ALL",
  "TERM",
  "TMPDIR",
  "TZ",
];

function entries(spec: McpServerSpec): McpEnvVar[] {
  return (spec.envVars ?? []).map((v) => typeof v === "string" ? { name: v } : v);
}

/** The complete environment of a locally started server. */
export function localMcpEnv(
  spec: McpServerSpec,
  host: Readonly<Record<string, string>> = Deno.env.toObject(),
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of DEFAULT_ENV_VARS) if (host[name] !== undefined) env[name] = host[name]!;
  for (const entry of entries(spec)) {
    if (entry.source === "remote") {
      throw new Error(
        `env_vars entry \`${entry.name}\` uses source \`remote\`, which requires remote MCP stdio`,
      );
    }
    if (host[entry.name] !== undefined) env[entry.name] = host[entry.name]!;
  }
  return { ...env, ...spec.env };
}

/** The overlay and policy of a server started through an exec-server. */
export function remoteMcpEnv(
  spec: McpServerSpec,
  host: Readonly<Record<string, string>> = Deno.env.toObject(),
): { env: Record<string, string>; envPolicy: EnvPolicy } {
  const env: Record<string, string> = {};
  const remote: string[] = [];
  for (const entry of entries(spec)) {
    if (entry.source === "remote") remote.push(entry.name);
    else if (host[entry.name] !== undefined) env[entry.name] = host[entry.name]!;
  }
  const envPolicy: EnvPolicy = remote.length === 0
    ? { inherit: "core", ignoreDefaultExcludes: true, exclude: [], set: {}, includeOnly: [] }
    : {
      inherit: "all",
      ignoreDefaultExcludes: true,
      exclude: [],
      set: {},
      includeOnly: [...DEFAULT_ENV_VARS, ...remote],
    };
  return { env: { ...env, ...spec.env }, envPolicy };
}
