/**
 * `--metrics-listen HOST:PORT` (see `address.ts`): a `MeterProvider` from the OpenTelemetry
 * metrics SDK whose reader is the Prometheus exporter (not its own HTTP
 * server: `GET /metrics` is answered by a `Deno.serve` listener of ours),
 * on a listener of its own. The SDK is loaded only here, when asked for.
 * Only `GET`/`HEAD /metrics` is answered; anything else is a 404 or 405
 * with a one-line reason.
 *
 * @module
 */

import type { MeterProvider } from "@opentelemetry/api";
import type { MetricsAddress } from "./address.ts";
import { VERSION } from "../version.ts";

/** A running Prometheus endpoint and the provider it reads. */
export interface PrometheusMetrics extends AsyncDisposable {
  /** The provider to build meters on (`getMeter("codex")` for the server's). */
  readonly meterProvider: MeterProvider;
  /** Where `/metrics` is served. */
  readonly addr: Deno.NetAddr;
  /** Stops the listener and the provider. */
  close(): Promise<void>;
}

/** Options of {@linkcode startPrometheusMetrics}. */
export interface PrometheusOptions {
  /** The resource's `service.name`. Default `codex-exec-server`. */
  readonly serviceName?: string;
}

/**
 * Starts a provider and serves its metrics on `address` in the Prometheus
 * text format.
 *
 * @example
 * ```ts
 * import { startPrometheusMetrics } from "./prometheus.ts";
 * await using m = await startPrometheusMetrics({ hostname: "127.0.0.1", port: 0 });
 * m.meterProvider.getMeter("codex").createCounter("demo_total").add(1);
 * const text = await (await fetch(`http://127.0.0.1:${m.addr.port}/metrics`)).text();
 * console.log(text.includes("demo_total 1"));
 * ```
 */
export async function startPrometheusMetrics(
  address: MetricsAddress,
  options: PrometheusOptions = {},
): Promise<PrometheusMetrics> {
  const [sdk, prometheus, resources] = await Promise.all([
    import("@opentelemetry/sdk-metrics"),
    import("@opentelemetry/exporter-prometheus"),
    import("@opentelemetry/resources"),
  ]);
  const exporter = new prometheus.PrometheusExporter({ preventServerStart: true });
  const provider = new sdk.MeterProvider({
    resource: resources.resourceFromAttributes({
      "service.name": options.serviceName ?? "codex-exec-server",
      "service.version": VERSION,
    }),
    readers: [exporter],
  });
  const serializer = new prometheus.PrometheusSerializer();
  const server = Deno.serve({
    hostname: address.hostname,
    port: address.port,
    onListen() {},
  }, async (req) => {
    const path = new URL(req.url).pathname;
    if (path !== "/metrics") {
      return new Response("not found: metrics are at /metrics\n", { status: 404 });
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return new Response("method not allowed: use GET\n", {
        status: 405,
        headers: { allow: "GET, HEAD" },
      });
    }
    const { resourceMetrics, errors } = await exporter.collect();
    if (errors.length > 0) {
      return new Response(`collection failed: ${String(errors[0])}\n`, { status: 500 });
    }
    return new Response(req.method === "HEAD" ? null : serializer.serialize(resourceMetrics), {
      headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
    });
  });
  let closing: Promise<void> | null = null;
  const close = () =>
    closing ??= (async () => {
      await server.shutdown();
      await provider.shutdown();
    })();
  return {
    meterProvider: provider,
    addr: server.addr,
    close,
    [Symbol.asyncDispose]: close,
  };
}
