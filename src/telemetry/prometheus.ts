/**
 * `--metrics-listen HOST:PORT` (see `address.ts`): the OpenTelemetry
 * Prometheus exporter as a metric reader (not its own HTTP server: `GET
 * /metrics` is answered by a `Deno.serve` listener of ours). Only `GET`/`HEAD
 * /metrics` is answered; anything else is a 404 or 405 with a one-line
 * reason. Used through `provider.ts`.
 *
 * @module
 */

import type { MetricReader } from "@opentelemetry/sdk-metrics";
import type { MetricsAddress } from "./address.ts";

/** The reader to give a provider, and the listener serving it. */
export interface PrometheusReader {
  readonly reader: MetricReader;
  /** Where `/metrics` is served. */
  readonly addr: Deno.NetAddr;
  /** Stops the listener. */
  close(): Promise<void>;
}

/** Listens on `address` and serves what the returned reader collects. */
export async function prometheusReader(address: MetricsAddress): Promise<PrometheusReader> {
  const prometheus = await import("@opentelemetry/exporter-prometheus");
  const exporter = new prometheus.PrometheusExporter({ preventServerStart: true });
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
  return { reader: exporter, addr: server.addr, close: () => server.shutdown() };
}
