/**
 * Where a server pushes its metrics, traces and logs over OTLP/HTTP, as
 * Codex configures it: `[otel] metrics_exporter = { otlp-http = { endpoint
 * = "…/v1/metrics", protocol = "json" | "binary", headers = { … } } }` in
 * its configuration (`trace_exporter` for spans, `exporter` for log
 * events, of the same shape; the variables below with `TRACES`/`LOGS`)
 * (`[otel] environment` names the `env` resource attribute, default
 * `dev`; `[analytics]` does not matter — the reference exports with
 * `enabled = false` too). Beyond the reference, which ignores them, the
 * standard variables turn it on when no configuration does:
 * `OTEL_METRICS_EXPORTER=otlp` with `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`
 * (or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/metrics`),
 * `OTEL_EXPORTER_OTLP[_METRICS]_PROTOCOL` (`http/json`, `http/protobuf`)
 * and `OTEL_EXPORTER_OTLP[_METRICS]_HEADERS`. Either way
 * `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds, default 60 000) sets the
 * period, as for the reference; what is left is pushed at shutdown.
 *
 * Reading the configuration costs a start-up nothing when it does not
 * mention an exporter: the files are looked at as text first, and
 * the TOML layers are parsed only when one does.
 *
 * @module
 */

import { type ConfigLocations, defaultConfigLocations } from "../codex_config/locations.ts";
import { configMentionsExporter, otlpExporterVariableSet } from "./requested.ts";

/** What is pushed: metrics, spans, or log events. */
export type OtlpSignal = "metrics" | "traces" | "logs";

/** An OTLP/HTTP push. */
export interface OtlpExportSettings {
  /** The full URL (`…/v1/metrics`, `…/v1/traces`, `…/v1/logs`). */
  readonly endpoint: string;
  /** The body's encoding. */
  readonly protocol: "json" | "binary";
  /** Extra request headers (credentials of a collector). */
  readonly headers: Readonly<Record<string, string>>;
  /** The `env` resource attribute. */
  readonly environment: string;
}

/** An OTLP/HTTP metrics push. */
export interface OtlpMetricsSettings extends OtlpExportSettings {
  /** Export period in milliseconds. */
  readonly intervalMs: number;
}

/** Every push a configuration asks for. */
export interface OtlpSettings {
  /** Metrics (`[otel] metrics_exporter`). */
  readonly metrics: OtlpMetricsSettings | null;
  /** Spans (`[otel] trace_exporter`). */
  readonly traces: OtlpExportSettings | null;
  /** Log events (`[otel] exporter`). */
  readonly logs: OtlpExportSettings | null;
}

/** Each signal's configuration key. */
const CONFIG_KEYS: Record<OtlpSignal, string> = {
  metrics: "metrics_exporter",
  traces: "trace_exporter",
  logs: "exporter",
};

/** A configuration (or variable) that names an exporter wrongly. */
export class OtlpSettingsError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "OtlpSettingsError";
  }
}

type Env = (name: string) => string | undefined;

/** `OTEL_METRIC_EXPORT_INTERVAL`, strictly. */
function interval(env: Env): number {
  const raw = env("OTEL_METRIC_EXPORT_INTERVAL");
  if (raw === undefined || raw === "") return 60_000;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    throw new OtlpSettingsError(
      `OTEL_METRIC_EXPORT_INTERVAL must be a positive number of milliseconds, not '${raw}'`,
    );
  }
  return Number(raw);
}

