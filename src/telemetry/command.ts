/**
 * Metrics for one command of the CLI (`serve`, `relay`, `proxy`,
 * `mcp-bridge`): started when `--metrics-listen` or an OTLP push (Codex's
 * `[otel] metrics_exporter`, or `OTEL_METRICS_EXPORTER=otlp`) asks for
 * them, else nothing is loaded. Each command's measurements are a
 * {@linkcode MetricSet} read by the readers asked for.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import type { MetricsAddress } from "./address.ts";
import { metricsUrl } from "./address.ts";
import type { MetricSet } from "./aggregate.ts";
import type { Telemetry } from "./provider.ts";
import { otlpPushRequested } from "./requested.ts";
import type { OtlpSettings } from "./otlp_settings.ts";

/** A command's measurements and the telemetry reading them. */
export interface CommandMetrics<T> {
  /** What the command measures into. */
  readonly metrics: T;
  /** The readers (close it last: the OTLP reader pushes what is left). */
  readonly telemetry: Telemetry;
}

/** The OTLP pushes this machine's configuration asks for; null without any (nothing parsed). */
export async function requestedOtlp(): Promise<OtlpSettings | null> {
  return otlpPushRequested() ? await (await import("./otlp_settings.ts")).loadOtlpSettings() : null;
}

/**
 * Starts metrics when they are asked for (`listen`, or a configured OTLP
 * push — `settings`, read here unless given): `make()` builds the
 * command's measurements, whose `set` the readers collect; null when
 * nothing asks. A bad OTLP setting throws (`OtlpSettingsError`, naming it).
 */
export async function startCommandMetrics<T extends { readonly set: MetricSet }>(
  listen: MetricsAddress | null | undefined,
  make: () => T | Promise<T>,
  options: {
    readonly serviceName?: string;
    readonly logger: Logger;
    readonly settings?: OtlpSettings | null;
  },
): Promise<CommandMetrics<T> | null> {
  const settings = options.settings !== undefined ? options.settings : await requestedOtlp();
  const otlp = settings?.metrics ?? null;
  if (!listen && !otlp) return null;
  const metrics = await make();
  const telemetry = await (await import("./provider.ts")).startTelemetry({
    prometheus: listen ?? null,
    otlp,
    ...(options.serviceName ? { serviceName: options.serviceName } : {}),
    producers: (temporality) => metrics.set.producer(temporality),
  });
  if (telemetry.prometheusAddr) {
    options.logger.info("metrics.listening", { url: metricsUrl(telemetry.prometheusAddr) });
  }
  if (otlp) {
    options.logger.info("metrics.push", { protocol: otlp.protocol, intervalMs: otlp.intervalMs });
  }
  return { metrics, telemetry };
}
