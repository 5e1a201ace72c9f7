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
 * Sets `key` on `target` as an own data property, even when the key is
 * `__proto__` (a plain assignment would replace the prototype instead).
 */
export function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(target, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}
