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
import { spawnRemoteMcpChild } from "../remote_child.ts";
import { childMcpTransport } from "../stdio_transport.ts";
import { loadMcpClientSdk, type Transport } from "../sdk.ts";
import type { McpServerSpec } from "../server_spec.ts";
import type { McpServerConfig } from "./config.ts";
import { stripConnectorMeta } from "./connector_meta.ts";
import { httpMcpTransport } from "./http_transport.ts";
import type { EnvironmentPool, McpPlacement } from "./placement.ts";

type Client = InstanceType<typeof import("@modelcontextprotocol/sdk/client").Client>;

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

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

/** A connected MCP server. */
export class ServerConnection {
  readonly #client: Client;
  readonly #config: McpServerConfig;
  readonly #deadlines = new Set<Deadline>();
  #waitingOnHarness = 0;
  #tools: JsonObject[] = [];
  #closing: Promise<void> | null = null;

  private constructor(client: Client, config: McpServerConfig) {
    this.#client = client;
    this.#config = config;
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
    const capabilities: JsonObject = {};
    if (options.onElicitation) capabilities.elicitation = { form: { applyDefaults: true } };
    if (options.onSampling) capabilities.sampling = {};
    const client = new sdk.client.Client(
      { ...options.clientInfo },
      { capabilities },
    ) as Client;
    const connection = new ServerConnection(client, options.config);
    connection.#answer(sdk.types.ElicitRequestSchema, options.onElicitation);
    connection.#answer(sdk.types.CreateMessageRequestSchema, options.onSampling);
    client.setNotificationHandler(sdk.types.ToolListChangedNotificationSchema, async () => {
      try {
        connection.#tools = await connection.#listTools(trusted, options.startupTimeoutMs);
        options.onToolsChanged?.();
      } catch (error) {
        options.logger.warn("mcp.tools_relist_failed", {
          server: options.config.name,
          error: (error as Error).message,
        });
      }
    });

    const deadline = new Deadline(options.startupTimeoutMs, false, () => new StartupTimeout());
    const abort = () => deadline.controller.abort(options.signal!.reason);
    options.signal?.addEventListener("abort", abort, { once: true });
    let transport: Transport | null = null;
    try {
      options.signal?.throwIfAborted();
      transport = await race(openTransport(options), deadline.controller.signal, (t) => t.close());
      client.onclose = () => {
        if (!connection.#closing) options.onClosed?.("MCP server closed the connection");
      };
      await client.connect(transport, {
        signal: deadline.controller.signal,
        timeout: NO_SDK_TIMEOUT,
      });
      connection.#tools = await connection.#listTools(trusted, NO_SDK_TIMEOUT, deadline);
      return connection;
    } catch (error) {
      const reason = deadline.controller.signal.aborted ? deadline.controller.signal.reason : error;
      connection.#closing = Promise.resolve();
      await client.close().catch(() => {});
      await transport?.close().catch(() => {});
      throw reason;
    } finally {
      deadline.clear();
      options.signal?.removeEventListener("abort", abort);
    }
  }

  #answer(
    schema: Parameters<Client["setRequestHandler"]>[0],
    callback: ((request: McpServerRequest) => Promise<JsonObject> | JsonObject) | undefined,
  ): void {
    if (!callback) return;
    this.#client.setRequestHandler(schema, async (request, extra) => {
      if (this.#waitingOnHarness++ === 0) { for (const d of this.#deadlines) d.pause(); }
      try {
        return await callback({
          server: this.#config.name,
          params: (request.params ?? {}) as JsonObject,
          signal: extra.signal,
        }) as never;
      } finally {
        if (--this.#waitingOnHarness === 0) { for (const d of this.#deadlines) d.resume(); }
      }
    });
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
      async (signal) =>
        await this.#client.callTool(
          { name: tool, arguments: args, ...(options.meta ? { _meta: options.meta } : {}) },
          undefined,
          { signal, timeout: NO_SDK_TIMEOUT },
        ) as JsonObject,
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
    return this.#timed(method, options.timeoutMs, options.signal, async (signal) => {
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
    });
  }

  /** Closes the client and the transport (stopping the server). */
  close(): Promise<void> {
    this.#closing ??= this.#client.close().catch(() => {});
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

/** Starts the server's process (or prepares its HTTP transport). */
async function openTransport(options: ServerConnectionOptions): Promise<Transport> {
  const { config, placement, logger, hostEnv } = options;
  const environment = placement.kind === "remote"
    ? await options.pool.client(placement.environmentId)
    : undefined;
  if (config.transport.type === "streamable_http") {
    return await httpMcpTransport(config, {
      hostEnv,
      logger,
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
