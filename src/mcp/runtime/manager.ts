/**
 * The MCP connection manager: every enabled server started at once, each
 * within its startup timeout; a status per server; the tools of all of
 * them under model-visible names (`mcp__SERVER__TOOL`), filtered by each
 * server's `enabled_tools` / `disabled_tools`; while a server starts, the
 * tools of its last successful start from the cache; calls, resources and
 * prompts routed by server; elicitation and sampling passed to the
 * harness; `shutdown()` cancels starts in progress and stops everything.
 *
 * @example Run the servers of a Codex configuration and call a tool
 * ```ts ignore
 * import { loadMcpServerConfigs, McpConnectionManager } from "jsr:@org/exec-server/mcp";
 *
 * const servers = await loadMcpServerConfigs();
 * await using manager = McpConnectionManager.start({ servers });
 * await manager.startupComplete;
 * for (const tool of manager.listTools()) console.log(tool.qualifiedName);
 * console.log(await manager.callTool("mcp__everything__echo", { message: "hi" }));
 * ```
 *
 * @module
 */

import { type Logger, nullLogger } from "../../log/logger.ts";
import { VERSION } from "../../version.ts";
import { defaultConfigLocations } from "../../codex_config/layers.ts";
import { loginCommand, McpLoginRequiredError } from "../oauth/provider.ts";
import { configuredBearer } from "../oauth/status.ts";
import { credentialStoreFor, type McpAuthState, type McpOAuthOptions } from "../oauth/session.ts";
import type { McpCredentialStore } from "../oauth/store.ts";
import {
  DEFAULT_STARTUP_TIMEOUT_MS,
  DEFAULT_TOOL_TIMEOUT_MS,
  type McpServerConfig,
  toolAllowed,
} from "./config.ts";
import { TRUSTED_CONNECTOR_SERVER } from "./connector_meta.ts";
import { EnvironmentPool, type McpRuntimeContext, resolvePlacement } from "./placement.ts";
import {
  type JsonObject,
  type McpClientInfo,
  type McpHarnessCallbacks,
  SANDBOX_STATE_META,
  ServerConnection,
  StartupTimeout,
} from "./server_connection.ts";
import { ToolCache } from "./tool_cache.ts";
import type { McpRuntimeMetrics } from "./metrics.ts";
import { qualifyToolNames } from "./tool_names.ts";

/** Where a server is in its life. */
export type McpServerState = "starting" | "ready" | "failed" | "cancelled" | "disabled";

/** One server's status. */
export interface McpServerStatus {
  /** Server name. */
  readonly name: string;
  /** Its state. */
  readonly state: McpServerState;
  /** Why it failed (state `failed`). */
  readonly error?: string;
  /** `stdio` or `streamable_http`. */
  readonly transport: "stdio" | "streamable_http";
  /** The environment it runs in. */
  readonly environmentId: string;
  /** `serverInfo` (live, or from the cache while starting). */
  readonly serverInfo: JsonObject | null;
  /** Tools offered (after filtering). */
  readonly toolCount: number;
  /** The tools offered come from the cache (the server is starting, or failed to start). */
  readonly fromCache: boolean;
  /** A failed start fails the runtime. */
  readonly required: boolean;
  /** How it authenticates: `bearer`, `oauth`, `oauth (expired, login needed)` or `none`. */
  readonly auth: McpAuthState;
  /** The server takes Codex's sandbox state on tool calls (`codex/sandbox-state-meta`). */
  readonly sandboxStateMeta: boolean;
  /** Time to `initialize` it (with any login), ms, once ready. */
  readonly startupMs?: number;
  /** Time its first `tools/list` took, ms, once ready. */
  readonly firstListMs?: number;
}

/** A status change. */
export interface McpStatusEvent {
  /** The server. */
  readonly server: string;
  /** Its new state. */
  readonly state: McpServerState;
  /** The failure (state `failed`). */
  readonly error?: string;
}

/** How startup ended. */
export interface McpStartupSummary {
  /** Servers that became ready. */
  readonly ready: string[];
  /** Servers that failed, with why. */
  readonly failed: Array<{ server: string; error: string }>;
  /** Servers whose start was cancelled. */
  readonly cancelled: string[];
  /** Failed servers configured `required = true`. */
  readonly requiredFailed: string[];
}

