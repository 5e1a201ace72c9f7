/**
 * One MCP server, connected: its transport (stdio here or through an
 * exec-server, Streamable HTTP from here or from inside an environment),
 * the MCP SDK client on it, its listed tools behind the trust boundary,
 * and calls with a deadline that stops counting while the server waits on
 * the harness (elicitation, sampling). Closing it closes the transport,
 * which stops a stdio server's whole process group (SIGTERM, then SIGKILL
 * after 2 s) or terminates it on its exec-server — calls in flight fail at
 * once.
 *
 * @module
 */

import type { Logger } from "../../log/logger.ts";
import { spawnLocalMcpChild } from "../local_child.ts";
import { type McpAuthState, type McpOAuthOptions, McpOAuthSession } from "../oauth/session.ts";
import type { McpCredentialStore } from "../oauth/store.ts";
import { spawnRemoteMcpChild } from "../remote_child.ts";
import { childMcpTransport } from "../stdio_transport.ts";
import { loadMcpClientSdk, type McpClientSdk, type Transport } from "../sdk.ts";
import type { McpServerSpec } from "../server_spec.ts";
import type { McpServerConfig } from "./config.ts";
import { stripConnectorMeta } from "./connector_meta.ts";
import { hasConfiguredAuthorization, httpMcpTransport } from "./http_transport.ts";
import type { EnvironmentPool, McpPlacement } from "./placement.ts";

type Client = InstanceType<typeof import("@modelcontextprotocol/sdk/client").Client>;

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

/** Codex's capability (and tool-call `_meta` key) for a server that takes the sandbox state. */
export const SANDBOX_STATE_META = "codex/sandbox-state-meta";

/** A request from a server that the harness answers. */
export interface McpServerRequest {
  /** The server asking. */
  readonly server: string;
  /** The request's params as the server sent them. */
  readonly params: JsonObject;
  /** Aborted when the server cancels or the runtime shuts down. */
  readonly signal: AbortSignal;
}

/** Callbacks for what servers ask of the harness. */
export interface McpHarnessCallbacks {
  /** `elicitation/create`: return `{action, content?}`. Without it elicitation is not advertised. */
  readonly onElicitation?: (request: McpServerRequest) => Promise<JsonObject> | JsonObject;
  /** `sampling/createMessage`: return the message. Without it sampling is not advertised. */
  readonly onSampling?: (request: McpServerRequest) => Promise<JsonObject> | JsonObject;
}

/** What the client says about itself in `initialize`. */
export interface McpClientInfo {
  /** Name. */
  readonly name: string;
  /** Version. */
  readonly version: string;
  /** Display title. */
  readonly title?: string;
}

/** Options of {@linkcode ServerConnection.open}. */
export interface ServerConnectionOptions extends McpHarnessCallbacks {
  /** The server. */
  readonly config: McpServerConfig;
  /** Where it runs. */
  readonly placement: McpPlacement;
  /** Environment connections. */
  readonly pool: EnvironmentPool;
  /** Where named variables are read. */
  readonly hostEnv: Readonly<Record<string, string>>;
  /** Working directory for a local stdio server without one. */
  readonly fallbackCwd?: string;
  /** `initialize` client info. */
  readonly clientInfo: McpClientInfo;
  /** Diagnostics (server stderr at `info`). */
  readonly logger: Logger;
  /** Connect + first `tools/list` deadline. */
  readonly startupTimeoutMs: number;
  /** Cancels the start. */
  readonly signal?: AbortSignal;
  /** The server said its tool list changed (already re-listed). */
  readonly onToolsChanged?: () => void;
  /** The connection closed on its own (the server exited, the transport failed). */
  readonly onClosed?: (reason: string) => void;
  /** Where OAuth credentials are kept (null: no OAuth). */
  readonly oauthStore?: McpCredentialStore | null;
  /** OAuth options (who can be asked to log in, …). */
  readonly oauth?: McpOAuthOptions;
  /** Told how the server authenticates, once that is known (before connecting). */
  readonly onAuthState?: (state: McpAuthState) => void;
}

