/**
 * The TOML library, loaded at first use (a program that never reads TOML,
 * such as a client, never loads it).
 *
 * @module
 */

type Toml = typeof import("smol-toml");
let toml: Promise<Toml> | null = null;

/** `smol-toml`, loaded once. */
export function loadToml(): Promise<Toml> {
  toml ??= import("smol-toml");
  return toml;
}
