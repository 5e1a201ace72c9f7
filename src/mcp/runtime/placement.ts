/**
 * Where each MCP server runs. A runtime context names the environments
 * servers may be placed in — `local` is the harness's own machine; any
 * other name is an exec-server (by URL, stdio command, relay rendezvous or
 * an already connected client) — plus the fallback working directory.
 * The rules, with Codex's wording:
 *
 * - `local` stdio needs a local environment ("local stdio MCP server `X`
 *   requires a local environment"); `local` HTTP needs none;
 * - an environment id nobody defined fails ("MCP server `X` references
 *   unknown environment id `Y`");
 * - a remote stdio server needs an absolute cwd (its own or the fallback).
 *
 * One connection per environment is shared by every server placed in it,
 * opened at first use; connections the pool opened it also closes.
 *
 * @module
 */

import { connect, type ConnectOptions, ExecServerClient } from "../../client/client.ts";
import { LOCAL_ENVIRONMENT_ID, type McpServerConfig } from "./config.ts";

/** How to reach an environment. */
export type McpEnvironmentTarget =
  | ExecServerClient
  | ConnectOptions
  | (() => Promise<ExecServerClient>);

/** Where servers may run. */
export interface McpRuntimeContext {
  /** Named exec-server environments (`local` is reserved for this machine). */
  readonly environments?: Readonly<Record<string, McpEnvironmentTarget>>;
  /** Whether stdio servers may run on this machine. Default true. */
  readonly localStdio?: boolean;
  /** Working directory for servers configured without one. */
  readonly fallbackCwd?: string;
  /** Where named variables are read (bearer tokens, `env_vars`). Default: this process's. */
  readonly hostEnv?: Readonly<Record<string, string>>;
}

/** A server's resolved place. */
export type McpPlacement =
  | { readonly kind: "local" }
  | {
    readonly kind: "remote";
    readonly environmentId: string;
    /** The stdio server's working directory on the exec-server. */
    readonly cwd: string | null;
  };

function absolute(path: string): boolean {
  return path.startsWith("/") || /^file:\/\//.test(path);
}

/** Applies the placement rules to one server. Throws with the reference's text. */
export function resolvePlacement(
  config: McpServerConfig,
  context: McpRuntimeContext,
): McpPlacement {
  const stdio = config.transport.type === "stdio";
  if (config.environmentId === LOCAL_ENVIRONMENT_ID) {
    if (stdio && context.localStdio === false) {
      throw new Error(`local stdio MCP server \`${config.name}\` requires a local environment`);
    }
    return { kind: "local" };
  }
  if (!Object.hasOwn(context.environments ?? {}, config.environmentId)) {
    throw new Error(
      `MCP server \`${config.name}\` references unknown environment id \`${config.environmentId}\``,
    );
  }
  if (!stdio) return { kind: "remote", environmentId: config.environmentId, cwd: null };
  const cwd = (config.transport.type === "stdio" ? config.transport.cwd : null) ??
    context.fallbackCwd;
  if (cwd === undefined) {
    throw new Error(`remote stdio MCP server \`${config.name}\` requires an absolute cwd`);
  }
  if (!absolute(cwd)) {
    throw new Error(
      `remote stdio MCP server \`${config.name}\` requires an absolute cwd, got \`${cwd}\``,
    );
  }
  return { kind: "remote", environmentId: config.environmentId, cwd };
}

/** Lazily opened, shared connections to the context's environments. */
export class EnvironmentPool {
  readonly #targets: Readonly<Record<string, McpEnvironmentTarget>>;
  readonly #open = new Map<string, Promise<ExecServerClient>>();
  readonly #owned = new Set<string>();

  /** @param targets the context's environments. */
  constructor(targets: Readonly<Record<string, McpEnvironmentTarget>> = {}) {
    if (Object.hasOwn(targets, LOCAL_ENVIRONMENT_ID)) {
      throw new Error(`environment id \`${LOCAL_ENVIRONMENT_ID}\` is reserved for this machine`);
    }
    this.#targets = targets;
  }

  /** The client of environment `id` (connecting at first use). */
  client(id: string): Promise<ExecServerClient> {
    let opened = this.#open.get(id);
    if (!opened) {
      const target = this.#targets[id];
      if (target === undefined) {
        return Promise.reject(new Error(`unknown environment id \`${id}\``));
      }
      if (target instanceof ExecServerClient) opened = Promise.resolve(target);
      else {
        this.#owned.add(id);
        opened = typeof target === "function" ? target() : connect(target);
        // A failed connection is retried by the next server that needs it.
        opened.catch(() => this.#open.delete(id));
      }
      this.#open.set(id, opened);
    }
    return opened;
  }

  /** Closes the connections this pool opened. */
  async close(): Promise<void> {
    const owned = [...this.#owned].map((id) => this.#open.get(id)).filter((p) => p !== undefined);
    this.#open.clear();
    this.#owned.clear();
    await Promise.allSettled(owned.map(async (p) => (await p).close()));
  }
}
