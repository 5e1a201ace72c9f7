/**
 * MCP server configurations in Codex's shape: one `[mcp_servers.NAME]`
 * table per server, stdio when it has `command`, Streamable HTTP when it has
 * `url`. Values are checked the way Codex's deserialiser checks them, with
 * its wording (`invalid type: integer \`5\`, expected a string`, `args is not
 * supported for streamable_http`, `invalid transport`), followed by the key
 * path (`in \`mcp_servers.NAME.KEY\``).
 *
 * Stricter than the reference: a key Codex does not know is an error naming
 * the table and the key (Codex ignores it, so a typo such as `enabled_tool`
 * silently exposes every tool), and server names are checked when the
 * configuration is read, not when the server starts.
 *
 * @module
 */

import { isTable, type TomlTable, type TomlValue } from "../../codex_config/toml_write.ts";
import type { McpEnvVar } from "../server_spec.ts";
import { MCP_SERVER_NAME } from "../server_spec.ts";

/** The environment id of servers run by the harness itself. */
export const LOCAL_ENVIRONMENT_ID = "local";
/** Startup (`initialize` + first `tools/list`) timeout when none is configured. */
export const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;
/** Tool call timeout when none is configured. */
export const DEFAULT_TOOL_TIMEOUT_MS = 300_000;

/** How a server is reached. */
export type McpTransportConfig =
  | {
    /** A child speaking MCP on its stdio. */
    readonly type: "stdio";
    /** Program. */
    readonly command: string;
    /** Arguments. */
    readonly args: readonly string[];
    /** Literal variables. */
    readonly env: Readonly<Record<string, string>> | null;
    /** Variables passed through by name. */
    readonly envVars: ReadonlyArray<string | McpEnvVar>;
    /** Working directory. */
    readonly cwd: string | null;
  }
  | {
    /** A Streamable HTTP endpoint. */
    readonly type: "streamable_http";
    /** Endpoint URL. */
    readonly url: string;
    /** Variable holding the bearer token. */
    readonly bearerTokenEnvVar: string | null;
    /** Static headers. */
    readonly httpHeaders: Readonly<Record<string, string>> | null;
    /** Header name → variable holding its value. */
    readonly envHttpHeaders: Readonly<Record<string, string>> | null;
  };

/** One configured MCP server. */
export interface McpServerConfig {
  /** The table name (`^[a-zA-Z0-9_-]+$`). */
  readonly name: string;
  /** How it is reached. */
  readonly transport: McpTransportConfig;
  /** The environment it runs in (or, for HTTP, sends its requests from). */
  readonly environmentId: string;
  /** Started at all. */
  readonly enabled: boolean;
  /** A failed start fails the whole runtime. */
  readonly required: boolean;
  /** Tool calls may run concurrently (kept for harnesses; informational here). */
  readonly supportsParallelToolCalls: boolean;
  /** `startup_timeout_sec` / `startup_timeout_ms`, in ms (null: default). */
  readonly startupTimeoutMs: number | null;
  /** `tool_timeout_sec` in ms (null: default). */
  readonly toolTimeoutMs: number | null;
  /** Only these raw tool names, when set. */
  readonly enabledTools: readonly string[] | null;
  /** Never these raw tool names. */
  readonly disabledTools: readonly string[] | null;
  /** Keys this runtime keeps but does not act on (approval modes, OAuth…). */
  readonly extra: Readonly<Record<string, unknown>>;
}

/** A configuration that does not have Codex's shape. */
export class McpConfigError extends Error {
  /** The TOML key path the problem is at (`mcp_servers.a.args`). */
  readonly path: string;
  /** The problem, without the path. */
  readonly detail: string;
  /** A problem `detail` at key path `path`. */
  constructor(detail: string, path: string) {
    super(`${detail}\nin \`${path}\``);
    this.name = "McpConfigError";
    this.path = path;
    this.detail = detail;
  }
}

