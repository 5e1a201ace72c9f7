/**
 * The egress proxy as one object: the live policy, the HTTP and SOCKS5
 * listeners (managed: fresh loopback ports reserved before any child
 * starts; unmanaged: the configured, clamped addresses), TLS interception
 * when configured, the environment for child processes, and shutdown.
 *
 * @module
 */

import { type Logger, nullLogger } from "../log/logger.ts";
import { createMitm, type Mitm, type MitmOptions } from "./mitm/interceptor.ts";
import { type NetworkProxyConfig, resolveRuntimeAddresses } from "./config.ts";
import { upstreamProxiesFromEnv } from "./connector.ts";
import { applyProxyEnv, type ManagedNetworkContext } from "./env.ts";
import { handleHttpProxyConnection, type ListenerContext } from "./http_proxy.ts";
import { handleSocks5Connection } from "./socks5.ts";
import { NetworkProxyState, type NetworkProxyStateOptions } from "./state.ts";
import { UpstreamPool } from "./upstream_pool.ts";
import type { ProxyListener } from "./metrics.ts";
import { acceptConnections, type ConnectionLoop } from "../util/accept_loop.ts";

/** Options of {@linkcode NetworkProxy.start}. */
export interface NetworkProxyOptions extends NetworkProxyStateOptions {
  /** Managed (default): ephemeral loopback ports; unmanaged: the configured addresses. */
  readonly managed?: boolean;
  /** Extra trust (PEM) for TLS upstreams. */
  readonly caCerts?: string[];
  /** The HTTP CONNECT proxy every SOCKS5 TCP connection must go through (see `UpstreamProxies.tcp`). */
  readonly tcpUpstream?: URL;
  /**
   * Where the TLS interceptor keeps its CA (and how it behaves) when the
   * configuration turns `mitm` on; required then.
   */
  readonly mitm?: MitmOptions;
}

/** Addresses of a running proxy. */
export interface NetworkProxyAddresses {
  /** HTTP listener (`ip:port`), or `null` when disabled. */
  readonly http: Deno.NetAddr | null;
  /** SOCKS5 listener, or `null` when disabled. */
  readonly socks: Deno.NetAddr | null;
}

/** See the module documentation. */
export class NetworkProxy implements AsyncDisposable {
  /** The live policy. */
  readonly state: NetworkProxyState;
  /** Where it listens. */
  readonly addresses: NetworkProxyAddresses;
  /** The trust bundle children should use (MITM on), else `null`. */
  readonly trustBundlePath: string | null;
  readonly #loops: ConnectionLoop[] = [];
  readonly #logger: Logger;
  readonly #mitmClose: (() => Promise<void>) | null;
  readonly #pool: UpstreamPool | undefined;
  #closing: Promise<void> | null = null;
  readonly #failed = Promise.withResolvers<void>();

