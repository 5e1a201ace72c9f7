/**
 * The package version (kept equal to `deno.json` by a test).
 *
 * @module
 */

/** Version of this package, reported as `executorVersion`. */
export const VERSION = "0.1.0";
