/**
 * Environment variables read without ever prompting: a variable the
 * process may not read is treated as unset.
 *
 * @module
 */

/** A variable's value, or undefined when unset or not permitted. */
export function grantedEnv(name: string): string | undefined {
  try {
    return Deno.permissions.querySync({ name: "env", variable: name }).state === "granted"
      ? Deno.env.get(name)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A variable holding a positive integer; undefined when unset, blank or anything else. */
export function positiveIntegerEnv(
  name: string,
  env: (name: string) => string | undefined = grantedEnv,
): number | undefined {
  const raw = env(name);
  const n = raw === undefined || raw.trim() === "" ? NaN : Number(raw);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}