/** Pages of `tools/list` followed at most. */
const MAX_TOOL_LIST_PAGES = 100;
/** Tools kept at most per server. */
const MAX_TOOLS = 10_000;

/** Codex's rendering of a duration (`300s`, `2.5s`, `250ms`). */
export function formatDuration(ms: number): string {
  return ms < 1000 ? `${ms}ms` : `${ms / 1000}s`;
}

/** A timeout of `label` (`tools/call`, `tools/list`…), worded as Codex words it. */
export class McpTimeoutError extends Error {
  /** `label` (what was awaited) took longer than `ms`. */
  constructor(label: string, ms: number) {
    super(`timed out awaiting ${label} after ${formatDuration(ms)}`);
    this.name = "McpTimeoutError";
  }
}

/**
 * A deadline that can stop counting: paused while the server waits on the
 * harness, so a person answering a prompt does not time the call out.
 */
class Deadline {
  readonly controller = new AbortController();
  #remaining: number;
  #since = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  readonly #error: () => Error;

  constructor(ms: number, paused: boolean, error: () => Error) {
    this.#remaining = ms;
    this.#error = error;
    if (!paused) this.resume();
  }

  pause(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#remaining -= performance.now() - this.#since;
  }

  resume(): void {
    if (this.#timer !== undefined || this.controller.signal.aborted) return;
    this.#since = performance.now();
    this.#timer = setTimeout(
      () => this.controller.abort(this.#error()),
      Math.max(0, this.#remaining),
    );
  }

  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** The SDK's own per-request timer is disarmed: deadlines are ours. */
const NO_SDK_TIMEOUT = 2 ** 31 - 1;

/**
 * Authorizations one request may send a person through (a login, then a
 * step-up to a wider scope): past it the server's refusal stands.
 */
const MAX_AUTHORIZATIONS = 3;

/** The SDK's "authorization needed" (a person was sent to log in). */
/** The SDK's "authorization needed" (its class sets no `name`). */
function isUnauthorized(error: unknown, sdk: McpClientSdk): boolean {
  return error instanceof sdk.auth.UnauthorizedError;
}

type FinishableTransport = Transport & { finishAuth(code: string): Promise<void> };

/** A connected MCP server. */
export class ServerConnection {
  #client!: Client;
  #transport: Transport | null = null;
  readonly #config: McpServerConfig;
  readonly #oauth: McpOAuthSession | null;
  readonly #deadlines = new Set<Deadline>();
  #waitingOnHarness = 0;
  #tools: JsonObject[] = [];
  #closing: Promise<void> | null = null;
  #initializeMs = 0;
  #firstListMs = 0;

  private constructor(config: McpServerConfig, oauth: McpOAuthSession | null) {
    this.#config = config;
    this.#oauth = oauth;
  }

  /** How the server authenticates. */
  get authState(): McpAuthState {
    return this.#oauth?.state ?? "none";
  }

  /** How long the start took: `initialize` (with any login) and the first `tools/list`, ms. */
  get startupTimings(): { initializeMs: number; firstListMs: number } {
    return { initializeMs: this.#initializeMs, firstListMs: this.#firstListMs };
  }

  /**
   * The server takes Codex's sandbox state on tool calls (its capabilities
   * carry `experimental["codex/sandbox-state-meta"]`).
   */
  get sandboxStateMeta(): boolean {
    const experimental = this.capabilities.experimental;
    return experimental !== null && typeof experimental === "object" &&
      Object.hasOwn(experimental, SANDBOX_STATE_META);
  }

  /** The server's tools (reserved connector `_meta` removed unless trusted). */
  get tools(): readonly JsonObject[] {
    return this.#tools;
  }

  /** `serverInfo` from `initialize`. */
  get serverInfo(): JsonObject | null {
    return (this.#client.getServerVersion() as JsonObject | undefined) ?? null;
  }

  /** The server's instructions. */
  get instructions(): string | null {
    return this.#client.getInstructions() ?? null;
  }

  /** The server's capabilities. */
  get capabilities(): JsonObject {
    return (this.#client.getServerCapabilities() as JsonObject | undefined) ?? {};
  }

  /**
   * Starts the server and lists its tools within the startup deadline.
   * Whatever was started is stopped again when this fails.
   */
  static async open(
    options: ServerConnectionOptions,
    trusted: boolean,
  ): Promise<ServerConnection> {
    const sdk = await loadMcpClientSdk();
    const deadline = new Deadline(options.startupTimeoutMs, false, () => new StartupTimeout());
    const abort = () => deadline.controller.abort(options.signal!.reason);
    options.signal?.addEventListener("abort", abort, { once: true });
    let connection: ServerConnection | null = null;
    let oauth: McpOAuthSession | null = null;
    try {
      options.signal?.throwIfAborted();
      oauth = await race(oauthSession(options), deadline.controller.signal, (o) => o?.close());
      connection = new ServerConnection(options.config, oauth);
      connection.#deadlines.add(deadline);
      const started = performance.now();
      await connection.#connect(sdk, options, trusted, deadline.controller.signal);
      const listing = performance.now();
      connection.#tools = await connection.#authorized(
        () => connection!.#listTools(trusted, NO_SDK_TIMEOUT, deadline),
        deadline.controller.signal,
      );
      connection.#initializeMs = Math.round(listing - started);
      connection.#firstListMs = Math.round(performance.now() - listing);
      connection.#deadlines.delete(deadline);
      return connection;
    } catch (error) {
      const reason = deadline.controller.signal.aborted ? deadline.controller.signal.reason : error;
      if (connection) {
        connection.#closing = Promise.resolve();
        await connection.#client?.close().catch(() => {});
        await connection.#transport?.close().catch(() => {});
      }
      await oauth?.close();
      throw reason;
    } finally {
      deadline.clear();
      options.signal?.removeEventListener("abort", abort);
    }
  }

  /**
   * Opens the transport and initialises, sending a person through a login
   * (at most {@linkcode MAX_AUTHORIZATIONS} times) when the server asks for
   * one and somebody can be asked.
   */
  async #connect(
    sdk: McpClientSdk,
    options: ServerConnectionOptions,
    trusted: boolean,
    signal: AbortSignal,
  ): Promise<void> {
    for (let authorizations = 0;; authorizations++) {
      const client = this.#newClient(sdk, options, trusted);
      this.#client = client;
      const transport = await race(
        openTransport(options, this.#oauth),
        signal,
        (t) => t.close(),
      );
      this.#transport = transport;
      try {
        await client.connect(transport, { signal, timeout: NO_SDK_TIMEOUT });
        client.onclose = () => {
          if (!this.#closing) options.onClosed?.("MCP server closed the connection");
        };
        return;
      } catch (error) {
        if (
          !isUnauthorized(error, sdk) || !this.#oauth?.interactive ||
          authorizations + 1 >= MAX_AUTHORIZATIONS
        ) {
          throw error;
        }
        await this.#whileHarnessWaits(() =>
          this.#oauth!.completeAuthorization(
            (code) => (transport as FinishableTransport).finishAuth(code),
            signal,
          )
        );
        await client.close().catch(() => {});
        await transport.close().catch(() => {});
      }
    }
  }

  /** A client with the harness's handlers. */
  #newClient(
    sdk: McpClientSdk,
    options: ServerConnectionOptions,
    trusted: boolean,
  ): Client {
    const capabilities: JsonObject = {};
    if (options.onElicitation) capabilities.elicitation = { form: { applyDefaults: true } };
    if (options.onSampling) capabilities.sampling = {};
    const client = new sdk.client.Client({ ...options.clientInfo }, { capabilities }) as Client;
    this.#answer(client, sdk.types.ElicitRequestSchema, options.onElicitation);
    this.#answer(client, sdk.types.CreateMessageRequestSchema, options.onSampling);
    client.setNotificationHandler(sdk.types.ToolListChangedNotificationSchema, async () => {
      try {
        this.#tools = await this.#authorized(
          () => this.#listTools(trusted, options.startupTimeoutMs),
        );
        options.onToolsChanged?.();
      } catch (error) {
        options.logger.warn("mcp.tools_relist_failed", {
          server: options.config.name,
          error: (error as Error).message,
        });
      }
    });
    return client;
  }

  /**
   * Runs `request`; when the server wants a (wider) authorization and a
   * person can be asked, finishes it and runs `request` again — at most
   * {@linkcode MAX_AUTHORIZATIONS} times.
   */
  async #authorized<T>(request: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    for (let authorizations = 0;; authorizations++) {
      try {
        return await request();
      } catch (error) {
        const transport = this.#transport as FinishableTransport | null;
        if (
          !isUnauthorized(error, await loadMcpClientSdk()) || !this.#oauth?.interactive ||
          !transport ||
          authorizations + 1 >= MAX_AUTHORIZATIONS
        ) {
          throw error;
        }
        await this.#whileHarnessWaits(() =>
          this.#oauth!.completeAuthorization((code) => transport.finishAuth(code), signal)
        );
      }
    }
  }

  /** Runs `fn` with every deadline paused (a person is answering). */
  async #whileHarnessWaits<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#waitingOnHarness++ === 0) { for (const d of this.#deadlines) d.pause(); }
    try {
      return await fn();
    } finally {
      if (--this.#waitingOnHarness === 0) { for (const d of this.#deadlines) d.resume(); }
    }
  }

  #answer(
    client: Client,
    schema: Parameters<Client["setRequestHandler"]>[0],
    callback: ((request: McpServerRequest) => Promise<JsonObject> | JsonObject) | undefined,
  ): void {
    if (!callback) return;
    client.setRequestHandler(
      schema,
      (request, extra) =>
        this.#whileHarnessWaits(async () =>
          await callback({
            server: this.#config.name,
            params: (request.params ?? {}) as JsonObject,
            signal: extra.signal,
          }) as never
        ),
    );
  }

  async #listTools(
    trusted: boolean,
    timeoutMs: number,
    deadline?: Deadline,
  ): Promise<JsonObject[]> {
    const tools: JsonObject[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_LIST_PAGES; page++) {
      const result = await this.#client.listTools(cursor !== undefined ? { cursor } : undefined, {
        timeout: timeoutMs,
        ...(deadline ? { signal: deadline.controller.signal } : {}),
      });
      for (const tool of result.tools) {
        if (tools.length >= MAX_TOOLS) break;
        tools.push(trusted ? tool as JsonObject : stripConnectorMeta(tool as JsonObject));
      }
      cursor = result.nextCursor;
      if (cursor === undefined || tools.length >= MAX_TOOLS) break;
    }
    return tools;
  }

  /** Runs `fn` under a pausable deadline named `label`. */
  async #timed<T>(
    label: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const deadline = new Deadline(
      timeoutMs,
      this.#waitingOnHarness > 0,
      () => new McpTimeoutError(label, timeoutMs),
    );
    this.#deadlines.add(deadline);
    const forward = () => deadline.controller.abort(signal!.reason);
    signal?.addEventListener("abort", forward, { once: true });
    try {
      signal?.throwIfAborted();
      return await fn(deadline.controller.signal);
    } catch (error) {
      throw deadline.controller.signal.aborted ? deadline.controller.signal.reason : error;
    } finally {
      deadline.clear();
      this.#deadlines.delete(deadline);
      signal?.removeEventListener("abort", forward);
    }
  }

  /** `tools/call`. */
  callTool(
    tool: string,
    args: JsonObject,
    options: { meta?: JsonObject; timeoutMs: number; signal?: AbortSignal },
  ): Promise<JsonObject> {
    return this.#timed(
      "tools/call",
      options.timeoutMs,
      options.signal,
      (signal) =>
        this.#authorized(
          async () =>
            await this.#client.callTool(
              { name: tool, arguments: args, ...(options.meta ? { _meta: options.meta } : {}) },
              undefined,
              { signal, timeout: NO_SDK_TIMEOUT },
            ) as JsonObject,
          signal,
        ),
    );
  }

  /** Any other request (`resources/list`, `prompts/get`, …) under a deadline. */
  request(
    method:
      | "resources/list"
      | "resources/templates/list"
      | "resources/read"
      | "prompts/list"
      | "prompts/get",
    params: JsonObject,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<JsonObject> {
    return this.#timed(
      method,
      options.timeoutMs,
      options.signal,
      (signal) =>
        this.#authorized(async () => {
          const opts = { signal, timeout: NO_SDK_TIMEOUT };
          const c = this.#client;
          switch (method) {
            case "resources/list":
              return await c.listResources(params, opts) as JsonObject;
            case "resources/templates/list":
              return await c.listResourceTemplates(params, opts) as JsonObject;
            case "resources/read":
              return await c.readResource(params as { uri: string }, opts) as JsonObject;
            case "prompts/list":
              return await c.listPrompts(params, opts) as JsonObject;
            case "prompts/get":
              return await c.getPrompt(params as { name: string }, opts) as JsonObject;
          }
        }, signal),
    );
  }

  /** Closes the client and the transport (stopping the server). */
  close(): Promise<void> {
    if (this.#closing) return this.#closing;
    // Set before the client closes: its onclose runs inside close().
    let done!: () => void;
    this.#closing = new Promise<void>((resolve) => (done = resolve));
    void (async () => {
      await this.#client.close().catch(() => {});
      await this.#oauth?.close().catch(() => {});
    })().finally(done);
    return this.#closing;
  }
}

