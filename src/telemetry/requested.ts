/**
 * Whether this server is asked to push telemetry at all, answered without
 * parsing anything (a start-up that is not asked loads no telemetry or TOML
 * code): a Codex configuration file that mentions an exporter
 * (`metrics_exporter`, `trace_exporter`, `exporter`), or
 * `OTEL_{METRICS,TRACES,LOGS}_EXPORTER` naming `otlp`. `otlp_settings.ts`
 * then reads the settings for real.
 *
 * @module
 */

import { defaultConfigLocations } from "../codex_config/locations.ts";

/** The configuration files looked at (user, system, managed), for `locations`. */
export function configFiles(locations: { codexHome: string; systemDir?: string }): string[] {
  const system = locations.systemDir ?? "/etc/codex";
  return [
    `${locations.codexHome}/config.toml`,
    `${system}/config.toml`,
    `${system}/managed_config.toml`,
  ];
}

/** Whether one of the files mentions `word` (default: any exporter). */
export function configMentionsExporter(
  locations: { codexHome: string; systemDir?: string },
  word = "exporter",
): boolean {
  return configFiles(locations).some((file) => {
    try {
      return Deno.readTextFileSync(file).includes(word);
    } catch {
      return false; // absent or unreadable: the layers' reader reports real problems
    }
  });
}

/** Whether `OTEL_<SIGNAL>_EXPORTER` (a comma-separated list) names `otlp`. */
export function otlpExporterVariableSet(
  env: (name: string) => string | undefined,
  signal: "METRICS" | "TRACES" | "LOGS" = "METRICS",
): boolean {
  return (env(`OTEL_${signal}_EXPORTER`) ?? "").split(",").some((s) => s.trim() === "otlp");
}

/** See the module documentation. */
export function otlpPushRequested(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): boolean {
  if ((["METRICS", "TRACES", "LOGS"] as const).some((s) => otlpExporterVariableSet(env, s))) {
    return true;
  }
  return configMentionsExporter(defaultConfigLocations());
}
