/**
 * Starting the egress proxy from a configuration file: live reload from
 * that file, TLS interception wired in when the configuration asks for it.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import {
  fileConfigSource,
  loadNetworkProxyConfigFile,
  requiredConfigSource,
} from "./config_file.ts";
import { applyNetworkRequirements, type NetworkRequirements } from "./constraints.ts";
import type { NetworkDecider } from "./decision.ts";
import { defaultMitmHome } from "./mitm/interceptor.ts";
import { NetworkProxy } from "./network_proxy.ts";
import type { ProxyMetrics } from "./metrics.ts";

/** Options of {@linkcode startNetworkProxyFromFile}. */
export interface ProxyFileOptions {
  /** Ephemeral loopback ports (default) or the configured addresses. */
  readonly managed?: boolean;
  /** Directory for `proxy/` CA files (default `$CODEX_HOME` or `~/.codex`). */
  readonly home?: string;
  /** Asked about hosts the allow list does not cover. */
  readonly decider?: NetworkDecider;
  /** Diagnostics and audit events. */
  readonly logger: Logger;
  /** An administrator's requirements: applied to the file (and every reload) and enforced. */
  readonly requirements?: NetworkRequirements;
  /** The mandatory upstream of SOCKS5 TCP (see `NetworkProxyOptions.tcpUpstream`). */
  readonly tcpUpstream?: URL;
  /** Where the proxy's decisions, connections and failures are counted. */
  readonly metrics?: ProxyMetrics | null;
}

/** Loads `path` and starts the proxy it describes (reloading when the file changes). */
export async function startNetworkProxyFromFile(
  path: string,
  options: ProxyFileOptions,
): Promise<NetworkProxy> {
  const base = await loadNetworkProxyConfigFile(path);
  const required = options.requirements
    ? applyNetworkRequirements(base, options.requirements)
    : null;
  const home = options.home ?? defaultMitmHome();
  const source = await fileConfigSource(path);
  return await NetworkProxy.start(required?.config ?? base, {
    managed: options.managed ?? true,
    logger: options.logger,
    ...(options.tcpUpstream ? { tcpUpstream: options.tcpUpstream } : {}),
    source: options.requirements ? requiredConfigSource(source, options.requirements) : source,
    ...(required
      ? {
        constraints: required.constraints,
        managedAllowedDomainsOnly: required.managedAllowedDomainsOnly,
      }
      : {}),
    ...(options.decider ? { decider: options.decider } : {}),
    metrics: options.metrics ?? null,
    mitm: { home },
  });
}
