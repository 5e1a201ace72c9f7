/**
 * Where Codex's configuration layers live (no parsing here: the start-up
 * check for telemetry and the layers' reader both use it).
 *
 * @module
 */

/** Where the layers are looked for (tests point these at a scratch tree). */
export interface ConfigLocations {
  /** Codex home (`$CODEX_HOME`, else `~/.codex`). */
  readonly codexHome: string;
  /** The user's home directory. */
  readonly userHome: string;
  /** The system configuration directory. Default `/etc/codex`. */
  readonly systemDir?: string;
}

/** The locations for this process's environment. */
export function defaultConfigLocations(): ConfigLocations {
  const home = Deno.env.get("HOME") ?? "/";
  const codexHome = Deno.env.get("CODEX_HOME");
  return {
    userHome: home,
    codexHome: codexHome && codexHome.startsWith("/")
      ? codexHome.replace(/\/+$/, "") || "/"
      : `${home.replace(/\/+$/, "")}/.codex`,
  };
}
