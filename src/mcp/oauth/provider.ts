/**
 * The MCP SDK's OAuth client, fed from the credential store: an
 * `OAuthClientProvider` for one server that the SDK's `auth()` and its
 * Streamable HTTP transport drive — discovery (RFC 9728, RFC 8414, OpenID
 * configuration and the 2025-03-26 fallbacks), registration (pre-registered,
 * client ID metadata document, or dynamic), PKCE, resource indicators,
 * token endpoint authentication and refresh are the SDK's; what is this
 * runtime's is where tokens live (Codex's store), when a person is asked
 * (only when the caller says one can be: otherwise a login that is needed
 * fails with "run `exec-server mcp-servers login NAME`", and nothing is
 * registered with the server behind the user's back), refreshing before
 * expiry under Codex's refresh lock, and the scope asked for: a step-up
 * (403 `insufficient_scope`) is never answered with a refresh of the
 * narrower grant, and `offline_access` is asked for where the
 * authorization server offers it. A machine client (`oauth.grant_type =
 * "client_credentials"`) gets its tokens with its secret or a signed JWT
 * (`private_key_jwt`), with no person and no redirect.
 *
 * @module
 */

import type {
  AddClientAuthentication,
  OAuthClientProvider,
  OAuthDiscoveryState,
} from "@modelcontextprotocol/sdk/client/auth";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth";
import { loadMcpAuthExtensions, loadMcpClientSdk } from "../sdk.ts";
import type { McpServerOAuthConfig } from "../runtime/config.ts";
import type { McpCredentialStore, StoredMcpCredentials } from "./store.ts";

/** A token this close to expiry is refreshed before it is used. */
export const REFRESH_MARGIN_MS = 60_000;

/** The command that logs in to a server. */
export function loginCommand(server: string, scopes?: readonly string[]): string {
  return `exec-server mcp-servers login ${server}${
    scopes && scopes.length > 0 ? ` --scopes ${scopes.join(",")}` : ""
  }`;
}

/** A login is needed and nobody can be asked now. */
export class McpLoginRequiredError extends Error {
  /** The server. */
  readonly server: string;
  /** Why (`the stored token expired and could not be refreshed`, …). */
  constructor(server: string, why: string, scopes?: readonly string[]) {
    super(`${why}; run \`${loginCommand(server, scopes)}\``);
    this.name = "McpLoginRequiredError";
    this.server = server;
  }
}

/** How a client is registered with an authorization server. */
export type McpClientRegistration = "auto" | "cimd" | "dcr";

/** Options of {@linkcode McpOAuthProvider.open}. */
export interface McpOAuthProviderOptions {
  /** The server's configured name. */
  readonly serverName: string;
  /** The server's URL. */
  readonly serverUrl: string;
  /** Its OAuth settings. */
  readonly oauth: McpServerOAuthConfig;
  /** Where tokens are kept. */
  readonly store: McpCredentialStore;
  /** The redirect URI (a login's callback listener). Without it the provider cannot log in. */
  readonly redirectUrl?: string;
  /**
   * Sends a person to the authorization URL. Without it a login that is
   * needed throws {@linkcode McpLoginRequiredError}.
   */
  readonly authorize?: (url: URL) => Promise<void> | void;
  /** Registration strategy (default `auto`: a metadata document where offered, else dynamic). */
  readonly registration?: McpClientRegistration;
  /** `client_name` when registering. Default `exec-server`. */
  readonly clientName?: string;
  /** A login: stored credentials are neither loaded nor taken up (they are replaced). */
  readonly fresh?: boolean;
}

/** What a provider's tokens are worth now. */
export type McpOAuthTokenState = "valid" | "refreshable" | "expired" | "none";

/** A redirect URI for a provider that never sends anyone to one (refreshes do not use it). */
const NO_REDIRECT = "http://127.0.0.1/callback";

function randomState(): string {
  return crypto.getRandomValues(new Uint8Array(16)).toBase64({
    alphabet: "base64url",
    omitPadding: true,
  });
}

/** The SDK's `OAuthClientProvider` for one server, backed by the credential store. */
export class McpOAuthProvider implements OAuthClientProvider {
  readonly #options: McpOAuthProviderOptions;
  #stored: StoredMcpCredentials | null;
  /** Client information registered (or found) this session. */
  #client: OAuthClientInformationMixed | undefined;
  #discovery: OAuthDiscoveryState | undefined;
  #verifier: string | undefined;
  #state: string | undefined;
  /** The scope of the authorization under way (what `saveTokens` records when the server omits it). */
  #requestedScope: string | undefined;
  /** The server asked for a wider scope: its refresh token must not stand in for a new grant. */
  #stepUp = false;
  /** Tokens the server refused (and that could not be refreshed). */
  #refused = false;
  #refreshing: Promise<void> | null = null;
  /** Set only with `oauth_resource`: the SDK then sends it instead of the metadata's resource. */
  validateResourceURL?: (serverUrl: string | URL, resource?: string) => Promise<URL | undefined>;
  /** Set only for `private_key_jwt`: signs the client's assertion. */
  addClientAuthentication?: AddClientAuthentication;

