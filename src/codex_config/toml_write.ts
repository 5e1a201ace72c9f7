/**
 * TOML text from a parsed table, laid out as Codex's own serialiser lays it
 * out: a table's plain values first, then each sub-table under a dotted
 * `[a.b]` header (a table holding only tables gets no header of its own),
 * then arrays of tables as `[[a.b]]`; sections separated by a blank line;
 * inline arrays as `["x", "y"]`. Integers are `bigint` (parse with
 * `integersAsBigInt: true`), floats `number`, dates smol-toml's `TomlDate`.
 *
 * @module
 */

import { isRecord } from "../util/record.ts";

/** A parsed TOML table. */
export type TomlTable = { [key: string]: TomlValue };
/** A parsed TOML value. */
export type TomlValue = string | number | bigint | boolean | Date | TomlValue[] | TomlTable;

/** A TOML table: an object that is neither an array nor a date. */
export function isTable(v: unknown): v is TomlTable {
  return isRecord(v) && !(v instanceof Date);
}

function isTableArray(v: unknown): v is TomlTable[] {
  return Array.isArray(v) && v.length > 0 && v.every(isTable);
}

/** A key, bare when it can be. */
export function tomlKey(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : tomlString(key);
}

function tomlString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (c < 0x20 || c === 0x7f) out += `\\u${c.toString(16).padStart(4, "0").toUpperCase()}`;
    else out += ch;
  }
  return out + '"';
}

function tomlFloat(n: number): string {
  if (Number.isNaN(n)) return "nan";
  if (!Number.isFinite(n)) return n > 0 ? "inf" : "-inf";
  if (Object.is(n, -0)) return "-0.0";
  const s = String(n);
  return /[.eE]/.test(s) ? s.replace("e+", "e") : `${s}.0`;
}

/** One value written inline. */
function inline(v: TomlValue): string {
  if (typeof v === "string") return tomlString(v);
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return tomlFloat(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return `[${v.map(inline).join(", ")}]`;
  const entries = Object.entries(v);
  if (entries.length === 0) return "{}";
  return `{ ${entries.map(([k, x]) => `${tomlKey(k)} = ${inline(x)}`).join(", ")} }`;
}

/** Writes `table` as a TOML document (empty string for an empty table). */
export function writeToml(table: TomlTable): string {
  const sections: string[] = [];
  const walk = (t: TomlTable, path: string[], header: "table" | "array" | null) => {
    const plain: string[] = [];
    const tables: Array<[string, TomlTable]> = [];
    const arrays: Array<[string, TomlTable[]]> = [];
    for (const [k, v] of Object.entries(t)) {
      if (isTable(v)) tables.push([k, v]);
      else if (isTableArray(v)) arrays.push([k, v]);
      else plain.push(`${tomlKey(k)} = ${inline(v)}\n`);
    }
    const name = path.map(tomlKey).join(".");
    if (header === "array") {
      sections.push(`[[${name}]]\n${plain.join("")}`);
    } else if (
      header === "table" && (plain.length > 0 || (tables.length === 0 && !arrays.length))
    ) {
      sections.push(`[${name}]\n${plain.join("")}`);
    } else if (header === null && plain.length > 0) {
      sections.push(plain.join(""));
    }
    for (const [k, sub] of tables) walk(sub, [...path, k], "table");
    for (const [k, items] of arrays) for (const item of items) walk(item, [...path, k], "array");
  };
  walk(table, [], null);
  return sections.join("\n");
}
