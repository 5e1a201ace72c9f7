/**
 * MCP OAuth credentials where Codex keeps them when it has no keyring:
 * `$CODEX_HOME/.credentials.json` (mode 0600), one JSON object keyed
 * `NAME|HASH` per server — HASH the first 16 hex digits of the SHA-256 of
 * `{"type":"http","url":URL,"headers":{}}` — each entry Codex's
 * `{server_name, server_url, issuer, client_id, access_token, expires_at
 * (ms), refresh_token, scopes}`. So one login serves both: tokens Codex
 * stored are used here, and tokens stored here are Codex's.
 *
 * Every change is a read-modify-write under Codex's own lock
 * (`mcp-oauth-locks/file-store.lock`, an exclusive `flock`), written to a
 * temporary sibling and renamed into place. Refreshes take the server's
 * lock (`mcp-oauth-locks/SHA256(KEY).lock`), as Codex's do, so two
 * processes never spend one refresh token twice. Fields this runtime does
 * not know, and other servers' entries, are kept as they are. A file that
 * does not parse is an error naming it; tokens never appear in errors or
 * logs.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { isRecord } from "../../util/record.ts";
import { readBoundedFile, writePrivateFileAtomic } from "../../util/private_file.ts";

/** One server's stored credentials (Codex's field names). */
export interface StoredMcpCredentials {
  /** The server's configured name. */
  readonly server_name: string;
  /** The server's URL. */
  readonly server_url: string;
  /** The authorization server that issued the tokens. */
  readonly issuer?: string;
  /** The OAuth client the tokens belong to. */
  readonly client_id: string;
  /**
   * The client's secret when dynamic registration issued one (this
   * runtime's field: a refresh needs it; Codex registers public clients).
   */
  readonly client_secret?: string;
  /** The access token. */
  readonly access_token: string;
  /** When it expires, ms since the epoch. */
  readonly expires_at?: number;
  /** The refresh token. */
  readonly refresh_token?: string;
  /** The scopes granted (or requested). */
  readonly scopes: readonly string[];
}

/** The credentials file does not parse, or an entry does not have the stored shape. */
export class McpCredentialsFileError extends Error {
  /** The file. */
  readonly path: string;
  /** `problem` with the file at `path`. */
  constructor(path: string, problem: string) {
    super(`failed to parse credentials file at ${path}: ${problem}`);
    this.name = "McpCredentialsFileError";
    this.path = path;
  }
}

/** Largest credentials file read. */
const MAX_FILE_BYTES = 4 * 1024 * 1024;
const FILE_NAME = ".credentials.json";
const LOCK_DIR = "mcp-oauth-locks";

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The store key of a server, as Codex computes it. */
export function mcpCredentialsKey(serverName: string, serverUrl: string): string {
  const payload = JSON.stringify({ type: "http", url: serverUrl, headers: {} });
  return `${serverName}|${sha256Hex(payload).slice(0, 16)}`;
}

function entryProblem(value: unknown): string | null {
  if (!isRecord(value)) return "is not an object";
  for (const key of ["server_name", "server_url", "client_id", "access_token"]) {
    if (typeof value[key] !== "string") return `has no string \`${key}\``;
  }
  for (const key of ["issuer", "refresh_token", "client_secret"]) {
    if (value[key] !== undefined && value[key] !== null && typeof value[key] !== "string") {
      return `\`${key}\` is not a string`;
    }
  }
  if (
    value.expires_at !== undefined && value.expires_at !== null &&
    (typeof value.expires_at !== "number" || !Number.isFinite(value.expires_at))
  ) {
    return "`expires_at` is not a number";
  }
  if (
    value.scopes !== undefined &&
    (!Array.isArray(value.scopes) || !value.scopes.every((s) => typeof s === "string"))
  ) {
    return "`scopes` is not a list of strings";
  }
  return null;
}

/** Reads an entry as stored (nulls, as serde may write them, become absent). */
function normalise(value: Record<string, unknown>): StoredMcpCredentials {
  const out: Record<string, unknown> = { ...value, scopes: value.scopes ?? [] };
  for (const key of ["issuer", "refresh_token", "client_secret", "expires_at"]) {
    if (out[key] === null) delete out[key];
  }
  return out as unknown as StoredMcpCredentials;
}

