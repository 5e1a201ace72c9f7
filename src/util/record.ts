/**
 * Narrowing parsed JSON/TOML/YAML values.
 *
 * @module
 */

/** True for a plain table (an object that is not an array). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
