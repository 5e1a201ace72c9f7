/**
 * `--metrics-listen HOST:PORT` (see `address.ts`): the OpenTelemetry
 * Prometheus exporter as a metric reader (not its own HTTP server: `GET
 * /metrics` is answered by a listener of ours). At most 32 scrapes are
 * served at once, a head must arrive within 10 s, and a body over 64 KiB is
 * refused unread; each scrape is its own connection, so a slow reader
 * holds only its own. Only `GET`/`HEAD
 * /metrics` is answered; anything else is a 404 or 405 with a one-line
 * reason. Used through `provider.ts`.
 *
 * @module
 */

import type { MetricProducer, MetricReader } from "@opentelemetry/sdk-metrics";
import type { MetricsAddress } from "./address.ts";
import { acceptConnections } from "../util/accept_loop.ts";
import { encodeResponse, HttpHeadError, readHead } from "../http1/head.ts";
import { headReader } from "../http1/body.ts";
import { writeAll } from "../util/conn_io.ts";

/** The reader to give a provider, and the listener serving it. */
export interface PrometheusReader {
  readonly reader: MetricReader;
  /** Where `/metrics` is served. */
  readonly addr: Deno.NetAddr;
  /** Stops the listener. */
  close(): Promise<void>;
}

/** At most this many scrapes at once; more are closed unanswered. */
const MAX_OPEN = 32;
/** A request body larger than this is refused (413) without being read. */
const MAX_BODY = 64 * 1024;

/**
 * Listens on `address` and serves what the returned reader collects. The
 * listener is this package's plain HTTP/1.1 (`Deno.listen`, one request
 * per connection): `Deno.serve` costs a server ~20% more CPU per request
 * and per MiB of output while it merely exists.
 */
export async function prometheusReader(
  address: MetricsAddress,
  producers: MetricProducer[] = [],
): Promise<PrometheusReader> {
  const prometheus = await import("@opentelemetry/exporter-prometheus");
  const exporter = new prometheus.PrometheusExporter({
    preventServerStart: true,
    metricProducers: producers,
  });
  const serializer = new prometheus.PrometheusSerializer();
  const listener = Deno.listen({ hostname: address.hostname, port: address.port });
  let open = 0;
  const answer = async (conn: Deno.Conn): Promise<void> => {
    const respond = async (status: number, headers: Record<string, string>, body: string) => {
      await writeAll(conn, encodeResponse(status, headers, body)).catch(() => {});
    };
    const text = { "content-type": "text/plain; charset=utf-8" };
    let head;
    try {
      head = await readHead(headReader(conn), { timeoutMs: 10_000 });
    } catch (error) {
      const status = error instanceof HttpHeadError ? error.status : 400;
      return respond(status, text, `${error instanceof Error ? error.message : "bad request"}\n`);
    }
    const [method, target] = head.startLine;
    // A body is read (and dropped) before answering, so the client sees the answer.
    const length = Number(head.headers.get("content-length") ?? "0");
    if (
      head.headers.has("transfer-encoding") || !Number.isSafeInteger(length) || length > MAX_BODY
    ) {
      return respond(413, text, "a scrape has no body\n");
    }
    let unread = length - head.leftover.length;
    const sink = new Uint8Array(16 * 1024);
    while (unread > 0) {
      const n = await conn.read(sink);
      if (n === null) return;
      unread -= n;
    }
    const path = target.split("?")[0];
    if (path !== "/metrics") return respond(404, text, "not found: metrics are at /metrics\n");
    if (method !== "GET" && method !== "HEAD") {
      return respond(405, { ...text, allow: "GET, HEAD" }, "method not allowed: use GET\n");
    }
    const { resourceMetrics, errors } = await exporter.collect();
    if (errors.length > 0) return respond(500, text, `collection failed: ${String(errors[0])}\n`);
    const body = serializer.serialize(resourceMetrics);
    const type = { "content-type": "text/plain; version=0.0.4; charset=utf-8" };
    if (method === "HEAD") {
      // The head a GET would have (its length too), without the body.
      const full = encodeResponse(200, type, body);
      const bodyBytes = new TextEncoder().encode(body).length;
      await writeAll(conn, full.subarray(0, full.length - bodyBytes)).catch(() => {});
      return;
    }
    await respond(200, type, body);
  };
  const loop = acceptConnections(listener, async (conn) => {
    try {
      if (++open <= MAX_OPEN) await answer(conn);
    } finally {
      open--;
      try {
        conn.close();
      } catch { /* closed */ }
    }
  });
  return { reader: exporter, addr: listener.addr as Deno.NetAddr, close: () => loop.close() };
}