/** The credentials file of one Codex home. */
export class McpCredentialStore {
  readonly #home: string;

  /** The store of Codex home `codexHome`. */
  constructor(codexHome: string) {
    this.#home = codexHome.replace(/\/+$/, "") || "/";
  }

  /** The credentials file. */
  get path(): string {
    return `${this.#home}/${FILE_NAME}`;
  }

  /** Every entry, by key (an empty object when there is no file). */
  async #readAll(): Promise<Record<string, unknown>> {
    let bytes: Uint8Array | null;
    try {
      bytes = await readBoundedFile(this.path, MAX_FILE_BYTES);
    } catch (error) {
      throw new McpCredentialsFileError(this.path, (error as Error).message);
    }
    if (bytes === null) return {};
    let data: unknown;
    try {
      data = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch (error) {
      throw new McpCredentialsFileError(this.path, (error as Error).message);
    }
    if (!isRecord(data)) throw new McpCredentialsFileError(this.path, "not a JSON object");
    return data;
  }

  /** Runs `fn` holding the exclusive lock `name` under `mcp-oauth-locks/`. */
  async #locked<T>(name: string, fn: () => Promise<T>): Promise<T> {
    await Deno.mkdir(`${this.#home}/${LOCK_DIR}`, { recursive: true, mode: 0o700 });
    const file = await Deno.open(`${this.#home}/${LOCK_DIR}/${name}`, {
      create: true,
      write: true,
      mode: 0o600,
    });
    try {
      await file.lock(true);
      return await fn();
    } finally {
      file.close();
    }
  }

  /** The credentials of a server, or null. Throws {@linkcode McpCredentialsFileError}. */
  async load(serverName: string, serverUrl: string): Promise<StoredMcpCredentials | null> {
    const all = await this.#readAll();
    const key = mcpCredentialsKey(serverName, serverUrl);
    if (!Object.hasOwn(all, key)) return null;
    const entry = all[key];
    const problem = entryProblem(entry);
    if (problem !== null) {
      throw new McpCredentialsFileError(this.path, `the entry \`${key}\` ${problem}`);
    }
    return normalise(entry as Record<string, unknown>);
  }

  /** Stores (replaces) a server's credentials; other fields of its entry are kept. */
  async save(credentials: StoredMcpCredentials): Promise<void> {
    const key = mcpCredentialsKey(credentials.server_name, credentials.server_url);
    await this.#locked("file-store.lock", async () => {
      const all = await this.#readAll();
      const before = Object.hasOwn(all, key) && isRecord(all[key]) ? all[key] : {};
      const entry: Record<string, unknown> = { ...before, ...credentials };
      for (const optional of ["issuer", "client_secret", "expires_at", "refresh_token"] as const) {
        if (credentials[optional] === undefined) delete entry[optional];
      }
      Object.defineProperty(all, key, { value: entry, enumerable: true, writable: true });
      await writePrivateFileAtomic(this.path, JSON.stringify(all));
    });
  }

  /**
   * Removes a server's credentials; the file goes when nothing is left.
   * Returns whether there were any.
   */
  async remove(serverName: string, serverUrl: string): Promise<boolean> {
    const key = mcpCredentialsKey(serverName, serverUrl);
    return await this.#locked("file-store.lock", async () => {
      const all = await this.#readAll();
      if (!Object.hasOwn(all, key)) return false;
      delete all[key];
      if (Object.keys(all).length === 0) await Deno.remove(this.path).catch(() => {});
      else await writePrivateFileAtomic(this.path, JSON.stringify(all));
      return true;
    });
  }

  /** Runs `fn` holding the server's refresh lock (Codex's `mcp-oauth-locks/SHA256(KEY).lock`). */
  withRefreshLock<T>(serverName: string, serverUrl: string, fn: () => Promise<T>): Promise<T> {
    const key = mcpCredentialsKey(serverName, serverUrl);
    return this.#locked(`${sha256Hex(key)}.lock`, fn);
  }
}