  private constructor(
    state: NetworkProxyState,
    listeners: { http: Deno.Listener | null; socks: Deno.Listener | null },
    ctx: ListenerContext,
    trustBundlePath: string | null,
    mitmClose: (() => Promise<void>) | null,
  ) {
    this.state = state;
    this.#logger = ctx.logger;
    this.trustBundlePath = trustBundlePath;
    this.#mitmClose = mitmClose;
    this.#pool = ctx.pool;
    this.addresses = {
      http: (listeners.http?.addr as Deno.NetAddr | undefined) ?? null,
      socks: (listeners.socks?.addr as Deno.NetAddr | undefined) ?? null,
    };
    const onError = (error: unknown, during: "accept" | "handle") =>
      during === "accept"
        ? this.#logger.warn("proxy.accept_failed", { error: (error as Error).message })
        : this.#logger.debug("proxy.connection_error", { error: (error as Error).message });
    this.#failed.promise.catch(() => {});
    const watch = (kind: string, listener: Deno.Listener, loop: ConnectionLoop) => {
      const addr = listener.addr as Deno.NetAddr;
      loop.accepting.then((error) => {
        if (this.#closing) return;
        const reason = new Error(
          `the ${kind} proxy listener on ${addr.hostname}:${addr.port} died${
            error ? `: ${error.message}` : ""
          }`,
          { cause: error },
        );
        this.#logger.error("proxy.listener_died", { listener: kind, error: reason.message });
        this.#failed.reject(reason);
      });
      this.#loops.push(loop);
    };
    const metrics = state.metrics;
    const handler = (listener: ProxyListener, handle: typeof handleHttpProxyConnection) =>
      metrics
        ? async (c: Deno.Conn) => {
          metrics.connectionOpened(listener);
          try {
            await handle(ctx, c);
          } finally {
            metrics.connectionClosed(listener);
          }
        }
        : (c: Deno.Conn) => handle(ctx, c);
    if (listeners.http) {
      watch(
        "HTTP",
        listeners.http,
        acceptConnections(listeners.http, handler("http", handleHttpProxyConnection), onError),
      );
    }
    if (listeners.socks) {
      watch(
        "SOCKS5",
        listeners.socks,
        acceptConnections(listeners.socks, handler("socks5", handleSocks5Connection), onError),
      );
    }
  }

  /**
   * Resolves when the proxy is shut down; rejects, naming the listener and
   * the error, when a listener dies first (accepting keeps failing), so a
   * supervisor can restart it or stop what depends on it.
   */
  wait(): Promise<void> {
    return this.#failed.promise;
  }

  /** Validates `config`, binds the listeners and starts serving. */
  static async start(
    config: NetworkProxyConfig,
    options: NetworkProxyOptions = {},
  ): Promise<NetworkProxy> {
    const logger = options.logger ?? nullLogger;
    const state = new NetworkProxyState(config, options);
    const pool = new UpstreamPool();
    const base = {
      state,
      pool,
      upstreams: {
        ...upstreamProxiesFromEnv(
          options.env,
          (m) => logger.warn("proxy.upstream_ignored", { message: m }),
        ),
        tcp: options.tcpUpstream ?? null,
      },
      logger,
      ...(options.caCerts ? { caCerts: options.caCerts } : {}),
    };
    if (!config.enabled) {
      logger.warn("proxy.disabled", {
        message: "network.enabled is false; skipping proxy listeners",
      });
      return new NetworkProxy(
        state,
        { http: null, socks: null },
        { ...base, mitm: null },
        null,
        null,
      );
    }
    const runtime = resolveRuntimeAddresses(config);
    for (const warning of runtime.warnings) logger.warn("proxy.listener_address", { warning });
    if (config.unix_sockets || config.dangerously_allow_all_unix_sockets) {
      logger.warn("proxy.unix_sockets_unsupported", {
        message: "unix socket permissions are macOS-only; x-unix-socket requests get 501",
      });
    }
    const managed = options.managed ?? true;
    const bind = (addr: { host: string; port: number }) =>
      Deno.listen({ hostname: managed ? "127.0.0.1" : addr.host, port: managed ? 0 : addr.port });
    let mitm: Mitm | null = null;
    if (config.mitm) {
      if (!options.mitm) {
        throw new Error("network.mitm is on but no interceptor options were given");
      }
      mitm = await createMitm(state, base, options.mitm);
    }
    const http = bind(runtime.http);
    let socks: Deno.Listener | null = null;
    try {
      if (config.enable_socks5) socks = bind(runtime.socks);
    } catch (error) {
      http.close();
      throw error;
    }
    if (config.mode === "limited" && socks) {
      logger.info("proxy.socks5_limited", {
        message:
          "SOCKS5 UDP and non-HTTPS SOCKS5 TCP are blocked in limited mode; HTTPS SOCKS5 TCP requires MITM inspection",
      });
    }
    return new NetworkProxy(
      state,
      { http, socks },
      { ...base, mitm },
      mitm?.trustBundlePath ?? null,
      mitm?.close ? () => mitm!.close!() : null,
    );
  }

  /** The environment for a child: proxy variables set (see `applyProxyEnv`). */
  applyToEnv(env: Record<string, string>): Record<string, string> {
    if (!this.addresses.http) return env;
    return applyProxyEnv(env, {
      http: this.addresses.http,
      socks: this.addresses.socks,
      allowLocalBinding: this.state.config.allow_local_binding,
      trustBundlePath: this.trustBundlePath,
    });
  }

  /** The sandbox context: listener ports and the local-binding flag. */
  managedNetworkContext(): ManagedNetworkContext {
    const ports = [this.addresses.http?.port, this.addresses.socks?.port].filter((p): p is number =>
      p !== undefined
    );
    return {
      loopbackPorts: [...new Set(ports)].sort((a, b) => a - b),
      socksPort: this.addresses.socks?.port ?? null,
      allowLocalBinding: this.state.config.allow_local_binding,
    };
  }

  /** Stops listening, closes every connection and waits for them. */
  shutdown(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled(this.#loops.map((l) => l.close()));
      this.#pool?.close();
      await this.#mitmClose?.();
      this.#failed.resolve();
    })();
    return this.#closing;
  }

  /** Same as {@linkcode shutdown}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}
