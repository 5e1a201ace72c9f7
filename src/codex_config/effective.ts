/**
 * The effective Codex configuration: the layers that apply to a directory,
 * merged table by table (a later layer's value replaces an earlier one's;
 * tables merge key by key), then `-c key=value` overrides as Codex takes
 * them — a dotted path, the value parsed as TOML, or taken as a literal
 * string when it does not parse.
 *
 * @module
 */

import { loadToml } from "../util/toml.ts";
import { setOwn } from "../util/record.ts";
import { type ConfigLocations, defaultConfigLocations, loadConfigLayers } from "./layers.ts";
import { isTable, type TomlTable, type TomlValue } from "./toml_write.ts";

/** Deep-merges `over` into `base` (in place); returns `base`. */
export function mergeTables(base: TomlTable, over: TomlTable): TomlTable {
  for (const [key, value] of Object.entries(over)) {
    const existing = Object.hasOwn(base, key) ? base[key] : undefined;
    if (isTable(existing) && isTable(value)) mergeTables(existing, value);
    else setOwn(base, key, isTable(value) ? mergeTables({}, value) : value);
  }
  return base;
}

/**
 * Parses one `-c` override: `a.b.c=VALUE`. Throws on a missing `=` or an
 * empty key, with Codex's wording.
 */
export async function parseOverride(text: string): Promise<[string[], TomlValue]> {
  const eq = text.indexOf("=");
  if (eq < 0) throw new Error(`Invalid override (missing '='): ${text}`);
  const key = text.slice(0, eq).trim();
  const raw = text.slice(eq + 1).trim();
  if (key === "") throw new Error(`Empty key in override: ${text}`);
  const toml = await loadToml();
  let value: TomlValue;
  try {
    value = (toml.parse(`_x_ = ${raw}`, { integersAsBigInt: true }) as TomlTable)._x_!;
  } catch {
    // Not TOML: the raw text, without surrounding quotes.
    value = raw.replace(/^(['"])(.*)\1$/s, "$2");
  }
  return [key.split("."), value];
}

/** Applies parsed overrides to `table` (in place). */
export function applyOverrides(
  table: TomlTable,
  overrides: ReadonlyArray<[string[], TomlValue]>,
): TomlTable {
  for (const [path, value] of overrides) {
    let node = table;
    for (const part of path.slice(0, -1)) {
      const next = Object.hasOwn(node, part) ? node[part] : undefined;
      if (isTable(next)) node = next;
      else {
        const fresh: TomlTable = {};
        setOwn(node, part, fresh);
        node = fresh;
      }
    }
    setOwn(node, path.at(-1)!, value);
  }
  return table;
}

/** Options of {@linkcode loadEffectiveConfig}. */
export interface EffectiveConfigOptions {
  /** Directory project layers are looked up from. Default: this process's cwd. */
  readonly cwd?: string;
  /** `-c key=value` overrides, in order. */
  readonly overrides?: readonly string[];
  /** Where the layers are. Default: `$CODEX_HOME` (else `~/.codex`) and `/etc/codex`. */
  readonly locations?: ConfigLocations;
}

/** The merged configuration with overrides applied. */
export async function loadEffectiveConfig(
  options: EffectiveConfigOptions = {},
): Promise<TomlTable> {
  const parsed = await Promise.all((options.overrides ?? []).map(parseOverride));
  const layers = await loadConfigLayers(
    options.cwd ?? Deno.cwd(),
    options.locations ?? defaultConfigLocations(),
  );
  const merged: TomlTable = {};
  for (const layer of layers) mergeTables(merged, layer.table);
  return applyOverrides(merged, parsed);
}
