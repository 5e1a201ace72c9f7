/**
 * OAuth for one running MCP server: whether it applies (not when a bearer
 * token or an `Authorization` header is configured — Codex's precedence —
 * and, when nobody can be asked to log in, only with stored credentials),
 * the provider the SDK transport drives, the `fetch` around the transport
 * (tokens refreshed before they expire, the header then carrying the new
 * one; a 403 `insufficient_scope` marked so the next authorization asks for
 * the wider scope), and, where a person can be asked, the callback
 * listener that finishes an authorization the transport started.
 *
 * @module
 */

import type { McpOAuthSettings, McpServerConfig } from "../runtime/config.ts";
import { OAuthCallbackListener } from "./callback.ts";
import { type McpClientRegistration, McpOAuthProvider } from "./provider.ts";
import { McpCredentialStore } from "./store.ts";

/** Default time a person has to finish a login in the browser. */
export const DEFAULT_LOGIN_TIMEOUT_MS = 300_000;

/** How a server authenticates, as `status` shows it. */
export type McpAuthState = "bearer" | "oauth" | "oauth (expired, login needed)" | "none";

/** A person to send to an authorization URL. */
export interface McpAuthorizationRequest {
  /** The server. */
  readonly server: string;
  /** Where to send the browser. */
  readonly url: URL;
}

/** OAuth options of the MCP runtime. */
export interface McpOAuthOptions {
  /** Where tokens are kept. Default: the Codex home's store; `null`: no OAuth. */
  readonly store?: McpCredentialStore | null;
  /** The configuration's `mcp_oauth_*` settings. */
  readonly settings?: McpOAuthSettings;
  /**
   * Sends a person to log in when a server needs it (an interactive
   * harness). Without it a server that needs a login fails with "run
   * `exec-server mcp-servers login NAME`".
   */
  readonly authorize?: (request: McpAuthorizationRequest) => Promise<void> | void;
  /** How long a person has to finish in the browser. Default 5 minutes. */
  readonly loginTimeoutMs?: number;
  /** Registration strategy (default `auto`). */
  readonly registration?: McpClientRegistration;
  /** `client_name` when registering. Default `exec-server`. */
  readonly clientName?: string;
}

/** The store of a configuration's settings, or the reason there is none. */
export function credentialStoreFor(
  codexHome: string,
  settings: McpOAuthSettings | undefined,
): McpCredentialStore {
  if (settings?.problem) throw settings.problem;
  if (settings?.credentialsStore === "keyring") {
    throw new Error(
      'mcp_oauth_credentials_store = "keyring" is not supported: this runtime keeps MCP OAuth ' +
        `credentials only in ${codexHome}/.credentials.json (set "file" or "auto")`,
    );
  }
  return new McpCredentialStore(codexHome);
}

/** OAuth of one running server. */
export class McpOAuthSession {
  readonly provider: McpOAuthProvider;
  readonly #listener: OAuthCallbackListener | null;
  readonly #timeoutMs: number;
  readonly #serverUrl: string;

  private constructor(
    provider: McpOAuthProvider,
    listener: OAuthCallbackListener | null,
    timeoutMs: number,
    serverUrl: string,
  ) {
    this.provider = provider;
    this.#listener = listener;
    this.#timeoutMs = timeoutMs;
    this.#serverUrl = serverUrl;
  }

  /**
   * The session of an HTTP server without a configured bearer token, or
   * null when OAuth does not apply (nothing stored and nobody to ask).
   * Throws when the store cannot be read (a file that does not parse).
   */
  static async open(
    config: McpServerConfig,
    store: McpCredentialStore,
    options: McpOAuthOptions,
  ): Promise<McpOAuthSession | null> {
    if (config.transport.type !== "streamable_http") return null;
    const url = config.transport.url;
    const authorize = options.authorize;
    const stored = await store.load(config.name, url);
    const machine = config.oauth.grantType === "client_credentials";
    if (!stored && !authorize && !machine) return null;
    let listener: OAuthCallbackListener | null = null;
    if (authorize && !machine) {
      listener = OAuthCallbackListener.open({
        serverUrl: url,
        port: config.oauth.callbackPort ?? options.settings?.callbackPort ?? null,
        callbackUrl: options.settings?.callbackUrl ?? null,
      });
    }
    try {
      const provider = await McpOAuthProvider.open({
        serverName: config.name,
        serverUrl: url,
        oauth: config.oauth,
        store,
        ...(listener
          ? {
            redirectUrl: listener.redirectUrl,
            authorize: (u: URL) => {
              const state = u.searchParams.get("state");
              if (state !== null) listener!.expect(state);
              return authorize!({ server: config.name, url: u });
            },
          }
          : {}),
        ...(options.registration ? { registration: options.registration } : {}),
        ...(options.clientName ? { clientName: options.clientName } : {}),
      });
      return new McpOAuthSession(
        provider,
        listener,
        options.loginTimeoutMs ?? DEFAULT_LOGIN_TIMEOUT_MS,
        url,
      );
    } catch (error) {
      await listener?.close();
      throw error;
    }
  }

  /** Whether a person can be asked to log in. */
  get interactive(): boolean {
    return this.#listener !== null;
  }

  /** The auth state for `status`. */
  get state(): McpAuthState {
    const tokens = this.provider.tokenState();
    if (tokens === "none") return "none";
    return tokens === "expired" ? "oauth (expired, login needed)" : "oauth";
  }

  /**
   * The `fetch` for the server's transport: before a request to the MCP
   * endpoint, tokens about to expire are refreshed and the request carries
   * the new one; a 403 `insufficient_scope` is marked for the step-up.
   */
  wrapFetch(base: typeof fetch): typeof fetch {
    const endpoint = new URL(this.#serverUrl);
    const isEndpoint = (input: string | URL | Request) => {
      const url = new URL(input instanceof Request ? input.url : input);
      return url.origin === endpoint.origin && url.pathname === endpoint.pathname;
    };
    return async (input: string | URL | Request, init?: RequestInit) => {
      if (!isEndpoint(input)) return await base(input, init);
      await this.provider.ensureFresh(base);
      const headers = new Headers(init?.headers);
      const token = this.provider.tokens()?.access_token;
      if (token !== undefined && headers.get("authorization")?.startsWith("Bearer ")) {
        headers.set("authorization", `Bearer ${token}`);
      }
      const response = await base(input, { ...init, headers });
      if (
        response.status === 403 &&
        /error="?insufficient_scope/.test(response.headers.get("www-authenticate") ?? "")
      ) {
        this.provider.markStepUp();
      }
      return response;
    };
  }

  /**
   * Finishes the authorization the transport sent a person to: waits for
   * the callback with its state, then `finish(code)` (the transport's
   * `finishAuth`). Throws when nothing is under way, on timeout, or when
   * the authorization server refused.
   */
  async completeAuthorization(
    finish: (code: string) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<void> {
    const state = this.provider.pendingState;
    if (!this.#listener || state === undefined) {
      throw new Error(
        `no OAuth authorization of MCP server \`${this.provider.serverName}\` is under way`,
      );
    }
    const code = await this.#listener.waitForCode(state, this.#timeoutMs, signal);
    await finish(code);
  }

  /** Stops the callback listener. */
  async close(): Promise<void> {
    await this.#listener?.close();
  }
}
