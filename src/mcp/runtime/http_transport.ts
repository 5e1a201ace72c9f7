/**
 * Streamable HTTP to an MCP server through the MCP SDK's client transport:
 * from this machine, or from inside an environment, every request then
 * going out through that environment's `http/request` (so a server only
 * reachable there works). The bearer token is read from the configured
 * variable before anything connects — unset or empty fails with Codex's
 * wording. Static and variable-sourced headers are added; an invalid header
 * name or value is logged and skipped, as Codex does.
 *
 * @module
 */

import type { ExecServerClient } from "../../client/client.ts";
import type { Logger } from "../../log/logger.ts";
import type { McpOAuthSession } from "../oauth/session.ts";
import { loadMcpClientSdk, type Transport } from "../sdk.ts";
import type { McpServerConfig } from "./config.ts";

/** The bearer token of an HTTP server, or null when none is configured. */
export function bearerToken(
  server: string,
  variable: string | null,
  hostEnv: Readonly<Record<string, string>>,
): string | null {
  if (variable === null) return null;
  const value = Object.hasOwn(hostEnv, variable) ? hostEnv[variable] : undefined;
  if (value === undefined) {
    throw new Error(`Environment variable ${variable} for MCP server '${server}' is not set`);
  }
  if (value === "") {
    throw new Error(`Environment variable ${variable} for MCP server '${server}' is empty`);
  }
  return value;
}

function addHeader(headers: Headers, name: string, value: string, logger: Logger): void {
  try {
    headers.set(name, value);
  } catch (error) {
    logger.warn("mcp.invalid_http_header", { name, error: (error as Error).message });
  }
}

/** The headers every request of `config` carries. */
export function httpHeaders(
  config: McpServerConfig,
  hostEnv: Readonly<Record<string, string>>,
  logger: Logger,
): Headers {
  if (config.transport.type !== "streamable_http") throw new Error("not an HTTP server");
  const t = config.transport;
  const headers = new Headers();
  for (const [name, value] of Object.entries(t.httpHeaders ?? {})) {
    addHeader(headers, name, value, logger);
  }
  for (const [name, variable] of Object.entries(t.envHttpHeaders ?? {})) {
    const value = Object.hasOwn(hostEnv, variable) ? hostEnv[variable] : undefined;
    if (value !== undefined && value.trim() !== "") addHeader(headers, name, value, logger);
  }
  const token = bearerToken(config.name, t.bearerTokenEnvVar, hostEnv);
  if (token !== null) addHeader(headers, "Authorization", `Bearer ${token}`, logger);
  return headers;
}

/** Options of {@linkcode httpMcpTransport}. */
export interface HttpMcpTransportOptions {
  /** Send the requests from inside this environment. */
  readonly environment?: ExecServerClient;
  /** Where variables are read. */
  readonly hostEnv: Readonly<Record<string, string>>;
  /** Diagnostics. */
  readonly logger: Logger;
  /** OAuth for this server (its provider drives the transport's authorization). */
  readonly oauth?: McpOAuthSession | null;
}

/**
 * Whether the configured headers authenticate already (a bearer token or
 * an `Authorization` header): then OAuth does not apply, as in Codex.
 */
export function hasConfiguredAuthorization(
  config: McpServerConfig,
  hostEnv: Readonly<Record<string, string>>,
  logger: Logger,
): boolean {
  return httpHeaders(config, hostEnv, logger).has("authorization");
}

/** A Streamable HTTP client transport for `config`. */
export async function httpMcpTransport(
  config: McpServerConfig,
  options: HttpMcpTransportOptions,
): Promise<Transport> {
  if (config.transport.type !== "streamable_http") throw new Error("not an HTTP server");
  const headers = httpHeaders(config, options.hostEnv, options.logger);
  let url: URL;
  try {
    url = new URL(config.transport.url);
  } catch {
    throw new Error(`invalid URL for MCP server \`${config.name}\`: ${config.transport.url}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`MCP server \`${config.name}\` needs an http or https URL, got ${url.href}`);
  }
  const { http } = await loadMcpClientSdk();
  const environment = options.environment;
  const base: typeof fetch | undefined = environment
    ? (input: string | URL | Request, init?: RequestInit) => environment.fetch(input, init)
    : undefined;
  const oauth = options.oauth ?? null;
  const fetchFn = oauth ? oauth.wrapFetch(base ?? fetch) : base;
  return new http.StreamableHTTPClientTransport(url, {
    requestInit: { headers },
    ...(fetchFn ? { fetch: fetchFn } : {}),
    ...(oauth ? { authProvider: oauth.provider } : {}),
  }) as Transport;
}
