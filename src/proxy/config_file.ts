/**
 * Proxy configuration files: JSON or TOML holding the runtime keys (at the
 * top level or under `[network]`), or a Codex permissions profile
 * (`default_permissions = "p"` with `[permissions.p.network]`, its
 * `domains`/`unix_sockets` tables and `mitm.hooks`/`mitm.actions`). A file
 * source reloads when the file changes.
 *
 * @module
 */

import { loadToml } from "../util/toml.ts";
import {
  type InjectHeaderConfig,
  isRecord,
  type MitmHookConfig,
  NetworkConfigError,
  type NetworkProxyConfig,
  parseNetworkProxyConfig,
} from "./config.ts";
import type { ConfigSource } from "./state.ts";
import {
  applyNetworkRequirements,
  type NetworkRequirements,
  parseNetworkRequirements,
} from "./constraints.ts";

function profileNetwork(network: Record<string, unknown>): Record<string, unknown> {
  const { mitm, ...rest } = network;
  const out: Record<string, unknown> = { ...rest };
  const hooks: MitmHookConfig[] = [];
  if (mitm !== undefined) {
    if (!isRecord(mitm)) throw new NetworkConfigError("network.mitm must be a table");
    for (const key of Object.keys(mitm)) {
      if (key !== "hooks" && key !== "actions") {
        throw new NetworkConfigError(`unknown key \`${key}\` in network.mitm`);
      }
    }
    const actions = (mitm.actions ?? {}) as Record<string, Record<string, unknown>>;
    for (const [name, action] of Object.entries(actions)) {
      const strip = (action.strip_request_headers ?? []) as string[];
      const inject = (action.inject_request_headers ?? []) as InjectHeaderConfig[];
      if (strip.length === 0 && inject.length === 0) {
        throw new NetworkConfigError(
          `network.mitm.actions.${name} must define at least one operation`,
        );
      }
    }
    for (
      const [name, hook] of Object.entries(
        (mitm.hooks ?? {}) as Record<string, Record<string, unknown>>,
      )
    ) {
      const names = (hook.action ?? []) as string[];
      if (names.length === 0) {
        throw new NetworkConfigError(`network.mitm.hooks.${name}.action must not be empty`);
      }
      const strip: string[] = [];
      const inject: InjectHeaderConfig[] = [];
      for (const a of names) {
        const action = actions[a];
        if (!action) {
          throw new NetworkConfigError(
            `network.mitm.hooks.${name}.action references undefined action \`${a}\``,
          );
        }
        strip.push(...((action.strip_request_headers ?? []) as string[]));
        inject.push(...((action.inject_request_headers ?? []) as InjectHeaderConfig[]));
      }
      hooks.push({
        host: hook.host as string,
        match: {
          ...(hook.methods !== undefined ? { methods: hook.methods as string[] } : {}),
          ...(hook.path_prefixes !== undefined
            ? { path_prefixes: hook.path_prefixes as string[] }
            : {}),
          ...(hook.query !== undefined ? { query: hook.query as Record<string, string[]> } : {}),
          ...(hook.headers !== undefined
            ? { headers: hook.headers as Record<string, string[]> }
            : {}),
          ...(hook.body !== undefined ? { body: hook.body } : {}),
        },
        actions: { strip_request_headers: strip, inject_request_headers: inject },
      });
    }
  }
  out.mitm_hooks = hooks;
  out.mitm = out.mode === "limited" || hooks.length > 0;
  return out;
}

/** Picks the runtime table out of a parsed document. */
export function networkTable(doc: unknown): Record<string, unknown> {
  if (!isRecord(doc)) throw new NetworkConfigError("network proxy config must be a table");
  if (doc.default_permissions !== undefined || doc.permissions !== undefined) {
    const profile = doc.default_permissions;
    if (typeof profile !== "string") {
      throw new NetworkConfigError("default_permissions must name a profile");
    }
    const network = (doc.permissions as Record<string, Record<string, unknown>> | undefined)
      ?.[profile]?.network;
    if (!isRecord(network)) {
      throw new NetworkConfigError(`permissions.${profile}.network is missing`);
    }
    return profileNetwork(network);
  }
  if (isRecord(doc.network) && Object.keys(doc).length === 1) return doc.network;
  return doc;
}

/** Parses configuration text (`json` or `toml`). */
export async function parseNetworkProxyConfigText(
  text: string,
  format: "json" | "toml",
): Promise<NetworkProxyConfig> {
  const doc = await parseDocument(text, format, `${format.toUpperCase()} config`);
  return parseNetworkProxyConfig(networkTable(doc));
}

/** Parses JSON or TOML text; failures are `cannot parse the <what>: …`. */
async function parseDocument(
  text: string,
  format: "json" | "toml",
  what: string,
): Promise<unknown> {
  try {
    return format === "json" ? JSON.parse(text) : (await loadToml()).parse(text);
  } catch (error) {
    throw new NetworkConfigError(`cannot parse the ${what}: ${(error as Error).message}`);
  }
}

function formatOf(path: string, text: string): "json" | "toml" {
  return path.endsWith(".json") || text.trimStart().startsWith("{") ? "json" : "toml";
}

/** Reads a configuration file. */
export async function loadNetworkProxyConfigFile(path: string): Promise<NetworkProxyConfig> {
  const text = await Deno.readTextFile(path);
  return await parseNetworkProxyConfigText(text, formatOf(path, text));
}

/** A {@linkcode ConfigSource} re-reading `path` when its modification time or size changes. */
export async function fileConfigSource(path: string, checkEveryMs = 250): Promise<ConfigSource> {
  const t = await loadToml();
  const stamp = () => {
    try {
      const s = Deno.statSync(path);
      return `${s.mtime?.getTime()}:${s.size}`;
    } catch {
      return "missing";
    }
  };
  let last = stamp();
  let checked = Date.now();
  return {
    label: path,
    maybeReload() {
      if (Date.now() - checked < checkEveryMs) return null;
      checked = Date.now();
      const now = stamp();
      if (now === last || now === "missing") return null;
      last = now;
      const text = Deno.readTextFileSync(path);
      const doc = formatOf(path, text) === "json" ? JSON.parse(text) : t.parse(text);
      return parseNetworkProxyConfig(networkTable(doc));
    },
  };
}

/**
 * Reads an administrator's requirements file (JSON or TOML): the keys of
 * {@linkcode NetworkRequirements} at the top level or under `[network]`.
 */
export async function loadNetworkRequirementsFile(path: string): Promise<NetworkRequirements> {
  const text = await Deno.readTextFile(path);
  let doc = await parseDocument(text, formatOf(path, text), "requirements");
  if (isRecord(doc) && isRecord(doc.network) && Object.keys(doc).length === 1) doc = doc.network;
  return parseNetworkRequirements(doc);
}

/** `source` with `requirements` applied to every reloaded configuration. */
export function requiredConfigSource(
  source: ConfigSource,
  requirements: NetworkRequirements,
  options: { allowlistExpansion?: boolean } = {},
): ConfigSource {
  return {
    label: source.label,
    maybeReload() {
      const next = source.maybeReload();
      return next && applyNetworkRequirements(next, requirements, options).config;
    },
  };
}
