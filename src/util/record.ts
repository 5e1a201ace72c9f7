/**
 * Narrowing parsed JSON/TOML/YAML values.
 *
 * @module
 */

/** True for a plain table (an object that is not an array). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * An empty object without a prototype, for tables keyed by untrusted names:
 * `__proto__` becomes an own member like any other key, and `constructor`
 * or `toString` are not found unless set.
 */
export function dictionary<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}
