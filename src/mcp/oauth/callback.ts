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

/** An authorization under way: its state, and the code (or error) once the callback came. */
interface Pending {
  /** The callback came (a second one with the same state is refused). */
  settled: boolean;
  readonly promise: Promise<string>;
  resolve(code: string): void;
  reject(error: Error): void;
}

function pending(): Pending {
  let resolve!: (code: string) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<string>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {}); // observed by waitForCode; a login abandoned is not unhandled
  return { settled: false, promise, resolve, reject };
}

/** A running callback listener. */
export class OAuthCallbackListener implements AsyncDisposable {
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #path: string;
  /** By state: registered when the person is sent, settled by the callback. */
  readonly #pending = new Map<string, Pending>();
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
    const path = base ? `${base.pathname.replace(/\/+$/, "")}/${id}` : `/callback/${id}`;
    // The handler needs the listener, which needs the server's port.
    const self: { listener?: OAuthCallbackListener } = {};
    const server = Deno.serve(
      { hostname: "127.0.0.1", port, onListen() {} },
      (request) => self.listener!.#handle(request),
    );
    const redirectUrl = base
      ? `${base.origin}${path}`
      : `http://127.0.0.1:${server.addr.port}${path}`;
    self.listener = new OAuthCallbackListener(server, new URL(redirectUrl).pathname, redirectUrl);
    return self.listener;
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

  /** Hands a callback's parameters to the authorization under way with their state. */
  #deliver(params: URLSearchParams): boolean {
    const state = params.get("state");
    const waiter = state === null ? undefined : this.#pending.get(state);
    if (!waiter || waiter.settled) return false;
    const error = params.get("error");
    const code = params.get("code");
    if (error === null && !code) return false;
    waiter.settled = true;
    if (error !== null) {
      waiter.reject(new OAuthAuthorizationDenied(error, params.get("error_description")));
    } else waiter.resolve(code!);
    return true;
  }

  /**
   * Registers the authorization with `state` before the person is sent
   * (the browser may come back before anyone waits): from then on its
   * callback is accepted and kept for {@linkcode waitForCode}.
   */
  expect(state: string): void {
    if (!this.#pending.has(state)) this.#pending.set(state, pending());
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
   * The code of the callback carrying `state` (registered now if
   * {@linkcode expect} did not). Rejects when the authorization server sent
   * an error, when `signal` aborts, or after `timeoutMs`.
   */
  async waitForCode(state: string, timeoutMs: number, signal?: AbortSignal): Promise<string> {
    this.expect(state);
    const waiter = this.#pending.get(state)!;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `timed out after ${
                Math.round(timeoutMs / 1000)
              } s waiting for the OAuth callback (the browser never came back to ${this.redirectUrl})`,
            ),
          ),
        timeoutMs,
      );
      onAbort = () => reject(signal!.reason);
      if (signal?.aborted) onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([waiter.promise, stop]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      this.#pending.delete(state);
    }
  }

  /** Stops listening; authorizations still waiting fail. */
  async close(): Promise<void> {
    for (const w of this.#pending.values()) w.reject(new Error("OAuth callback listener closed"));
    this.#pending.clear();
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