const STDIO_KEYS = ["command", "args", "env", "env_vars", "cwd"] as const;
const HTTP_KEYS = [
  "url",
  "bearer_token_env_var",
  "http_headers",
  "env_http_headers",
  "http_headers_helper",
] as const;
const SHARED_KEYS = [
  "environment_id",
  "experimental_environment",
  "enabled",
  "required",
  "supports_parallel_tool_calls",
  "startup_timeout_sec",
  "startup_timeout_ms",
  "tool_timeout_sec",
  "enabled_tools",
  "disabled_tools",
  "name",
] as const;
/** Codex keys kept as they are (approvals, OAuth, …). */
const PASSTHROUGH_KEYS = [
  "default_tools_approval_mode",
  "tools",
  "scopes",
  "oauth",
  "oauth_resource",
  "auth",
  "startup_readiness",
  "tool_input_schema_max_bytes",
] as const;
const KNOWN_KEYS: readonly string[] = [
  ...STDIO_KEYS,
  ...HTTP_KEYS,
  "bearer_token",
  ...SHARED_KEYS,
  ...PASSTHROUGH_KEYS,
];
/** Keys of one transport that the other rejects, in Codex's order. */
const NOT_FOR_STDIO = [
  "url",
  "bearer_token_env_var",
  "bearer_token",
  "http_headers",
  "env_http_headers",
  "http_headers_helper",
  "oauth",
  "oauth_resource",
];
const NOT_FOR_HTTP = ["args", "env", "env_vars", "cwd", "bearer_token"];

/** serde's description of an unexpected value. */
function unexpected(value: TomlValue): string {
  if (typeof value === "string") return `string ${JSON.stringify(value)}`;
  if (typeof value === "bigint") return `integer \`${value}\``;
  if (typeof value === "number") {
    return `floating point \`${Number.isInteger(value) ? value.toFixed(1) : value}\``;
  }
  if (typeof value === "boolean") return `boolean \`${value}\``;
  if (value instanceof Date) return "a datetime";
  if (Array.isArray(value)) return "sequence";
  return "map";
}

function invalidType(value: TomlValue, expected: string, path: string): McpConfigError {
  return new McpConfigError(`invalid type: ${unexpected(value)}, expected ${expected}`, path);
}

function str(value: TomlValue, path: string): string {
  if (typeof value !== "string") throw invalidType(value, "a string", path);
  return value;
}

function bool(value: TomlValue, path: string): boolean {
  if (typeof value !== "boolean") throw invalidType(value, "a boolean", path);
  return value;
}

function strings(value: TomlValue, path: string): string[] {
  if (!Array.isArray(value)) throw invalidType(value, "a sequence", path);
  return value.map((v) => str(v, path));
}

function stringMap(value: TomlValue, path: string): Record<string, string> {
  if (!isTable(value)) throw invalidType(value, "a map", path);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    Object.defineProperty(out, k, { value: str(v, path), enumerable: true, writable: true });
  }
  return out;
}

function seconds(value: TomlValue, path: string): number {
  const n = typeof value === "bigint" ? Number(value) : value;
  if (typeof n !== "number") throw invalidType(value, "f64", path);
  if (n < 0) {
    throw new McpConfigError("cannot convert float seconds to Duration: value is negative", path);
  }
  if (!Number.isFinite(n)) {
    throw new McpConfigError(
      "cannot convert float seconds to Duration: value is either too big or NaN",
      path,
    );
  }
  return Math.round(n * 1000);
}

function millis(value: TomlValue, path: string): number {
  if (typeof value !== "bigint") throw invalidType(value, "u64", path);
  if (value < 0n) {
    throw new McpConfigError(`invalid value: integer \`${value}\`, expected u64`, path);
  }
  return Number(value);
}

function envVars(value: TomlValue, path: string, table: string): Array<string | McpEnvVar> {
  if (!Array.isArray(value)) throw invalidType(value, "a sequence", path);
  return value.map((entry) => {
    if (typeof entry === "string") return entry;
    if (
      isTable(entry) && typeof entry.name === "string" &&
      Object.keys(entry).every((k) => k === "name" || k === "source") &&
      (entry.source === undefined || typeof entry.source === "string")
    ) {
      const source = entry.source as string | undefined;
      if (source !== undefined && source !== "local" && source !== "remote") {
        throw new McpConfigError(
          `unsupported env_vars source \`${source}\`; expected \`local\` or \`remote\``,
          table,
        );
      }
      return source === undefined ? { name: entry.name } : { name: entry.name, source };
    }
    throw new McpConfigError(
      "data did not match any variant of untagged enum McpServerEnvVar",
      path,
    );
  });
}

