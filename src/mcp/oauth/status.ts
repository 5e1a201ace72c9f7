/**
 * How a configured server authenticates, without starting it — the Auth
 * column of `mcp-servers list` and Codex's `auth_status`: `unsupported`
 * (stdio, or an HTTP server that advertises no OAuth), `bearer_token` (a
 * bearer token variable or an `Authorization` header is configured),
 * `o_auth` (credentials are stored), `not_logged_in` (the server
 * advertises OAuth and nothing is stored), `unknown` (the store or the
 * server could not tell).
 *
 * @module
 */

import type { McpServerConfig } from "../runtime/config.ts";
import { loadMcpClientSdk } from "../sdk.ts";
import type { McpCredentialStore } from "./store.ts";

/** Codex's `auth_status` values. */
export type McpAuthStatus = "unsupported" | "bearer_token" | "o_auth" | "not_logged_in" | "unknown";

/** The words of the Auth column, as `codex mcp list` prints them. */
export const AUTH_STATUS_LABELS: Readonly<Record<McpAuthStatus, string>> = {
  unsupported: "Unsupported",
  bearer_token: "Bearer token",
  o_auth: "OAuth",
  not_logged_in: "Not logged in",
  unknown: "Unknown",
};

/** Options of {@linkcode mcpAuthStatus}. */
export interface McpAuthStatusOptions {
  /** Where tokens are kept. */
  readonly store: McpCredentialStore;
  /** The `fetch` for discovery. */
  readonly fetch?: typeof fetch;
  /** How long discovery may take (default 5 s). */
  readonly timeoutMs?: number;
}

/**
 * Whether the server's configuration carries its own authorization (a
 * bearer token variable or an `Authorization` header): OAuth then does not
 * apply, and a login would not help.
 */
export function configuredBearer(config: McpServerConfig): boolean {
  if (config.transport.type !== "streamable_http") return false;
  const t = config.transport;
  if (t.bearerTokenEnvVar !== null) return true;
  const named = (headers: Readonly<Record<string, string>> | null) =>
    Object.keys(headers ?? {}).some((name) => name.toLowerCase() === "authorization");
  return named(t.httpHeaders) || named(t.envHttpHeaders);
}

/** The server could not be asked (a network error or the timeout), as opposed to "no metadata". */
function unreachable(error: unknown, signal: AbortSignal): boolean {
  return signal.aborted || error instanceof TypeError;
}

/** The auth status of one configured server. */
export async function mcpAuthStatus(
  config: McpServerConfig,
  options: McpAuthStatusOptions,
): Promise<McpAuthStatus> {
  if (config.transport.type !== "streamable_http") return "unsupported";
  if (configuredBearer(config)) return "bearer_token";
  const url = config.transport.url;
  try {
    if (await options.store.load(config.name, url) !== null) return "o_auth";
  } catch {
    return "unknown";
  }
  const { auth } = await loadMcpClientSdk();
  const signal = AbortSignal.timeout(options.timeoutMs ?? 5_000);
  const base = options.fetch ?? fetch;
  const fetchFn: typeof fetch = (input, init) => base(input, { ...init, signal });
  try {
    let authServer: string | URL = new URL("/", url);
    try {
      const resource = await auth.discoverOAuthProtectedResourceMetadata(url, {}, fetchFn);
      if (resource.authorization_servers?.[0]) authServer = resource.authorization_servers[0];
    } catch (error) {
      // No protected resource metadata: the 2025-03-26 fallback below.
      if (unreachable(error, signal)) return "unknown";
    }
    const metadata = await auth.discoverAuthorizationServerMetadata(authServer, { fetchFn });
    return metadata ? "not_logged_in" : "unsupported";
  } catch (error) {
    return unreachable(error, signal) ? "unknown" : "unsupported";
  }
}