/** The startup deadline passed (worded by the manager, which knows the setting). */
export class StartupTimeout extends Error {
  constructor() {
    super("MCP client startup timed out");
    this.name = "StartupTimeout";
  }
}

/** Resolves with `work`, or rejects when `signal` aborts (then disposing of a late result). */
function race<T>(
  work: Promise<T>,
  signal: AbortSignal,
  dispose: (value: T) => unknown,
): Promise<T> {
  if (signal.aborted) {
    work.then(dispose, () => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.then(dispose, () => {});
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) return;
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/**
 * OAuth of an HTTP server that has no bearer token or `Authorization`
 * header configured (null when it does not apply).
 */
async function oauthSession(options: ServerConnectionOptions): Promise<McpOAuthSession | null> {
  const { config, hostEnv, logger } = options;
  if (config.transport.type !== "streamable_http") return null;
  if (hasConfiguredAuthorization(config, hostEnv, logger)) {
    options.onAuthState?.("bearer");
    return null;
  }
  const session = options.oauthStore
    ? await McpOAuthSession.open(config, options.oauthStore, options.oauth ?? {})
    : null;
  options.onAuthState?.(session?.state ?? "none");
  return session;
}

/** Starts the server's process (or prepares its HTTP transport). */
async function openTransport(
  options: ServerConnectionOptions,
  oauth: McpOAuthSession | null,
): Promise<Transport> {
  const { config, placement, logger, hostEnv } = options;
  const environment = placement.kind === "remote"
    ? await options.pool.client(placement.environmentId)
    : undefined;
  if (config.transport.type === "streamable_http") {
    return await httpMcpTransport(config, {
      hostEnv,
      logger,
      oauth,
      ...(environment ? { environment } : {}),
    });
  }
  const t = config.transport;
  const spec: McpServerSpec = {
    name: config.name,
    command: t.command,
    args: t.args,
    envVars: t.envVars,
    ...(t.cwd !== null ? { cwd: t.cwd } : {}),
    ...(t.env !== null ? { env: t.env } : {}),
  };
  if (environment && placement.kind === "remote") {
    const child = await spawnRemoteMcpChild(environment, spec, {
      hostEnv,
      ...(placement.cwd !== null ? { fallbackCwd: placement.cwd } : {}),
    });
    return await childMcpTransport(child, { logger });
  }
  const child = spawnLocalMcpChild(spec, {
    hostEnv,
    ...(options.fallbackCwd !== undefined ? { fallbackCwd: options.fallbackCwd } : {}),
  });
  return await childMcpTransport(child, { logger });
}