function checkedEndpoint(value: unknown, where: string): string {
  if (typeof value !== "string") throw new OtlpSettingsError(`${where}: endpoint must be a string`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new OtlpSettingsError(`${where}: endpoint '${value}' is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new OtlpSettingsError(`${where}: endpoint must be http or https, not ${url.protocol}`);
  }
  return url.href;
}

/** `k=v,k2=v2` (values percent-decoded), as the OpenTelemetry specification defines it. */
export function parseOtlpHeaders(raw: string, where: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of raw.split(",")) {
    if (part.trim() === "") continue;
    const eq = part.indexOf("=");
    const key = eq > 0 ? part.slice(0, eq).trim() : "";
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) {
      throw new OtlpSettingsError(`${where}: '${part.trim()}' is not key=value`);
    }
    try {
      out[key.toLowerCase()] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new OtlpSettingsError(
        `${where}: the value of '${key}' is not percent-encoded correctly`,
      );
    }
  }
  return out;
}

/**
 * The metrics push of a merged Codex configuration's `[otel]` table, else
 * of the standard variables; null when neither turns metrics on.
 */
export function otlpMetricsSettings(
  config: Readonly<Record<string, unknown>>,
  env: Env = (name) => Deno.env.get(name),
): OtlpMetricsSettings | null {
  const settings = otlpExportSettings(config, "metrics", env);
  return settings && { ...settings, intervalMs: interval(env) };
}

/**
 * One signal's push from a merged Codex configuration's `[otel]` table,
 * else from the standard variables; null when neither turns it on.
 */
export function otlpExportSettings(
  config: Readonly<Record<string, unknown>>,
  signal: OtlpSignal,
  env: Env = (name) => Deno.env.get(name),
): OtlpExportSettings | null {
  const upper = signal.toUpperCase() as "METRICS" | "TRACES" | "LOGS";
  const otel = config.otel;
  const table = typeof otel === "object" && otel !== null && !Array.isArray(otel)
    ? otel as Record<string, unknown>
    : {};
  const environment = typeof table.environment === "string" ? table.environment : "dev";
  const exporter = table[CONFIG_KEYS[signal]];
  if (exporter !== undefined && exporter !== "none") {
    const where = `[otel] ${CONFIG_KEYS[signal]}`;
    const http = typeof exporter === "object" && exporter !== null
      ? (exporter as Record<string, unknown>)["otlp-http"]
      : undefined;
    if (typeof http !== "object" || http === null) {
      throw new OtlpSettingsError(
        `${where}: only { otlp-http = { endpoint = "…/v1/${signal}", protocol = "json" | "binary" } } is supported here`,
      );
    }
    const h = http as Record<string, unknown>;
    const protocol = h.protocol ?? "binary";
    if (protocol !== "json" && protocol !== "binary") {
      throw new OtlpSettingsError(
        `${where}: protocol must be "json" or "binary", not ${JSON.stringify(protocol)}`,
      );
    }
    const headers: Record<string, string> = {};
    if (h.headers !== undefined) {
      if (typeof h.headers !== "object" || h.headers === null || Array.isArray(h.headers)) {
        throw new OtlpSettingsError(`${where}: headers must be a table of strings`);
      }
      for (const [k, v] of Object.entries(h.headers)) {
        if (typeof v !== "string") {
          throw new OtlpSettingsError(`${where}: header ${k} must be a string`);
        }
        headers[k.toLowerCase()] = v;
      }
    }
    return { endpoint: checkedEndpoint(h.endpoint, where), protocol, headers, environment };
  }
  if (!otlpExporterVariableSet(env, upper)) return null;
  const specific = env(`OTEL_EXPORTER_OTLP_${upper}_ENDPOINT`);
  const base = env("OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!specific && !base) {
    throw new OtlpSettingsError(
      `OTEL_${upper}_EXPORTER=otlp needs OTEL_EXPORTER_OTLP_${upper}_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT`,
    );
  }
  const endpoint = specific
    ? checkedEndpoint(specific, `OTEL_EXPORTER_OTLP_${upper}_ENDPOINT`)
    : checkedEndpoint(`${base!.replace(/\/+$/, "")}/v1/${signal}`, "OTEL_EXPORTER_OTLP_ENDPOINT");
  const protocolVar = env(`OTEL_EXPORTER_OTLP_${upper}_PROTOCOL`) ??
    env("OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf";
  if (protocolVar !== "http/json" && protocolVar !== "http/protobuf") {
    throw new OtlpSettingsError(
      `OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf here, not '${protocolVar}'`,
    );
  }
  return {
    endpoint,
    protocol: protocolVar === "http/json" ? "json" : "binary",
    headers: {
      ...parseOtlpHeaders(env("OTEL_EXPORTER_OTLP_HEADERS") ?? "", "OTEL_EXPORTER_OTLP_HEADERS"),
      ...parseOtlpHeaders(
        env(`OTEL_EXPORTER_OTLP_${upper}_HEADERS`) ?? "",
        `OTEL_EXPORTER_OTLP_${upper}_HEADERS`,
      ),
    },
    environment,
  };
}

/**
 * {@linkcode otlpMetricsSettings} of this machine's Codex configuration
 * (its layers as `environmentConfig/read` finds them, from `cwd`) and
 * environment.
 */
export async function loadOtlpMetricsSettings(
  options: { cwd?: string; locations?: ConfigLocations; env?: Env } = {},
): Promise<OtlpMetricsSettings | null> {
  return (await loadOtlpSettings(options)).metrics;
}

/**
 * Every push this machine's Codex configuration and environment ask for
 * (the configuration's layers are parsed only when a file mentions an
 * exporter).
 */
export async function loadOtlpSettings(
  options: { cwd?: string; locations?: ConfigLocations; env?: Env } = {},
): Promise<OtlpSettings> {
  const locations = options.locations ?? defaultConfigLocations();
  const env = options.env ?? ((name: string) => Deno.env.get(name));
  const config = configMentionsExporter(locations)
    ? await (await import("../codex_config/effective.ts")).loadEffectiveConfig({
      ...options,
      locations,
    })
    : {};
  return {
    metrics: otlpMetricsSettings(config, env),
    traces: otlpExportSettings(config, "traces", env),
    logs: otlpExportSettings(config, "logs", env),
  };
}
