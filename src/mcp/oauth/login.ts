/**
 * Logging in to an MCP server (the authorization-code flow with PKCE, as
 * Codex's `codex mcp login` runs it) and out again. The server is asked
 * once without credentials, for the scope and metadata its
 * `WWW-Authenticate` names; then the SDK's `auth()` discovers, registers
 * and builds the authorization URL, a person is sent there (a browser, a
 * command, or the URL printed), the callback listener takes the code back
 * (the `state` checked), and the tokens land in Codex's store. Scope, in
 * order: the one asked for, the server's configured `scopes`, the
 * challenge's, the server's `scopes_supported`.
 *
 * @example Log in with a browser command, then use the server
 * ```ts ignore
 * import { loginMcpServer, loadMcpRuntimeConfig, McpCredentialStore } from "jsr:@org/exec-server/mcp";
 *
 * const { servers, oauth } = await loadMcpRuntimeConfig();
 * const server = servers.find((s) => s.name === "docs")!;
 * await loginMcpServer({
 *   server,
 *   settings: oauth,
 *   store: new McpCredentialStore(`${Deno.env.get("HOME")}/.codex`),
 *   openUrl: async (url) => {
 *     await new Deno.Command("xdg-open", { args: [url.href] }).output();
 *   },
 * });
 * ```
 *
 * @module
 */

import type { McpOAuthSettings, McpServerConfig } from "../runtime/config.ts";
import { loadMcpClientSdk } from "../sdk.ts";
import { OAuthCallbackListener } from "./callback.ts";
import { type McpClientRegistration, McpOAuthProvider } from "./provider.ts";
import { DEFAULT_LOGIN_TIMEOUT_MS } from "./session.ts";
import type { McpCredentialStore, StoredMcpCredentials } from "./store.ts";

/** Options of {@linkcode loginMcpServer}. */
export interface McpLoginOptions {
  /** The server (Streamable HTTP). */
  readonly server: McpServerConfig;
  /** The configuration's `mcp_oauth_*` settings. */
  readonly settings?: McpOAuthSettings;
  /** Where the tokens go. */
  readonly store: McpCredentialStore;
  /** Scopes to ask for (win over the configured and advertised ones). */
  readonly scopes?: readonly string[];
  /**
   * Sends a person to the authorization URL (opens a browser, runs a
   * command, prints it). Resolves once sent; the login then waits for the
   * callback.
   */
  readonly openUrl: (url: URL) => Promise<void> | void;
  /**
   * Callback URLs a person pastes (when the browser runs elsewhere and
   * cannot reach the listener): each is checked like a callback.
   */
  readonly pastedCallbacks?: AsyncIterable<string>;
  /** How long the person has (default 5 minutes). */
  readonly timeoutMs?: number;
  /** Registration strategy (default `auto`). */
  readonly registration?: McpClientRegistration;
  /** `client_name` when registering. Default `exec-server`. */
  readonly clientName?: string;
  /** Cancels the login. */
  readonly signal?: AbortSignal;
  /** The `fetch` for the server and the authorization server. */
  readonly fetch?: typeof fetch;
}

function httpUrl(server: McpServerConfig): string {
  if (server.transport.type !== "streamable_http") {
    throw new Error("OAuth login is only supported for streamable HTTP servers.");
  }
  return server.transport.url;
}

/** Asks the server once without credentials: its challenge's metadata URL and scope. */
async function challenge(
  url: string,
  fetchFn: typeof fetch,
  signal: AbortSignal | undefined,
): Promise<{ resourceMetadataUrl?: URL; scope?: string }> {
  const { auth } = await loadMcpClientSdk();
  let response: Response;
  try {
    response = await fetchFn(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 0,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "exec-server-login", version: "1" },
        },
      }),
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    throw new Error(`MCP server at ${url} could not be reached: ${(error as Error).message}`);
  }
  await response.body?.cancel().catch(() => {});
  if (response.status !== 401 && response.status !== 403) return {};
  const { resourceMetadataUrl, scope } = auth.extractWWWAuthenticateParams(response);
  return {
    ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}),
    ...(scope ? { scope } : {}),
  };
}

/**
 * Logs in to `server`: sends a person through the authorization and stores
 * the tokens. Throws on refusal, on a `state` that never comes back right,
 * and after the timeout.
 */
export async function loginMcpServer(options: McpLoginOptions): Promise<StoredMcpCredentials> {
  const url = httpUrl(options.server);
  if (options.settings?.problem) throw options.settings.problem;
  const fetchFn = options.fetch ?? fetch;
  const { auth } = await loadMcpClientSdk();
  await using listener = OAuthCallbackListener.open({
    serverUrl: url,
    port: options.server.oauth.callbackPort ?? options.settings?.callbackPort ?? null,
    callbackUrl: options.settings?.callbackUrl ?? null,
  });
  let sent: (() => void) | null = null;
  const redirected = new Promise<void>((resolve) => (sent = resolve));
  // A login starts afresh: stored tokens are neither refreshed nor reused.
  const provider = await McpOAuthProvider.open({
    serverName: options.server.name,
    serverUrl: url,
    oauth: options.server.oauth,
    store: options.store,
    fresh: true,
    redirectUrl: listener.redirectUrl,
    authorize: async (authorizationUrl) => {
      const state = authorizationUrl.searchParams.get("state");
      if (state !== null) listener.expect(state);
      await options.openUrl(authorizationUrl);
      sent?.();
    },
    ...(options.registration ? { registration: options.registration } : {}),
    ...(options.clientName ? { clientName: options.clientName } : {}),
  });
  const hints = await challenge(url, fetchFn, options.signal);
  const scope = options.scopes?.join(" ") || options.server.oauth.scopes?.join(" ") ||
    hints.scope;
  const params = {
    serverUrl: url,
    fetchFn,
    ...(scope ? { scope } : {}),
    ...(hints.resourceMetadataUrl ? { resourceMetadataUrl: hints.resourceMetadataUrl } : {}),
  };
  if (await auth.auth(provider, params) !== "REDIRECT") {
    throw new Error(`MCP server \`${options.server.name}\` issued tokens without a login`);
  }
  await redirected;
  const state = provider.pendingState!;
  const pasting = (async () => {
    if (!options.pastedCallbacks) return;
    for await (const line of options.pastedCallbacks) {
      if (line.trim() !== "" && listener.submit(line)) return;
    }
  })().catch(() => {});
  const code = await listener.waitForCode(
    state,
    options.timeoutMs ?? DEFAULT_LOGIN_TIMEOUT_MS,
    options.signal,
  );
  void pasting;
  if (await auth.auth(provider, { ...params, authorizationCode: code }) !== "AUTHORIZED") {
    throw new Error(
      `MCP server \`${options.server.name}\`: the authorization code was not accepted`,
    );
  }
  return provider.stored!;
}

/** Removes the stored credentials of `server`; returns whether there were any. */
export async function logoutMcpServer(
  server: McpServerConfig,
  store: McpCredentialStore,
): Promise<boolean> {
  if (server.transport.type !== "streamable_http") {
    throw new Error("OAuth logout is only supported for streamable_http transports.");
  }
  return await store.remove(server.name, server.transport.url);
}