/** A tool as a harness offers it to a model. */
export interface McpToolInfo {
  /** `mcp__server__tool`, sanitised, at most 64 bytes, unique. */
  readonly qualifiedName: string;
  /** The server. */
  readonly server: string;
  /** The tool's own name (what is sent on a call). */
  readonly tool: string;
  /** The tool definition from `tools/list`. */
  readonly definition: JsonObject;
  /** From the cache of the last start: the server is still starting. */
  readonly fromCache: boolean;
  /** The server's instructions (describe the namespace). */
  readonly serverInstructions: string | null;
}

/** Options of {@linkcode McpConnectionManager.start}. */
export interface McpManagerOptions extends McpRuntimeContext, McpHarnessCallbacks {
  /** The servers (from {@linkcode loadMcpServerConfigs} or built by hand). */
  readonly servers: readonly McpServerConfig[];
  /** Codex home: the tool cache goes under it unless `toolCache` says otherwise. */
  readonly codexHome?: string;
  /** The tool cache; `null` for none. Default: under `codexHome` when given. */
  readonly toolCache?: ToolCache | null;
  /** `initialize` client info. Default `exec-server-mcp-client`. */
  readonly clientInfo?: McpClientInfo;
  /** The one server name whose connector `_meta` is trusted. Default `codex_apps`. */
  readonly trustedServerName?: string;
  /**
   * OAuth: where tokens are (default: the store of `codexHome`, else of
   * `$CODEX_HOME`), the configuration's settings, and whether a person can
   * be sent to log in.
   */
  readonly oauth?: McpOAuthOptions;
  /**
   * Codex's sandbox state, added under `_meta["codex/sandbox-state-meta"]`
   * to the tool calls of servers that advertise that capability.
   */
  readonly sandboxState?: () => JsonObject | undefined;
  /** Status changes, in order per server. */
  readonly onStatus?: (event: McpStatusEvent) => void;
  /** Where starts, tool calls and lost servers are counted (see `metrics.ts`). */
  readonly metrics?: McpRuntimeMetrics | null;
  /** The tools on offer changed (a server became ready, failed, or re-listed). */
  readonly onToolsChanged?: () => void;
  /** Diagnostics. */
  readonly logger?: Logger;
}

interface Entry {
  readonly config: McpServerConfig;
  state: McpServerState;
  error?: string;
  auth: McpAuthState;
  connection: ServerConnection | null;
  cached:
    | { tools: JsonObject[]; serverInfo: JsonObject | null; instructions: string | null }
    | null;
  started: Promise<ServerConnection> | null;
}

/** The error of an unknown server, worded as Codex words it. */
function unknownServer(name: string): Error {
  return new Error(`unknown MCP server '${name}'`);
}

function startupError(config: McpServerConfig, error: unknown): string {
  if (error instanceof StartupTimeout) {
    const secs = Math.floor((config.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS) / 1000);
    return `MCP client for \`${config.name}\` timed out after ${secs} seconds. Add or adjust \`startup_timeout_sec\` in your config.toml:\n[mcp_servers.${config.name}]\nstartup_timeout_sec = XX`;
  }
  return `MCP client for \`${config.name}\` failed to start: ${describeError(config, error)}`;
}

/**
 * An error's text; an HTTP status the SDK keeps in `code` is spelled out
 * (`HTTP 403: …`; 401 as Codex's `Auth required`, with how to log in).
 */
function describeError(config: McpServerConfig, error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const prefix = "Streamable HTTP error: ";
  const message = error.message.slice(prefix.length);
  if (
    error.message.startsWith(prefix) && typeof code === "number" && code >= 100 && code < 600
  ) {
    if (code !== 401) return `HTTP ${code}: ${message}`;
    return configuredBearer(config)
      ? `Auth required (HTTP 401): ${message}`
      : `Auth required (HTTP 401): ${message}; run \`${loginCommand(config.name)}\` to log in`;
  }
  return error.message;
}

