/**
 * `exec-server relay`: one process serving the environment registry and the
 * rendezvous WebSockets on one port (`Deno.listen`, our own HTTP/1.1 and
 * RFC 6455 code so frame limits and backpressure are ours). Several nodes
 * share state through one Deno KV (see `store.ts`).
 *
 * Routes: `POST /cloud/environment/{id}/register|validate|connect` (JSON,
 * bodies ≤ 1 MiB), `GET /ws/{environment|harness}/{id}?…` (signed upgrade;
 * rejections carry `x-codex-rendezvous-rejection-reason`), `GET /readyz`.
 *
 * @module
 */

import type { RegistryRoute, RelayMetrics } from "./metrics.ts";
import { acceptWebSocket, upgradeProblem } from "../../websocket/handshake.ts";
import { type Logger, nullLogger } from "../../log/logger.ts";
import { encodeResponse, HttpHeadError, readHead } from "../../http1/head.ts";
import { connReader } from "../../http1/body.ts";
import { writeAll } from "../../util/conn_io.ts";
import { RELAY_WEBSOCKET_MAX } from "../wire/frame.ts";
import { PayloadPool } from "../../websocket/frame.ts";
import { handleRegistryRequest } from "./registry_api.ts";
import { Rendezvous } from "./rendezvous.ts";
import { RendezvousRejection, verifyRendezvousUrl } from "./signing.ts";
import { type RelayStore, StoreUnavailableError } from "./store.ts";
import { openRelayStore } from "./store_open.ts";
import { acceptConnections } from "../../util/accept_loop.ts";
import { bracketHost } from "../../util/host.ts";

/** Options of {@linkcode startRelayServer}. */
export interface RelayServerOptions {
  /** Interface. Default `127.0.0.1`. */
  readonly hostname?: string;
  /** Port (`0`: any). */
  readonly port: number;
  /**
   * The store: `redis://…` / `rediss://…` (nodes on several machines share
   * it), or a Deno KV path (default: in memory, single node).
   */
  readonly store?: string;
  /** Alias of `store` (a Deno KV path or URL). */
  readonly kv?: string;
  /** Redis password (instead of one in the URL). */
  readonly storePassword?: string;
  /** The URL clients reach this node at (default: `http://<bound address>`). */
  readonly publicUrl?: string;
  /** Diagnostics. */
  readonly logger?: Logger;
  /** Observes forwarded frames (tests); the bytes are valid only during the call. */
  readonly onForward?: (bytes: Uint8Array, direction: "to_executor" | "to_harness") => void;
  /** Where registry requests, upgrades, relayed bytes and store operations are counted. */
  readonly metrics?: RelayMetrics | null;
}