/**
 * One `[mcp_servers.NAME]` table. Throws {@linkcode McpConfigError} naming
 * the key at fault.
 */
export function parseMcpServerConfig(name: string, value: TomlValue): McpServerConfig {
  const table = `mcp_servers.${name}`;
  if (!isTable(value)) throw invalidType(value, "struct RawMcpServerConfig", table);
  if (!MCP_SERVER_NAME.test(name)) {
    throw new McpConfigError(
      `Invalid MCP server name '${name}': must match pattern ^[a-zA-Z0-9_-]+$`,
      table,
    );
  }
  for (const key of Object.keys(value)) {
    if (!KNOWN_KEYS.includes(key)) {
      throw new McpConfigError(
        `unknown field \`${key}\`, expected one of ${KNOWN_KEYS.map((k) => `\`${k}\``).join(", ")}`,
        table,
      );
    }
  }
  const at = (key: string) => `${table}.${key}`;
  const get = (key: string): TomlValue | undefined =>
    Object.hasOwn(value, key) ? value[key] : undefined;
  const opt = <T>(key: string, read: (v: TomlValue, path: string) => T): T | null => {
    const v = get(key);
    return v === undefined ? null : read(v, at(key));
  };

  let transport: McpTransportConfig;
  if (get("command") !== undefined) {
    const bad = NOT_FOR_STDIO.find((k) => get(k) !== undefined);
    if (bad) throw new McpConfigError(`${bad} is not supported for stdio`, table);
    transport = {
      type: "stdio",
      command: str(get("command")!, at("command")),
      args: opt("args", strings) ?? [],
      env: opt("env", stringMap),
      envVars: get("env_vars") === undefined
        ? []
        : envVars(get("env_vars")!, at("env_vars"), table),
      cwd: opt("cwd", str),
    };
  } else if (get("url") !== undefined) {
    const bad = NOT_FOR_HTTP.find((k) => get(k) !== undefined);
    if (bad) throw new McpConfigError(`${bad} is not supported for streamable_http`, table);
    transport = {
      type: "streamable_http",
      url: str(get("url")!, at("url")),
      bearerTokenEnvVar: opt("bearer_token_env_var", str),
      httpHeaders: opt("http_headers", stringMap),
      envHttpHeaders: opt("env_http_headers", stringMap),
    };
  } else {
    throw new McpConfigError("invalid transport", table);
  }

  const environmentId = opt("environment_id", str) ?? opt("experimental_environment", str) ??
    LOCAL_ENVIRONMENT_ID;
  const startupSec = opt("startup_timeout_sec", seconds);
  const startupMs = opt("startup_timeout_ms", millis);
  const extra: Record<string, unknown> = {};
  for (const key of [...PASSTHROUGH_KEYS, "http_headers_helper"]) {
    if (get(key) !== undefined) extra[key] = get(key);
  }
  opt("name", str);
  return {
    name,
    transport,
    environmentId,
    enabled: opt("enabled", bool) ?? true,
    required: opt("required", bool) ?? false,
    supportsParallelToolCalls: opt("supports_parallel_tool_calls", bool) ?? false,
    startupTimeoutMs: startupSec ?? startupMs,
    toolTimeoutMs: opt("tool_timeout_sec", seconds),
    enabledTools: opt("enabled_tools", strings),
    disabledTools: opt("disabled_tools", strings),
    extra,
  };
}

/**
 * Every server of a merged configuration's `mcp_servers` table, in table
 * order. Throws on the first server that does not parse.
 */
export function parseMcpServers(config: TomlTable): McpServerConfig[] {
  if (!Object.hasOwn(config, "mcp_servers")) return [];
  const servers = config.mcp_servers!;
  if (!isTable(servers)) throw invalidType(servers, "a map", "mcp_servers");
  return Object.entries(servers).map(([name, table]) => parseMcpServerConfig(name, table));
}

/** The tool filter: `enabled_tools` (when set) and not `disabled_tools`. */
export function toolAllowed(config: McpServerConfig, tool: string): boolean {
  return (config.enabledTools === null || config.enabledTools.includes(tool)) &&
    !(config.disabledTools ?? []).includes(tool);
}
