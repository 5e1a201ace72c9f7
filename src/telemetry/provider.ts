/**
 * One OpenTelemetry `MeterProvider` for a server's metrics, with the
 * readers asked for: the Prometheus exporter behind `--metrics-listen`
 * (`GET /metrics`, cumulative, see `prometheus.ts`) and a periodic OTLP/HTTP
 * push (delta temporality, JSON or protobuf, see `otlp_settings.ts`) — the
 * reference's resource: `service.name`, `service.version`, `env`, `os`,
 * `os_version`. The metrics SDK and its exporters are loaded only here,
 * when one is asked for.
 *
 * @module
 */

import type { MeterProvider } from "@opentelemetry/api";
import type { MetricProducer } from "@opentelemetry/sdk-metrics";
import type { MetricsProducer } from "./exec_metrics.ts";

/** The SDK's type for ours (structurally the same; see `MetricsProducer`). */
const sdkProducer = (p: MetricsProducer) => p as unknown as MetricProducer;
import type { MetricsAddress } from "./address.ts";
import type { OtlpMetricsSettings } from "./otlp_settings.ts";
import { VERSION } from "../version.ts";

/** Running telemetry: the provider to build meters on and its endpoints. */
export interface Telemetry extends AsyncDisposable {
  /** The provider (`getMeter("codex")` for the server's metrics). */
  readonly meterProvider: MeterProvider;
  /** Where `/metrics` is served, when it is. */
  readonly prometheusAddr: Deno.NetAddr | null;
  /** Pushes what is left (OTLP), stops the listener and the provider. */
  close(): Promise<void>;
}

/** What to start. */
export interface TelemetryOptions {
  /** Serve `GET /metrics` there. */
  readonly prometheus?: MetricsAddress | null;
  /** Push there. */
  readonly otlp?: OtlpMetricsSettings | null;
  /** The resource's `service.name`. Default `codex-exec-server`. */
  readonly serviceName?: string;
  /**
   * Measurements the readers collect besides the provider's own
   * instruments (the server's `ExecServerMetrics`): one producer
   * per reader, of that reader's temporality.
   */
  readonly producers?: (temporality: "cumulative" | "delta") => MetricsProducer;
}

/**
 * The operating system as the reference's resource names it (`os`: Debian,
 * Ubuntu, Fedora…; `os_version`: `12.0.0` for `VERSION_ID="12"`), from
 * `/etc/os-release`; `Linux`/`Unknown` without one.
 */
export function osResource(
  text: string | null = readOsRelease(),
): { os: string; os_version: string } {
  if (Deno.build.os !== "linux") return { os: Deno.build.os, os_version: "Unknown" };
  const field = (name: string) =>
    text ? new RegExp(`^${name}=(.*)$`, "m").exec(text)?.[1]?.replace(/^"(.*)"$/, "$1") : undefined;
  const names: Record<string, string> = {
    debian: "Debian",
    ubuntu: "Ubuntu",
    fedora: "Fedora",
    alpine: "Alpine Linux",
    arch: "Arch Linux",
    centos: "CentOS",
    rhel: "Red Hat Enterprise Linux",
    amzn: "Amazon Linux",
    opensuse: "openSUSE",
    nixos: "NixOS",
  };
  const id = field("ID");
  const os = (id && names[id]) ?? field("NAME") ?? "Linux";
  const version = field("VERSION_ID");
  let os_version = "Unknown";
  if (version) {
    const parts = version.split(".");
    os_version = parts.every((p) => /^\d+$/.test(p)) && parts.length <= 3
      ? [...parts, "0", "0"].slice(0, 3).join(".")
      : version;
  }
  return { os, os_version };
}

function readOsRelease(): string | null {
  for (const file of ["/etc/os-release", "/usr/lib/os-release"]) {
    try {
      return Deno.readTextFileSync(file);
    } catch { /* next */ }
  }
  return null;
}

/**
 * Starts a provider with the readers `options` asks for.
 *
 * @example
 * ```ts
 * import { startTelemetry } from "./provider.ts";
 * await using t = await startTelemetry({ prometheus: { hostname: "127.0.0.1", port: 0 } });
 * t.meterProvider.getMeter("demo").createCounter("demo_total").add(1);
 * const text = await (await fetch(`http://127.0.0.1:${t.prometheusAddr!.port}/metrics`)).text();
 * console.log(text.includes("demo_total 1"));
 * ```
 */
export async function startTelemetry(options: TelemetryOptions): Promise<Telemetry> {
  const [sdk, resources] = await Promise.all([
    import("@opentelemetry/sdk-metrics"),
    import("@opentelemetry/resources"),
  ]);
  const readers: InstanceType<typeof sdk.MetricReader>[] = [];
  let prometheus: Awaited<ReturnType<typeof import("./prometheus.ts").prometheusReader>> | null =
    null;
  if (options.prometheus) {
    prometheus = await (await import("./prometheus.ts")).prometheusReader(
      options.prometheus,
      options.producers ? [sdkProducer(options.producers("cumulative"))] : [],
    );
    readers.push(prometheus.reader);
  }
  const otlp = options.otlp;
  if (otlp) {
    const http = await import("@opentelemetry/exporter-metrics-otlp-http");
    const exporterOptions = {
      url: otlp.endpoint,
      headers: { ...otlp.headers },
      // Deltas, as the reference pushes them.
      temporalityPreference: http.AggregationTemporalityPreference.DELTA,
    };
    const exporter = otlp.protocol === "json"
      ? new http.OTLPMetricExporter(exporterOptions)
      : new (await import("@opentelemetry/exporter-metrics-otlp-proto")).OTLPMetricExporter(
        exporterOptions,
      );
    readers.push(
      new sdk.PeriodicExportingMetricReader({
        exporter,
        metricProducers: options.producers ? [sdkProducer(options.producers("delta"))] : [],
        exportIntervalMillis: otlp.intervalMs,
        exportTimeoutMillis: Math.min(30_000, otlp.intervalMs),
      }),
    );
  }
  const provider = new sdk.MeterProvider({
    resource: resources.resourceFromAttributes({
      "service.name": options.serviceName ?? "codex-exec-server",
      "service.version": VERSION,
      env: otlp?.environment ?? "dev",
      ...osResource(),
    }),
    readers,
  });
  let closing: Promise<void> | null = null;
  const close = () =>
    closing ??= (async () => {
      await prometheus?.close();
      // Flushes the OTLP reader: the last period's points are pushed.
      await provider.shutdown();
    })();
  return {
    meterProvider: provider,
    prometheusAddr: prometheus?.addr ?? null,
    close,
    [Symbol.asyncDispose]: close,
  };
}
