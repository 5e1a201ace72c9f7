/**
 * How this program starts a helper of its own inside a sandbox (the fs
 * worker, the proxy bridge): the command line, the files the helper must be
 * able to read to start (the Deno runtime, its cache and this program's own
 * files — never the rest of a checkout), and the environment it needs.
 *
 * A compiled binary runs itself with a subcommand; `deno run` runs the
 * helper's entry module with the checkout's `deno.json`, or (published
 * layout) from the cache only.
 *
 * @module
 */

/** The proxy bridge's subcommand in a compiled binary. */
export const PROXY_BRIDGE_COMMAND = "__proxy-bridge";

/** A helper's command line and what it needs. */
export interface SelfCommand {
  /** Program and arguments. */
  readonly argv: string[];
  /** Paths the helper reads to start. */
  readonly runtime: string[];
  /** Variables the helper's runtime reads (`DENO_DIR`), from this process. */
  readonly env: Record<string, string>;
}

/** The Deno cache this process uses. */
function denoDir(): string {
  return Deno.env.get("DENO_DIR") ??
    `${Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache`}/deno`;
}

/** What a helper's runtime needs in its environment (nothing for a compiled binary). */
export function runtimeEnv(): Record<string, string> {
  return Deno.build.standalone ? {} : { DENO_DIR: denoDir(), DENO_NO_UPDATE_CHECK: "1" };
}

/**
 * The command that runs `entry` (a module URL) with `args` under Deno
 * permission `flags`, or — in a compiled binary — `subcommand` and `args`.
 */
export function selfCommand(
  entry: URL,
  subcommand: readonly string[],
  args: readonly string[],
  flags: readonly string[],
): SelfCommand {
  const exe = Deno.execPath();
  if (Deno.build.standalone) {
    return { argv: [exe, ...subcommand, ...args], runtime: [exe], env: {} };
  }
  const runtime = [exe, denoDir()];
  const options = ["run", "--quiet", ...flags, "--no-prompt"];
  if (entry.protocol === "file:") {
    const root = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
    for (const name of ["cli.ts", "mod.ts", "src", "deno.json", "deno.lock", "node_modules"]) {
      try {
        Deno.statSync(`${root}/${name}`);
        runtime.push(`${root}/${name}`);
      } catch { /* not in this layout */ }
    }
    try {
      Deno.statSync(`${root}/deno.json`);
      options.push("--config", `${root}/deno.json`);
    } catch { /* published layout: no config */ }
  } else {
    options.push("--cached-only");
  }
  return {
    argv: [exe, ...options, entry.href, ...args],
    runtime,
    env: runtimeEnv(),
  };
}
