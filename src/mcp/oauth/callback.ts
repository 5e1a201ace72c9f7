/**
 * The OAuth redirect's receiving end: a loopback HTTP listener (127.0.0.1,
 * port 0 unless one is configured) at Codex's callback path,
 * `/callback/ID` — ID the first 12 characters of the base64url SHA-256 of
 * the server URL, so the redirect URI is the one Codex registers for the
 * same server. It answers only `GET` of that path carrying the `state` of
 * the authorization under way: anything else gets `400 Invalid OAuth
 * callback` and changes nothing (a page that guesses the port cannot end
 * or hijack a login). An `error` from the authorization server, with the
 * right state, fails the login with the server's words. A callback URL
 * pasted by the user (when the browser runs elsewhere) goes through the
 * same checks.
 *
 * `mcp_oauth_callback_url` replaces the redirect URI's base (for a browser
 * that reaches this machine through a forwarded port); the listener still
 * binds loopback only — never every interface.
 *
 * @module
 */

import { createHash } from "node:crypto";

/** The callback ID of a server, as Codex derives it. */
export function oauthCallbackId(serverUrl: string): string {
  return createHash("sha256").update(serverUrl).digest("base64url").slice(0, 12);
}

/** The page a browser shows after a good callback. */
export const CALLBACK_SUCCESS_TEXT = "Authentication complete. You may close this window.";
/** The answer to every other request. */
export const CALLBACK_INVALID_TEXT = "Invalid OAuth callback";

/** The authorization server sent the browser back with an error. */
export class OAuthAuthorizationDenied extends Error {
  /** The server's `error` (`access_denied`, …). */
  readonly code: string;
  /** `error` and `error_description` from the redirect. */
  constructor(code: string, description: string | null) {
    super(
      `the authorization server refused the authorization: ${code}${
        description ? ` (${description})` : ""
      }`,
    );
    this.name = "OAuthAuthorizationDenied";
    this.code = code;
  }
}

/** Options of {@linkcode listenForOAuthCallback}. */
export interface OAuthCallbackOptions {
  /** The MCP server's URL (the callback ID is derived from it). */
  readonly serverUrl: string;
  /** Port to listen on (default: any free port, or the port of a loopback `callbackUrl`). */
  readonly port?: number | null;
  /** The redirect URI's base instead of `http://127.0.0.1:PORT/callback`. */
  readonly callbackUrl?: string | null;
}

interface Waiter {
  readonly state: string;
  resolve(code: string): void;
  reject(error: Error): void;
}

/** A running callback listener. */
export class OAuthCallbackListener implements AsyncDisposable {
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #path: string;
  readonly #waiters = new Set<Waiter>();
  /** The redirect URI to register and send. */
  readonly redirectUrl: string;

  private constructor(server: Deno.HttpServer<Deno.NetAddr>, path: string, redirectUrl: string) {
    this.#server = server;
    this.#path = path;
    this.redirectUrl = redirectUrl;
  }

  /** Starts listening. */
  static open(options: OAuthCallbackOptions): OAuthCallbackListener {
    const id = oauthCallbackId(options.serverUrl);
    let base: URL | null = null;
    if (options.callbackUrl) {
      try {
        base = new URL(options.callbackUrl);
      } catch {
        throw new Error(`mcp_oauth_callback_url is not a URL: ${options.callbackUrl}`);
      }
      if (base.protocol !== "http:" && base.protocol !== "https:") {
        throw new Error(`mcp_oauth_callback_url must be http or https, got ${base.href}`);
      }
    }
    const loopbackBase = base !== null && base.protocol === "http:" &&
      ["127.0.0.1", "localhost", "[::1]"].includes(base.hostname);
    const port = options.port ?? (loopbackBase && base!.port !== "" ? Number(base!.port) : 0);
    const path = base
      ? `${base.pathname.replace(/\/+$/, "")}/${id}`
      : `/callback/${id}`;
    let listener!: OAuthCallbackListener;
    const server = Deno.serve(
      { hostname: "127.0.0.1", port, onListen() {} },
      (request) => listener.#handle(request),
    );
    const redirectUrl = base
      ? `${base.origin}${path}`
      : `http://127.0.0.1:${server.addr.port}${path}`;
    listener = new OAuthCallbackListener(server, new URL(redirectUrl).pathname, redirectUrl);
    return listener;
  }

  /** The port listened on. */
  get port(): number {
    return this.#server.addr.port;
  }

  #handle(request: Request): Response {
    const url = new URL(request.url);
    if (request.method !== "GET" || url.pathname !== this.#path) return invalid();
    return this.#deliver(url.searchParams) ? success() : invalid();
  }

  /** Hands a callback's parameters to the authorization waiting for their state. */
  #deliver(params: URLSearchParams): boolean {
    const state = params.get("state");
    const waiter = [...this.#waiters].find((w) => state !== null && w.state === state);
    if (!waiter) return false;
    const error = params.get("error");
    const code = params.get("code");
    if (error === null && !code) return false;
    this.#waiters.delete(waiter);
    if (error !== null) {
      waiter.reject(new OAuthAuthorizationDenied(error, params.get("error_description")));
    } else waiter.resolve(code!);
    return true;
  }

  /**
   * A callback URL the user pasted (the browser ran elsewhere): accepted
   * when it is this listener's path with the state of an authorization
   * under way. Returns whether it was.
   */
  submit(pasted: string): boolean {
    let url: URL;
    try {
      url = new URL(pasted.trim());
    } catch {
      return false;
    }
    return url.pathname === this.#path && this.#deliver(url.searchParams);
  }

  /**
   * The code of the callback carrying `state`. Rejects when the
   * authorization server sent an error, when `signal` aborts, or after
   * `timeoutMs`.
   */
  waitForCode(state: string, timeoutMs: number, signal?: AbortSignal): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.#waiters.delete(waiter);
      };
      const waiter: Waiter = {
        state,
        resolve: (code) => {
          done();
          resolve(code);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      };
      const onAbort = () => waiter.reject(signal!.reason);
      const timer = setTimeout(
        () =>
          waiter.reject(
            new Error(
              `timed out after ${
                Math.round(timeoutMs / 1000)
              } s waiting for the OAuth callback (the browser never came back to ${this.redirectUrl})`,
            ),
          ),
        timeoutMs,
      );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.add(waiter);
    });
  }

  /** Stops listening; authorizations still waiting fail. */
  async close(): Promise<void> {
    for (const w of [...this.#waiters]) w.reject(new Error("OAuth callback listener closed"));
    await this.#server.shutdown();
  }

  /** Same as {@linkcode close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

function success(): Response {
  return new Response(CALLBACK_SUCCESS_TEXT, {
    headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" },
  });
}

function invalid(): Response {
  return new Response(CALLBACK_INVALID_TEXT, {
    status: 400,
    headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" },
  });
}