/** A running relay node. */
export interface RelayServer extends AsyncDisposable {
  /** Bound address. */
  readonly addr: Deno.NetAddr;
  /** This node's public base URL (registry base URL for clients). */
  readonly url: string;
  /** The state store (token management). */
  readonly store: RelayStore;
  /** Executors connected to this node. */
  readonly executorCount: number;
  /** Stops serving and closes the store. */
  close(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;

function json(status: number, body: unknown, extra: Record<string, string> = {}): Uint8Array {
  return encodeResponse(
    status,
    { "content-type": "application/json", ...extra },
    JSON.stringify(body),
  );
}

/** A registry path as a metrics label. */
function registryEndpoint(path: string): RegistryRoute {
  if (path === "/readyz") return "readyz";
  const m = /^\/cloud\/environment\/[^/]+\/(register|validate|connect)$/.exec(path);
  return (m?.[1] as RegistryRoute | undefined) ?? "other";
}

/** A rendezvous grant's role as a metrics label. */
function upgradeRole(role: string | null): "executor" | "harness" | "unknown" {
  return role === "environment" ? "executor" : role === "harness" ? "harness" : "unknown";
}

/** Starts a relay node. */
export async function startRelayServer(options: RelayServerOptions): Promise<RelayServer> {
  const logger = options.logger ?? nullLogger;
  const metrics = options.metrics ?? null;
  const opened = await openRelayStore(options.store ?? options.kv, {
    ...(options.storePassword !== undefined ? { password: options.storePassword } : {}),
  });
  const store = metrics ? metrics.measure(opened) : opened;
  logger.info("relay.store", { store: store.description });
  const secret = await store.secret();
  const listener = Deno.listen({ hostname: options.hostname ?? "127.0.0.1", port: options.port });
  const addr = listener.addr as Deno.NetAddr;
  const host = bracketHost(addr.hostname);
  const url = (options.publicUrl ?? `http://${host}:${addr.port}`).replace(/\/+$/, "");
  // Payloads forwarded from one socket to another go back to this pool.
  const payloadPool = new PayloadPool();
  const onForward = options.onForward;
  const rendezvous = new Rendezvous({
    store,
    nodeUrl: url,
    logger,
    payloadPool,
    ...(metrics
      ? {
        onForward: (bytes: Uint8Array, direction: "to_executor" | "to_harness") => {
          metrics.relayed(direction, bytes.length);
          onForward?.(bytes, direction);
        },
      }
      : onForward
      ? { onForward }
      : {}),
  });
  metrics?.track(() => ({ executors: rendezvous.executorCount, streams: rendezvous.harnessCount }));

  async function handle(conn: Deno.Conn): Promise<void> {
    const reader = connReader(conn);
    const send = (bytes: Uint8Array) => writeAll(conn, bytes);
    let upgraded = false;
    let endpoint: RegistryRoute | null = null;
    // A registry request's answer, counted by the error code it carries.
    const answer = (status: number, body: unknown, extra?: Record<string, string>) => {
      if (metrics && endpoint) {
        const code = (body as { error?: { code?: unknown } } | null)?.error?.code;
        metrics.registryRequest(endpoint, status === 200 ? "success" : String(code ?? status));
      }
      return send(json(status, body, extra));
    };
    try {
      const head = await readHead(reader, { maxBytes: 16 * 1024 });
      const [method, target] = head.startLine;
      const path = target.split("?")[0]!;
      if (head.headers.get("upgrade")?.toLowerCase() === "websocket") {
        let grant;
        try {
          grant = await verifyRendezvousUrl(secret, target);
          await rendezvous.check(grant);
        } catch (error) {
          const r = error instanceof RendezvousRejection
            ? error
            : error instanceof StoreUnavailableError
            ? new RendezvousRejection(503, "store_unavailable")
            : new RendezvousRejection(400, "malformed_query");
          metrics?.upgrade(upgradeRole(grant?.role ?? null), r.reason);
          await send(
            encodeResponse(r.status, { "x-codex-rendezvous-rejection-reason": r.reason }, ""),
          );
          return;
        }
        const problem = upgradeProblem(head);
        if (problem) {
          metrics?.upgrade(upgradeRole(grant.role), "bad_upgrade");
          await send(encodeResponse(problem.status, {}, problem.body));
          return;
        }
        metrics?.upgrade(upgradeRole(grant.role), "accepted");
        const channel = await acceptWebSocket(conn, head, {
          maxFrameBytes: RELAY_WEBSOCKET_MAX,
          maxMessageBytes: RELAY_WEBSOCKET_MAX,
          pingIntervalMs: 30_000,
          pongTimeoutMs: 60_000,
          payloadPool,
        }, true);
        upgraded = true;
        if (grant.role === "environment") await rendezvous.attachExecutor(channel, grant);
        else await rendezvous.attachHarness(channel, grant);
        return;
      }
      endpoint = registryEndpoint(path);
      if (method === "GET" && path === "/readyz") {
        // Ready when the store answers: a node without it can route nothing new.
        const health = await store.health();
        metrics?.registryRequest(endpoint, health.ok ? "success" : "store_unavailable");
        await send(
          encodeResponse(
            health.ok ? 200 : 503,
            { "content-type": "text/plain" },
            health.ok ? `ok\nstore: ${health.detail}\n` : `store unavailable: ${health.detail}\n`,
          ),
        );
        return;
      }
      const length = Number(head.headers.get("content-length") ?? "0");
      if (!Number.isInteger(length) || length < 0 || length > MAX_BODY) {
        await answer(413, { error: { code: "body_too_large", message: "request body too large" } });
        return;
      }
      let body = head.leftover;
      while (body.length < length) {
        const { value, done } = await reader.read();
        if (done) throw new HttpHeadError(400, "connection closed inside the body");
        const joined = new Uint8Array(body.length + value.length);
        joined.set(body);
        joined.set(value, body.length);
        body = joined;
      }
      let parsed: unknown = null;
      if (length > 0) {
        try {
          parsed = JSON.parse(new TextDecoder().decode(body.subarray(0, length)));
        } catch {
          await answer(400, { error: { code: "invalid_json", message: "the body is not JSON" } });
          return;
        }
      }
      const result = await handleRegistryRequest(
        { store, secret, nodeUrl: url },
        method,
        path,
        head.headers,
        parsed,
      );
      if (!result) {
        await answer(404, { error: { code: "not_found", message: "no such endpoint" } });
        return;
      }
      await answer(result.status, result.body);
    } catch (error) {
      if (error instanceof StoreUnavailableError) {
        logger.warn("relay.store_unavailable", { error: error.message });
        await answer(503, {
          error: { code: "store_unavailable", message: "the relay's store is unavailable; retry" },
        }, { "retry-after": "1" }).catch(() => {});
        return;
      }
      const status = error instanceof HttpHeadError ? error.status : 500;
      logger.debug("relay.request_failed", { error: (error as Error).message });
      await send(encodeResponse(status, {}, "")).catch(() => {});
    } finally {
      if (!upgraded) {
        await conn.closeWrite().catch(() => {});
        try {
          conn.close();
        } catch { /* closed */ }
      }
    }
  }

  const loop = acceptConnections(listener, (conn) => handle(conn));
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      rendezvous.close();
      await loop.close();
      store.close();
    })();
    return closing;
  };
  return {
    addr,
    url,
    store,
    get executorCount() {
      return rendezvous.executorCount;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
