/**
 * Starting the egress proxy from a configuration file: live reload from
 * that file, TLS interception wired in when the configuration asks for it.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import { fileConfigSource, loadNetworkProxyConfigFile } from "./config_file.ts";
import type { NetworkDecider } from "./decision.ts";
import { createMitm, defaultMitmHome } from "./mitm/interceptor.ts";
import { NetworkProxy } from "./network_proxy.ts";

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
}

/** Loads `path` and starts the proxy it describes (reloading when the file changes). */
export async function startNetworkProxyFromFile(
  path: string,
  options: ProxyFileOptions,
): Promise<NetworkProxy> {
  const config = await loadNetworkProxyConfigFile(path);
  const home = options.home ?? defaultMitmHome();
  return await NetworkProxy.start(config, {
    managed: options.managed ?? true,
    logger: options.logger,
    source: await fileConfigSource(path),
    ...(options.decider ? { decider: options.decider } : {}),
    mitm: (state, ctx) => createMitm(state, ctx, { home }),
  });
}