/** The manager's credential store: given, or the Codex home's; an Error says why none can be used. */
function resolveStore(options: McpManagerOptions): McpCredentialStore | Error | null {
  if (options.oauth?.store !== undefined) return options.oauth.store;
  try {
    return credentialStoreFor(
      options.codexHome ?? defaultConfigLocations().codexHome,
      options.oauth?.settings,
    );
  } catch (error) {
    return error as Error;
  }
}

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Many MCP servers for one harness. */
export class McpConnectionManager implements AsyncDisposable {
  readonly #entries = new Map<string, Entry>();
  readonly #options: McpManagerOptions;
  readonly #pool: EnvironmentPool;
  readonly #cache: ToolCache | null;
  /** The credential store, or why there is none (a settings problem fails OAuth servers). */
  readonly #oauthStore: McpCredentialStore | Error | null;
  readonly #logger: Logger;
  readonly #cancel = new AbortController();
  readonly #complete: Promise<McpStartupSummary>;
  #shutdown: Promise<void> | null = null;
  /** `listTools()`'s answer until the tools on offer change (calls look names up in it). */
  #listed: McpToolInfo[] | null = null;

  private constructor(options: McpManagerOptions) {
    this.#options = options;
    this.#logger = options.logger ?? nullLogger;
    this.#pool = new EnvironmentPool(options.environments);
    this.#cache = options.toolCache !== undefined
      ? options.toolCache
      : options.codexHome !== undefined
      ? ToolCache.inCodexHome(options.codexHome)
      : null;
    this.#oauthStore = resolveStore(options);
    options.metrics?.track(() =>
      [...this.#entries.values()].map((e) => [e.config.name, e.state] as const)
    );
    for (const config of options.servers) {
      if (this.#entries.has(config.name)) {
        throw new Error(`duplicate MCP server \`${config.name}\``);
      }
      this.#entries.set(config.name, {
        config,
        state: config.enabled ? "starting" : "disabled",
        auth: config.transport.type === "streamable_http" &&
            config.transport.bearerTokenEnvVar !== null
          ? "bearer"
          : "none",
        connection: null,
        cached: null,
        started: null,
      });
    }
    const starts = [...this.#entries.values()].filter((e) => e.config.enabled).map((e) =>
      this.#start(e)
    );
    this.#complete = Promise.allSettled(starts).then(() => this.#summary());
  }

  /** Starts every enabled server concurrently; returns at once. */
  static start(options: McpManagerOptions): McpConnectionManager {
    return new McpConnectionManager(options);
  }

  /** Resolves when every server is ready, failed or cancelled. */
  get startupComplete(): Promise<McpStartupSummary> {
    return this.#complete;
  }

  #summary(): McpStartupSummary {
    const all = [...this.#entries.values()];
    const failed = all.filter((e) => e.state === "failed");
    return {
      ready: all.filter((e) => e.state === "ready").map((e) => e.config.name),
      failed: failed.map((e) => ({ server: e.config.name, error: e.error ?? "" })),
      cancelled: all.filter((e) => e.state === "cancelled").map((e) => e.config.name),
      requiredFailed: failed.filter((e) => e.config.required).map((e) => e.config.name),
    };
  }

  /** The tools on offer changed: the named list is rebuilt at the next `listTools()`. */
  #toolsChanged(): void {
    this.#listed = null;
    this.#options.onToolsChanged?.();
  }

  #set(entry: Entry, state: McpServerState, error?: string): void {
    entry.state = state;
    if (error !== undefined) entry.error = error;
    this.#options.onStatus?.({
      server: entry.config.name,
      state,
      ...(error !== undefined ? { error } : {}),
    });
  }

  #start(entry: Entry): Promise<void> {
    const { config } = entry;
    this.#options.onStatus?.({ server: config.name, state: "starting" });
    if (config.problem) {
      // Nothing of a server whose table is wrong runs.
      const message = config.problem.message;
      this.#logger.warn("mcp.startup_failed", { server: config.name, error: message });
      this.#set(entry, "failed", message);
      return Promise.resolve();
    }
    const trusted = config.name === (this.#options.trustedServerName ?? TRUSTED_CONNECTOR_SERVER);
    const metrics = this.#options.metrics;
    const startedAt = performance.now();
    const elapsed = () => (performance.now() - startedAt) / 1000;
    const cacheRead = this.#cache?.read(config).then((snapshot) => {
      if (snapshot && entry.state === "starting") {
        entry.cached = {
          tools: snapshot.tools.map((t) => ({ ...t })),
          serverInfo: snapshot.serverInfo,
          instructions: snapshot.instructions,
        };
        this.#toolsChanged();
      }
    }).catch(() => {});
    entry.started = (async () => {
      // The snapshot first: spawning is synchronous work that would hold
      // the read (and so the cached tools) behind every server's start.
      await cacheRead;
      const placement = resolvePlacement(config, this.#options);
      const store = this.#oauthStore;
      if (store instanceof Error && config.transport.type === "streamable_http") throw store;
      return await ServerConnection.open({
        config,
        placement,
        pool: this.#pool,
        hostEnv: this.#options.hostEnv ?? Deno.env.toObject(),
        ...(this.#options.fallbackCwd !== undefined
          ? { fallbackCwd: this.#options.fallbackCwd }
          : {}),
        clientInfo: this.#options.clientInfo ??
          { name: "exec-server-mcp-client", version: VERSION, title: "exec-server" },
        logger: this.#logger,
        startupTimeoutMs: config.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS,
        signal: this.#cancel.signal,
        ...(this.#options.onElicitation ? { onElicitation: this.#options.onElicitation } : {}),
        ...(this.#options.onSampling ? { onSampling: this.#options.onSampling } : {}),
        onToolsChanged: () => {
          void this.#saveSnapshot(entry);
          this.#toolsChanged();
        },
        onClosed: (reason) => {
          if (entry.state !== "ready") return;
          metrics?.lost(config.name, "closed");
          entry.connection = null;
          this.#set(entry, "failed", reason);
          this.#toolsChanged();
        },
        oauthStore: store instanceof Error ? null : store,
        ...(this.#options.oauth ? { oauth: this.#options.oauth } : {}),
        onAuthState: (state) => (entry.auth = state),
      }, trusted);
    })();
    return entry.started.then(async (connection) => {
      await cacheRead;
      if (this.#shutdown) {
        await connection.close();
        return;
      }
      entry.connection = connection;
      entry.cached = null;
      const timings = connection.startupTimings;
      metrics?.startup(config.name, "ready", elapsed(), timings.firstListMs / 1000);
      this.#logger.info("mcp.server_started", {
        server: config.name,
        startup_ms: timings.initializeMs,
        first_list_ms: timings.firstListMs,
        tools: connection.tools.length,
        sandbox_state_meta: connection.sandboxStateMeta,
      });
      this.#set(entry, "ready");
      this.#toolsChanged();
      await this.#saveSnapshot(entry);
    }, async (error) => {
      await cacheRead;
      metrics?.startup(
        config.name,
        this.#cancel.signal.aborted ? "cancelled" : "failed",
        elapsed(),
      );
      if (this.#cancel.signal.aborted) this.#set(entry, "cancelled");
      else {
        const message = startupError(config, error);
        this.#logger.warn("mcp.startup_failed", { server: config.name, error: message });
        this.#set(entry, "failed", message);
      }
      this.#toolsChanged();
    });
  }

  async #saveSnapshot(entry: Entry): Promise<void> {
    const c = entry.connection;
    if (!this.#cache || !c) return;
    try {
      await this.#cache.write(entry.config, {
        serverInfo: c.serverInfo,
        instructions: c.instructions,
        tools: c.tools,
        savedAtMs: Date.now(),
      });
    } catch (error) {
      this.#logger.warn("mcp.tool_cache_write_failed", {
        server: entry.config.name,
        error: (error as Error).message,
      });
    }
  }

  /** Every configured server's status, in configuration order. */
  status(): McpServerStatus[] {
    return [...this.#entries.values()].map((e) => {
      const tools = this.#toolsOf(e);
      return {
        name: e.config.name,
        state: e.state,
        ...(e.error !== undefined && e.state === "failed" ? { error: e.error } : {}),
        transport: e.config.transport.type,
        environmentId: e.config.environmentId,
        serverInfo: e.connection?.serverInfo ?? e.cached?.serverInfo ?? null,
        toolCount: tools?.tools.length ?? 0,
        fromCache: tools?.fromCache ?? false,
        required: e.config.required,
        auth: e.connection?.authState ?? e.auth,
        sandboxStateMeta: e.connection?.sandboxStateMeta ?? false,
        ...(e.connection
          ? {
            startupMs: e.connection.startupTimings.initializeMs,
            firstListMs: e.connection.startupTimings.firstListMs,
          }
          : {}),
      };
    });
  }

  #toolsOf(
    e: Entry,
  ): { tools: JsonObject[]; fromCache: boolean; instructions: string | null } | null {
    let source: { tools: readonly JsonObject[]; instructions: string | null; fromCache: boolean };
    if (e.state === "ready" && e.connection) {
      source = {
        tools: e.connection.tools,
        instructions: e.connection.instructions,
        fromCache: false,
      };
    } else if ((e.state === "starting" || e.state === "failed") && e.cached) {
      source = { tools: e.cached.tools, instructions: e.cached.instructions, fromCache: true };
    } else return null;
    return {
      tools: source.tools.filter((t) => toolAllowed(e.config, String(t.name))),
      fromCache: source.fromCache,
      instructions: source.instructions,
    };
  }

  /**
   * The tools on offer now: those of ready servers, and of starting servers
   * the cached ones — all named together, so names are unique across servers.
   */
  listTools(): McpToolInfo[] {
    this.#listed ??= this.#nameTools();
    return [...this.#listed];
  }

  #nameTools(): McpToolInfo[] {
    const byKey = new Map<
      string,
      { entry: Entry; tool: JsonObject; fromCache: boolean; instructions: string | null }
    >();
    for (const e of this.#entries.values()) {
      const tools = this.#toolsOf(e);
      for (const tool of tools?.tools ?? []) {
        byKey.set(`${e.config.name}\0${tool.name}`, {
          entry: e,
          tool,
          fromCache: tools!.fromCache,
          instructions: tools!.instructions,
        });
      }
    }
    return qualifyToolNames(
      [...byKey.values()].map((v) => ({ server: v.entry.config.name, tool: String(v.tool.name) })),
    ).map((q) => {
      const v = byKey.get(`${q.server}\0${q.tool}`)!;
      return {
        qualifiedName: q.qualifiedName,
        server: q.server,
        tool: q.tool,
        definition: v.tool,
        fromCache: v.fromCache,
        serverInstructions: v.instructions,
      };
    });
  }

  /** The connection of `server`, waiting for a start in progress. */
  async #connection(server: string): Promise<{ entry: Entry; connection: ServerConnection }> {
    if (this.#shutdown) throw new Error("MCP runtime is shut down");
    const entry = this.#entries.get(server);
    if (!entry) throw unknownServer(server);
    if (entry.state === "disabled") throw new Error(`MCP server '${server}' is disabled`);
    if (entry.state === "starting") await entry.started?.catch(() => {});
    if (entry.state === "ready" && entry.connection) return { entry, connection: entry.connection };
    throw new Error(entry.error ?? `MCP server '${server}' is ${entry.state}`);
  }

  /** Waits for one server's start; throws its failure. */
  async waitReady(server: string): Promise<void> {
    await this.#connection(server);
  }

  /** `serverInfo` of a server (live, or cached while it starts). */
  serverInfo(server: string): JsonObject | null {
    const entry = this.#entries.get(server);
    if (!entry) throw unknownServer(server);
    return entry.connection?.serverInfo ?? entry.cached?.serverInfo ?? null;
  }

  /**
   * Calls a tool by its qualified name (`mcp__s__t`) or by `{server, tool}`.
   * Waits for the server's start; checks the tool filter again; applies
   * the server's `tool_timeout_sec` unless `timeoutMs` is given.
   */
  async callTool(
    name: string | { server: string; tool: string },
    args: unknown = {},
    options: { meta?: unknown; timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<JsonObject> {
    let target: { server: string; tool: string };
    if (typeof name === "string") {
      const found = this.listTools().find((t) => t.qualifiedName === name);
      if (!found) {
        // Not offered yet (starting without a cache): wait for the starts.
        await this.#complete;
        const late = this.listTools().find((t) => t.qualifiedName === name);
        if (!late) throw new Error(`unknown MCP tool '${name}'`);
        target = late;
      } else target = found;
    } else target = name;
    if (!isObject(args)) {
      throw new Error(`MCP tool arguments must be a JSON object, got ${JSON.stringify(args)}`);
    }
    if (options.meta !== undefined && !isObject(options.meta)) {
      throw new Error(
        `MCP tool request _meta must be a JSON object, got ${JSON.stringify(options.meta)}`,
      );
    }
    const { entry, connection } = await this.#connection(target.server);
    if (!toolAllowed(entry.config, target.tool)) {
      throw new Error(`tool '${target.tool}' is disabled for MCP server '${target.server}'`);
    }
    let meta = options.meta as JsonObject | undefined;
    const sandbox = connection.sandboxStateMeta ? this.#options.sandboxState?.() : undefined;
    if (sandbox !== undefined) meta = { ...meta, [SANDBOX_STATE_META]: sandbox };
    const metrics = this.#options.metrics;
    const started = performance.now();
    let result: "success" | "tool_error" | "error" = "error";
    try {
      const answer = await this.#guarded(
        entry,
        connection,
        () =>
          connection.callTool(target.tool, args, {
            timeoutMs: options.timeoutMs ?? entry.config.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
            ...(meta !== undefined ? { meta } : {}),
            ...(options.signal ? { signal: options.signal } : {}),
          }),
      );
      result = answer.isError === true ? "tool_error" : "success";
      return answer;
    } finally {
      metrics?.toolCall(target.server, result, (performance.now() - started) / 1000);
    }
  }

  /**
   * Runs a request of a ready server. When its login is gone for good (the
   * refresh refused, nobody to ask), the server becomes `failed` with how
   * to log in — later calls fail at once instead of asking again.
   */
  async #guarded<T>(
    entry: Entry,
    connection: ServerConnection,
    request: () => Promise<T>,
  ): Promise<T> {
    try {
      return await request();
    } catch (error) {
      if (error instanceof McpLoginRequiredError && entry.connection === connection) {
        entry.auth = connection.authState;
        entry.connection = null;
        this.#options.metrics?.lost(entry.config.name, "login_required");
        this.#logger.warn("mcp.login_required", { server: entry.config.name });
        this.#set(entry, "failed", error.message);
        this.#toolsChanged();
        void connection.close();
      }
      throw error;
    }
  }

  async #request(
    server: string,
    method: Parameters<ServerConnection["request"]>[0],
    params: JsonObject,
    signal?: AbortSignal,
  ): Promise<JsonObject> {
    const { entry, connection } = await this.#connection(server);
    return await this.#guarded(entry, connection, () =>
      connection.request(method, params, {
        timeoutMs: entry.config.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
        ...(signal ? { signal } : {}),
      }));
  }

  /** `resources/list` of one server (one page; pass `cursor` for the next). */
  listResources(server: string, cursor?: string): Promise<JsonObject> {
    return this.#request(server, "resources/list", cursor !== undefined ? { cursor } : {});
  }

  /** `resources/templates/list` of one server. */
  listResourceTemplates(server: string, cursor?: string): Promise<JsonObject> {
    return this.#request(
      server,
      "resources/templates/list",
      cursor !== undefined ? { cursor } : {},
    );
  }

  /** `resources/read`. */
  readResource(server: string, uri: string): Promise<JsonObject> {
    return this.#request(server, "resources/read", { uri });
  }

  /** `prompts/list` of one server. */
  listPrompts(server: string, cursor?: string): Promise<JsonObject> {
    return this.#request(server, "prompts/list", cursor !== undefined ? { cursor } : {});
  }

  /** `prompts/get`. */
  getPrompt(server: string, name: string, args: Record<string, string> = {}): Promise<JsonObject> {
    return this.#request(server, "prompts/get", { name, arguments: args });
  }

  /** Cancels starts in progress, stops every server, closes environment connections. */
  shutdown(): Promise<void> {
    this.#shutdown ??= (async () => {
      this.#cancel.abort(new Error("MCP startup cancelled"));
      const entries = [...this.#entries.values()];
      await Promise.allSettled(entries.map((e) => e.started));
      await Promise.allSettled(entries.map((e) => e.connection?.close()));
      for (const e of entries) e.connection = null;
      this.#listed = null;
      await this.#complete;
      await this.#pool.close();
    })();
    return this.#shutdown;
  }

  /** Same as {@linkcode shutdown}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}