  private constructor(
    options: McpOAuthProviderOptions,
    stored: StoredMcpCredentials | null,
    addClientAuthentication: AddClientAuthentication | undefined,
  ) {
    this.#options = options;
    this.#stored = stored;
    if (addClientAuthentication) this.addClientAuthentication = addClientAuthentication;
    const { clientId, clientSecret, resource } = options.oauth;
    if (clientId !== null) {
      this.#client = {
        client_id: clientId,
        ...(clientSecret !== null ? { client_secret: clientSecret } : {}),
      };
    } else if (stored) {
      this.#client = {
        client_id: stored.client_id,
        ...(stored.client_secret !== undefined ? { client_secret: stored.client_secret } : {}),
        ...(stored.issuer !== undefined ? { issuer: stored.issuer } : {}),
      };
    }
    if (resource !== null) {
      let url: URL;
      try {
        url = new URL(resource);
      } catch {
        throw new Error(
          `oauth_resource of MCP server \`${options.serverName}\` is not a URL: ${resource}`,
        );
      }
      this.validateResourceURL = () => Promise.resolve(url);
    }
  }

  /** A provider with the server's stored credentials loaded (throws on a store that does not parse). */
  static async open(options: McpOAuthProviderOptions): Promise<McpOAuthProvider> {
    const stored = options.fresh
      ? null
      : await options.store.load(options.serverName, options.serverUrl);
    return new McpOAuthProvider(options, stored, await privateKeyJwt(options));
  }

  /** A machine client: tokens come from the client-credentials grant. */
  get #machine(): boolean {
    return this.#options.oauth.grantType === "client_credentials";
  }

  /** The server's name. */
  get serverName(): string {
    return this.#options.serverName;
  }

  /** The stored credentials (null before a login). */
  get stored(): StoredMcpCredentials | null {
    return this.#stored;
  }

  /** Whether a person can be sent to log in. */
  get interactive(): boolean {
    return !this.#machine && this.#options.authorize !== undefined &&
      this.#options.redirectUrl !== undefined;
  }

  /** What the tokens are worth now. */
  tokenState(now = Date.now()): McpOAuthTokenState {
    const s = this.#stored;
    if (!s) return "none";
    if (this.#refused) return "expired";
    if (s.expires_at === undefined || s.expires_at > now) return "valid";
    return s.refresh_token !== undefined ? "refreshable" : "expired";
  }

  // ----- OAuthClientProvider -------------------------------------------------

  /** The redirect URI (none for a machine client: the SDK then asks for tokens directly). */
  get redirectUrl(): string | undefined {
    return this.#machine ? undefined : this.#options.redirectUrl ?? NO_REDIRECT;
  }

  /** The client-credentials grant's parameters (a machine client); else the SDK's default. */
  prepareTokenRequest(scope?: string): URLSearchParams | undefined {
    if (!this.#machine) return undefined;
    const params = new URLSearchParams({ grant_type: "client_credentials" });
    const wanted = this.#options.oauth.scopes?.join(" ") || scope;
    if (wanted) params.set("scope", wanted);
    return params;
  }

  /** A client metadata document's URL, offered where the server takes one. */
  get clientMetadataUrl(): string | undefined {
    if (this.#options.registration === "dcr") return undefined;
    return this.#options.oauth.clientMetadataUrl ?? undefined;
  }

  /** What is registered: a public native client unless the server takes only secrets. */
  get clientMetadata(): OAuthClientMetadata {
    const methods = this.#discovery?.authorizationServerMetadata
      ?.token_endpoint_auth_methods_supported;
    const method = methods === undefined || methods.includes("none")
      ? "none"
      : methods.includes("client_secret_basic")
      ? "client_secret_basic"
      : methods.includes("client_secret_post")
      ? "client_secret_post"
      : "none";
    return {
      client_name: this.#options.clientName ?? "exec-server",
      redirect_uris: this.#machine ? [] : [this.redirectUrl ?? NO_REDIRECT],
      grant_types: this.#machine ? ["client_credentials"] : ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: method,
      ...(this.#requestedScope ? { scope: this.#requestedScope } : {}),
    };
  }

  /** A fresh `state` for each authorization (checked by the callback listener). */
  state(): string {
    this.#state = randomState();
    return this.#state;
  }

  /** The `state` of the authorization under way. */
  get pendingState(): string | undefined {
    return this.#state;
  }

  /** The client's registration, pre-registered, stored or made this session. */
  clientInformation(): OAuthClientInformationMixed | undefined {
    if (this.#client === undefined && !this.interactive) {
      // Registering now would leave a client behind at the server for a
      // login nobody can finish.
      throw new McpLoginRequiredError(this.serverName, this.#notLoggedIn());
    }
    if (this.#options.registration === "cimd" && this.#client === undefined) {
      const supported = this.#discovery?.authorizationServerMetadata
        ?.client_id_metadata_document_supported === true;
      if (!supported || !this.clientMetadataUrl) {
        throw new Error(
          supported
            ? `client registration \`cimd\` for MCP server \`${this.serverName}\` needs oauth.client_metadata_url`
            : `the authorization server of MCP server \`${this.serverName}\` does not support client ID metadata documents`,
        );
      }
    }
    return this.#client;
  }

  /** Keeps a registration (stored with the tokens). */
  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.#client = info;
  }

  /** The tokens, as the SDK reads them (no refresh token while a wider scope is wanted). */
  tokens(): OAuthTokens | undefined {
    const s = this.#stored;
    if (!s || this.#refused) return undefined;
    const tokens: OAuthTokens = {
      access_token: s.access_token,
      token_type: "Bearer",
      ...(s.scopes.length > 0 ? { scope: s.scopes.join(" ") } : {}),
      ...(s.issuer !== undefined ? { issuer: s.issuer } : {}),
    };
    if (s.expires_at !== undefined) {
      tokens.expires_in = Math.max(0, Math.floor((s.expires_at - Date.now()) / 1000));
    }
    if (s.refresh_token !== undefined && !this.#stepUp) tokens.refresh_token = s.refresh_token;
    return tokens;
  }

  /** Stores new tokens (atomically, under the store's lock). */
  async saveTokens(tokens: OAuthTokens): Promise<void> {
    const client = this.#client;
    if (!client) throw new Error("OAuth tokens arrived without a client registration");
    const scope = tokens.scope ?? this.#requestedScope ?? this.#stored?.scopes.join(" ") ?? "";
    const preRegistered = this.#options.oauth.clientId !== null;
    const credentials: StoredMcpCredentials = {
      server_name: this.serverName,
      server_url: this.#options.serverUrl,
      ...(tokens.issuer !== undefined ? { issuer: tokens.issuer } : {}),
      client_id: client.client_id,
      ...(!preRegistered && client.client_secret !== undefined
        ? { client_secret: client.client_secret }
        : {}),
      access_token: tokens.access_token,
      ...(tokens.expires_in !== undefined
        ? { expires_at: Date.now() + tokens.expires_in * 1000 }
        : {}),
      ...(tokens.refresh_token !== undefined ? { refresh_token: tokens.refresh_token } : {}),
      scopes: scope.split(" ").filter((s) => s !== ""),
    };
    await this.#options.store.save(credentials);
    this.#stored = credentials;
    this.#refused = false;
    this.#stepUp = false;
  }

  /** Sends the person to the authorization URL, or says a login is needed. */
  async redirectToAuthorization(url: URL): Promise<void> {
    const authorize = this.#options.authorize;
    if (!authorize || this.#options.redirectUrl === undefined) {
      const scope = url.searchParams.get("scope");
      throw new McpLoginRequiredError(
        this.serverName,
        this.#stored
          ? this.#stepUp
            ? `MCP server \`${this.serverName}\` asks for a wider OAuth scope (${scope})`
            : `the OAuth login of MCP server \`${this.serverName}\` expired and could not be refreshed`
          : this.#notLoggedIn(),
        this.#stepUp && scope ? scope.split(" ") : undefined,
      );
    }
    this.#requestedScope = this.#widenScope(url);
    await authorize(url);
  }

  /**
   * Adds `offline_access` (and OpenID's `prompt=consent`) where the
   * authorization server offers it, so the login comes with a refresh
   * token; returns the scope asked for.
   */
  #widenScope(url: URL): string | undefined {
    const metadata = this.#discovery?.authorizationServerMetadata;
    const scopes = (url.searchParams.get("scope") ?? "").split(" ").filter((s) => s !== "");
    if (
      metadata?.scopes_supported?.includes("offline_access") && !scopes.includes("offline_access")
    ) {
      scopes.push("offline_access");
      url.searchParams.set("scope", scopes.join(" "));
      if (!url.searchParams.has("prompt")) url.searchParams.set("prompt", "consent");
    }
    return scopes.length > 0 ? scopes.join(" ") : undefined;
  }

  #notLoggedIn(): string {
    return `MCP server \`${this.serverName}\` needs an OAuth login`;
  }

  /** Keeps the PKCE verifier. */
  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }

  /** The PKCE verifier of the authorization under way. */
  codeVerifier(): string {
    if (this.#verifier === undefined) throw new Error("no OAuth authorization is under way");
    return this.#verifier;
  }

  /** Keeps discovery results for the next `auth()`. */
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.#discovery = state;
  }

  /** Discovery results of this session. */
  discoveryState(): OAuthDiscoveryState | undefined {
    return this.#discovery;
  }

  /**
   * The server said credentials are no longer good. Only this session's
   * view changes: the store keeps them (for `status`, and for `logout`).
   * Tokens another process stored meanwhile (its refresh) are taken up
   * instead of being dropped.
   */
  async invalidateCredentials(
    scope: "all" | "client" | "tokens" | "verifier" | "discovery",
  ): Promise<void> {
    if (scope === "verifier" || scope === "all") this.#verifier = undefined;
    if (scope === "discovery" || scope === "all") this.#discovery = undefined;
    if (
      (scope === "client" || scope === "all") && this.#options.oauth.clientId === null &&
      this.interactive
    ) {
      this.#client = undefined;
    }
    if ((scope === "tokens" || scope === "all") && this.#options.fresh) this.#stored = null;
    else if (scope === "tokens" || scope === "all") {
      const before = this.#stored?.access_token;
      const now = await this.#options.store.load(this.serverName, this.#options.serverUrl)
        .catch(() => null);
      if (now && now.access_token !== before) this.#stored = now;
      else this.#refused = this.#stored !== null;
    }
  }

  // ----- Beyond the SDK's interface -------------------------------------------

  /** The server answered 403 `insufficient_scope`: the next `auth()` asks anew. */
  markStepUp(): void {
    this.#stepUp = true;
  }

  /**
   * Refreshes the tokens when they expire within {@linkcode REFRESH_MARGIN_MS}
   * (one refresh at a time; under Codex's refresh lock, taking up a
   * refresh another process made meanwhile). Throws
   * {@linkcode McpLoginRequiredError} when the refresh is refused.
   */
  ensureFresh(fetchFn: typeof fetch): Promise<void> {
    const s = this.#stored;
    if (!s || this.#refused || s.expires_at === undefined) return Promise.resolve();
    const left = s.expires_at - Date.now();
    // Valid for long enough, or valid and nothing to refresh it with.
    if (left > REFRESH_MARGIN_MS || (left > 0 && s.refresh_token === undefined)) {
      return Promise.resolve();
    }
    this.#refreshing ??= this.#refresh(fetchFn).finally(() => (this.#refreshing = null));
    return this.#refreshing;
  }

  async #refresh(fetchFn: typeof fetch): Promise<void> {
    const { store, serverName, serverUrl } = this.#options;
    await store.withRefreshLock(serverName, serverUrl, async () => {
      const now = await store.load(serverName, serverUrl);
      if (
        now && now.access_token !== this.#stored?.access_token &&
        (now.expires_at === undefined || now.expires_at - Date.now() > REFRESH_MARGIN_MS)
      ) {
        this.#stored = now;
        return;
      }
      if (this.#stored?.refresh_token === undefined && !this.#machine) {
        if ((this.#stored?.expires_at ?? Infinity) <= Date.now()) this.#refused = true;
        return;
      }
      const { auth } = await loadMcpClientSdk();
      const result = await auth.auth(this, { serverUrl, fetchFn });
      if (result !== "AUTHORIZED") {
        throw new McpLoginRequiredError(
          serverName,
          `the OAuth login of MCP server \`${serverName}\` expired and could not be refreshed`,
        );
      }
    });
  }
}

/** The `private_key_jwt` client authentication of a machine client with a key file. */
async function privateKeyJwt(
  options: McpOAuthProviderOptions,
): Promise<AddClientAuthentication | undefined> {
  const { privateKeyFile, signingAlgorithm, clientId } = options.oauth;
  if (options.oauth.grantType !== "client_credentials" || privateKeyFile === null) return undefined;
  let privateKey: string;
  try {
    privateKey = await Deno.readTextFile(privateKeyFile);
  } catch (error) {
    throw new Error(
      `oauth.private_key_file of MCP server \`${options.serverName}\` cannot be read (${privateKeyFile}): ${
        (error as Error).message
      }`,
    );
  }
  const extensions = await loadMcpAuthExtensions();
  return extensions.createPrivateKeyJwtAuth({
    issuer: clientId!,
    subject: clientId!,
    privateKey,
    alg: signingAlgorithm ?? "RS256",
  });
}
