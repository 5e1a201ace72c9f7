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
 * silently exposes every tool). One server's problem never disables the
 * others: {@linkcode parseMcpServers} keeps a server whose table is wrong
 * (a bad name, an unknown key, a wrong type) with its `problem`, and the
 * runtime fails only that server, before anything of it runs.
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

/** A server's OAuth settings: Codex's `scopes`, `oauth_resource` and `[mcp_servers.NAME.oauth]`. */
export interface McpServerOAuthConfig {
  /** `scopes`: requested instead of what the server advertises. */
  readonly scopes: readonly string[] | null;
  /** `oauth_resource`: the resource indicator (RFC 8707) to send instead of the server URL. */
  readonly resource: string | null;
  /** `oauth.client_id`: a pre-registered client (no registration). */
  readonly clientId: string | null;
  /** `oauth.client_secret`: its secret (confidential clients). */
  readonly clientSecret: string | null;
  /** `oauth.callback_port`: the login's callback port (wins over `mcp_oauth_callback_port`). */
  readonly callbackPort: number | null;
  /**
   * `oauth.client_metadata_url` (this runtime's key; Codex ignores it): an
   * HTTPS URL serving this client's metadata document, used as the client ID
   * where the authorization server supports client ID metadata documents.
   */
  readonly clientMetadataUrl: string | null;
  /**
   * `oauth.grant_type` (this runtime's key): `authorization_code` (a
   * person logs in, the default) or `client_credentials` (a machine
   * client: `client_id` with `client_secret` or `private_key_file`, tokens
   * fetched without a login).
   */
  readonly grantType: "authorization_code" | "client_credentials";
  /**
   * `oauth.private_key_file` (this runtime's key): a PEM private key the
   * client authenticates with (`private_key_jwt`) in the client-credentials
   * grant.
   */
  readonly privateKeyFile: string | null;
  /** `oauth.signing_algorithm`: the JWT algorithm of that key (default `RS256`). */
  readonly signingAlgorithm: string | null;
}

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
  /** OAuth settings (HTTP servers). */
  readonly oauth: McpServerOAuthConfig;
  /** Keys this runtime keeps but does not act on (approval modes, …). */
  readonly extra: Readonly<Record<string, unknown>>;
  /**
   * Why this server's table is not valid: set by {@linkcode parseMcpServers}
   * instead of failing the whole configuration. The runtime fails the server
   * with this error before anything of it runs; the other fields are then
   * only what could be read (for listing).
   */
  readonly problem?: McpConfigError;
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

  /** The error on one line (`DETAIL in \`PATH\``), as status tables show it. */
  get line(): string {
    return `${this.detail} in \`${this.path}\``;
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
/** Codex keys kept as they are (approvals, …). */
const PASSTHROUGH_KEYS = [
  "default_tools_approval_mode",
  "tools",
  "startup_readiness",
  "tool_input_schema_max_bytes",
] as const;
const OAUTH_KEYS = ["scopes", "oauth", "oauth_resource", "auth"] as const;
const KNOWN_KEYS: readonly string[] = [
  ...STDIO_KEYS,
  ...HTTP_KEYS,
  "bearer_token",
  ...SHARED_KEYS,
  ...OAUTH_KEYS,
  ...PASSTHROUGH_KEYS,
];
/** `auth` variants Codex knows; this runtime runs the first. */
const AUTH_VARIANTS = ["oauth", "chatgpt", "ema_auth"] as const;
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

function u16(value: TomlValue, path: string): number {
  if (typeof value !== "bigint") throw invalidType(value, "u16", path);
  if (value < 0n || value > 65535n) {
    throw new McpConfigError(`invalid value: integer \`${value}\`, expected u16`, path);
  }
  return Number(value);
}

/** `[mcp_servers.NAME.oauth]` and its siblings, with Codex's checks and wording. */
function oauthConfig(
  get: (key: string) => TomlValue | undefined,
  at: (key: string) => string,
  table: string,
): McpServerOAuthConfig {
  const raw = get("oauth");
  let clientId: string | null = null;
  let clientSecret: string | null = null;
  let callbackPort: number | null = null;
  let clientMetadataUrl: string | null = null;
  let grantType: McpServerOAuthConfig["grantType"] = "authorization_code";
  let privateKeyFile: string | null = null;
  let signingAlgorithm: string | null = null;
  if (raw !== undefined) {
    if (!isTable(raw)) throw invalidType(raw, "struct McpServerOAuthConfig", at("oauth"));
    const field = <T>(key: string, read: (v: TomlValue, path: string) => T): T | null =>
      Object.hasOwn(raw, key) ? read(raw[key]!, `${at("oauth")}.${key}`) : null;
    clientId = field("client_id", str);
    clientSecret = field("client_secret", str);
    callbackPort = field("callback_port", u16);
    clientMetadataUrl = field("client_metadata_url", str);
    privateKeyFile = field("private_key_file", str);
    signingAlgorithm = field("signing_algorithm", str);
    const grant = field("grant_type", str);
    if (grant !== null) {
      if (grant !== "authorization_code" && grant !== "client_credentials") {
        throw new McpConfigError(
          `unknown variant \`${grant}\`, expected \`authorization_code\` or \`client_credentials\``,
          `${at("oauth")}.grant_type`,
        );
      }
      grantType = grant;
    }
    if (grantType === "client_credentials") {
      if (clientId === null) {
        throw new McpConfigError(
          'oauth.grant_type = "client_credentials" requires oauth.client_id',
          table,
        );
      }
      if ((clientSecret === null) === (privateKeyFile === null)) {
        throw new McpConfigError(
          'oauth.grant_type = "client_credentials" requires one of oauth.client_secret and oauth.private_key_file',
          table,
        );
      }
    } else if (privateKeyFile !== null || signingAlgorithm !== null) {
      throw new McpConfigError(
        'oauth.private_key_file and oauth.signing_algorithm require oauth.grant_type = "client_credentials"',
        table,
      );
    }
    field("callback_url", str);
    if (field("token_endpoint_auth_method", str) !== null) {
      throw new McpConfigError(
        'oauth.token_endpoint_auth_method requires auth = "ema_auth"',
        table,
      );
    }
    if (field("authorization_server_issuer", str) !== null) {
      throw new McpConfigError(
        'oauth.authorization_server_issuer requires auth = "ema_auth"',
        table,
      );
    }
    if (clientSecret !== null && clientId === null) {
      throw new McpConfigError("oauth.client_secret requires oauth.client_id", table);
    }
    if (clientSecret === "") {
      throw new McpConfigError("oauth.client_secret must not be empty", table);
    }
  }
  const auth = get("auth");
  if (auth !== undefined) {
    const variant = str(auth, at("auth"));
    if (!(AUTH_VARIANTS as readonly string[]).includes(variant)) {
      throw new McpConfigError(
        `unknown variant \`${variant}\`, expected one of ${
          AUTH_VARIANTS.map((v) => `\`${v}\``).join(", ")
        }`,
        at("auth"),
      );
    }
    if (variant !== "oauth") {
      throw new McpConfigError(`auth = "${variant}" is not supported by this runtime`, at("auth"));
    }
  }
  const scopes = get("scopes");
  const resource = get("oauth_resource");
  return {
    scopes: scopes === undefined ? null : strings(scopes, at("scopes")),
    resource: resource === undefined ? null : str(resource, at("oauth_resource")),
    clientId,
    clientSecret,
    callbackPort,
    clientMetadataUrl,
    grantType,
    privateKeyFile,
    signingAlgorithm,
  };
}

/** No OAuth settings. */
const NO_OAUTH: McpServerOAuthConfig = {
  scopes: null,
  resource: null,
  clientId: null,
  clientSecret: null,
  callbackPort: null,
  clientMetadataUrl: null,
  grantType: "authorization_code",
  privateKeyFile: null,
  signingAlgorithm: null,
};

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
    oauth: transport.type === "streamable_http" ? oauthConfig(get, at, table) : NO_OAUTH,
    extra,
  };
}

/**
 * What can be read of a table that does not parse: enough to list it (its
 * command or URL) beside its problem. It never starts.
 */
function invalidServer(name: string, value: TomlValue, problem: McpConfigError): McpServerConfig {
  const table = isTable(value) ? value : {};
  const text = (key: string) =>
    Object.hasOwn(table, key) && typeof table[key] === "string" ? table[key] as string : null;
  const url = text("url");
  const transport: McpTransportConfig = url !== null && text("command") === null
    ? {
      type: "streamable_http",
      url,
      bearerTokenEnvVar: null,
      httpHeaders: null,
      envHttpHeaders: null,
    }
    : {
      type: "stdio",
      command: text("command") ?? "",
      args: [],
      env: null,
      envVars: [],
      cwd: null,
    };
  return {
    name,
    transport,
    environmentId: text("environment_id") ?? LOCAL_ENVIRONMENT_ID,
    enabled: !(Object.hasOwn(table, "enabled") && table.enabled === false),
    required: Object.hasOwn(table, "required") && table.required === true,
    supportsParallelToolCalls: false,
    startupTimeoutMs: null,
    toolTimeoutMs: null,
    enabledTools: null,
    disabledTools: null,
    oauth: NO_OAUTH,
    extra: {},
    problem,
  };
}

/**
 * Every server of a merged configuration's `mcp_servers` table, in table
 * order. A server whose table does not parse is kept with its `problem`
 * (the runtime fails it alone); only an `mcp_servers` that is not a table
 * throws.
 */
export function parseMcpServers(config: TomlTable): McpServerConfig[] {
  if (!Object.hasOwn(config, "mcp_servers")) return [];
  const servers = config.mcp_servers!;
  if (!isTable(servers)) throw invalidType(servers, "a map", "mcp_servers");
  return Object.entries(servers).map(([name, table]) => {
    try {
      return parseMcpServerConfig(name, table);
    } catch (error) {
      if (!(error instanceof McpConfigError)) throw error;
      return invalidServer(name, table, error);
    }
  });
}

/** Where OAuth credentials are kept (`mcp_oauth_credentials_store`). */
export type McpCredentialsStoreMode = "auto" | "file" | "keyring";

/** The configuration's OAuth settings for every server (top-level keys). */
export interface McpOAuthSettings {
  /** `mcp_oauth_credentials_store` (default `auto`). */
  readonly credentialsStore: McpCredentialsStoreMode;
  /** `mcp_oauth_callback_port`: the login callback's port (default: any free port). */
  readonly callbackPort: number | null;
  /** `mcp_oauth_callback_url`: the redirect URI's base, when the browser reaches it elsewhere. */
  readonly callbackUrl: string | null;
  /** Why these keys are not valid: every OAuth use fails with it. */
  readonly problem?: McpConfigError;
}

const STORE_MODES: readonly McpCredentialsStoreMode[] = ["auto", "file", "keyring"];

/** The top-level `mcp_oauth_*` keys of a merged configuration. */
export function parseMcpOAuthSettings(config: TomlTable): McpOAuthSettings {
  const get = (key: string) => Object.hasOwn(config, key) ? config[key] : undefined;
  try {
    const mode = get("mcp_oauth_credentials_store");
    let credentialsStore: McpCredentialsStoreMode = "auto";
    if (mode !== undefined) {
      const value = str(mode, "mcp_oauth_credentials_store");
      if (!(STORE_MODES as readonly string[]).includes(value)) {
        throw new McpConfigError(
          `unknown variant \`${value}\`, expected one of \`auto\`, \`file\`, \`keyring\``,
          "mcp_oauth_credentials_store",
        );
      }
      credentialsStore = value as McpCredentialsStoreMode;
    }
    const port = get("mcp_oauth_callback_port");
    const url = get("mcp_oauth_callback_url");
    return {
      credentialsStore,
      callbackPort: port === undefined ? null : u16(port, "mcp_oauth_callback_port"),
      callbackUrl: url === undefined ? null : str(url, "mcp_oauth_callback_url"),
    };
  } catch (error) {
    if (!(error instanceof McpConfigError)) throw error;
    return { credentialsStore: "auto", callbackPort: null, callbackUrl: null, problem: error };
  }
}

/** The tool filter: `enabled_tools` (when set) and not `disabled_tools`. */
export function toolAllowed(config: McpServerConfig, tool: string): boolean {
  return (config.enabledTools === null || config.enabledTools.includes(tool)) &&
    !(config.disabledTools ?? []).includes(tool);
}
