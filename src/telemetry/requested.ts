/**
 * Whether this server is asked to push metrics at all, answered without
 * parsing anything (a start-up that is not asked loads no telemetry or TOML
 * code): a Codex configuration file that mentions `metrics_exporter`, or
 * `OTEL_METRICS_EXPORTER` naming `otlp`. `otlp_settings.ts` then reads the
 * settings for real.
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

/** Whether one of the files mentions `metrics_exporter`. */
export function configMentionsMetricsExporter(
  locations: { codexHome: string; systemDir?: string },
): boolean {
  return configFiles(locations).some((file) => {
    try {
      return Deno.readTextFileSync(file).includes("metrics_exporter");
    } catch {
      return false; // absent or unreadable: the layers' reader reports real problems
    }
  });
}

/** Whether `OTEL_METRICS_EXPORTER` (a comma-separated list) names `otlp`. */
export function otlpExporterVariableSet(env: (name: string) => string | undefined): boolean {
  return (env("OTEL_METRICS_EXPORTER") ?? "").split(",").some((s) => s.trim() === "otlp");
}

/** See the module documentation. */
export function metricsPushRequested(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): boolean {
  if (otlpExporterVariableSet(env)) return true;
  return configMentionsMetricsExporter(defaultConfigLocations());
}
