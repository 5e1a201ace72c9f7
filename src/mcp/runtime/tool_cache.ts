/**
 * The tool snapshot of each server's last successful start, on disk under
 * the Codex home (`cache/mcp_tools/SERVER-KEY.json`), so a harness can offer
 * a server's tools while it is still starting. The key is a hash of what
 * decides which server answers — transport, command, arguments,
 * environment, URL, headers, placement — so a changed configuration never
 * serves another server's tools. Files carry a schema version; anything
 * unreadable, oversized or of another shape is ignored (and replaced at the
 * next successful start). Writes go to a temporary file renamed into place.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { isRecord } from "../../util/record.ts";
import { readBoundedFile, writePrivateFileAtomic } from "../../util/private_file.ts";
import type { McpServerConfig } from "./config.ts";

/** Version of the file layout. */
export const TOOL_CACHE_SCHEMA_VERSION = 1;
/** Largest cache file read. */
const MAX_CACHE_BYTES = 16 * 1024 * 1024;

/** What is cached for one server. */
export interface ToolSnapshot {
  /** The server's `initialize` result `serverInfo`. */
  readonly serverInfo: Record<string, unknown> | null;
  /** The server's instructions. */
  readonly instructions: string | null;
  /** Its tools as listed (after the trust boundary, before filtering). */
  readonly tools: ReadonlyArray<Record<string, unknown>>;
  /** When it was taken (ms since the epoch). */
  readonly savedAtMs: number;
}

/** The cache key of a server's configuration. */
export function toolCacheKey(config: McpServerConfig): string {
  const identity = JSON.stringify([config.name, config.environmentId, config.transport]);
  return createHash("sha256").update(identity).digest("hex").slice(0, 16);
}

/** Snapshots in one directory. */
export class ToolCache {
  readonly #dir: string;

  /** Snapshots in `dir` (created on first write). */
  constructor(dir: string) {
    this.#dir = dir;
  }

  /** The directory for a Codex home. */
  static inCodexHome(codexHome: string): ToolCache {
    return new ToolCache(`${codexHome.replace(/\/+$/, "")}/cache/mcp_tools`);
  }

  #path(config: McpServerConfig): string {
    return `${this.#dir}/${config.name}-${toolCacheKey(config)}.json`;
  }

  /** The snapshot for `config`, or null. */
  async read(config: McpServerConfig): Promise<ToolSnapshot | null> {
    let bytes: Uint8Array | null;
    try {
      bytes = await readBoundedFile(this.#path(config), MAX_CACHE_BYTES);
    } catch {
      return null;
    }
    if (bytes === null) return null;
    try {
      const data = JSON.parse(new TextDecoder().decode(bytes));
      if (
        !isRecord(data) || data.schema_version !== TOOL_CACHE_SCHEMA_VERSION ||
        data.server !== config.name || data.key !== toolCacheKey(config) ||
        !Array.isArray(data.tools) || !data.tools.every((t) =>
          isRecord(t) && typeof t.name === "string"
        )
      ) {
        return null;
      }
      return {
        serverInfo: isRecord(data.server_info) ? data.server_info : null,
        instructions: typeof data.instructions === "string" ? data.instructions : null,
        tools: data.tools as Array<Record<string, unknown>>,
        savedAtMs: typeof data.saved_at_ms === "number" ? data.saved_at_ms : 0,
      };
    } catch {
      return null;
    }
  }

  /** Saves `snapshot` for `config`. */
  async write(config: McpServerConfig, snapshot: ToolSnapshot): Promise<void> {
    await writePrivateFileAtomic(
      this.#path(config),
      JSON.stringify({
        schema_version: TOOL_CACHE_SCHEMA_VERSION,
        server: config.name,
        key: toolCacheKey(config),
        saved_at_ms: snapshot.savedAtMs,
        server_info: snapshot.serverInfo,
        instructions: snapshot.instructions,
        tools: snapshot.tools,
      }),
    );
  }
}
