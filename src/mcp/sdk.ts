/**
 * The MCP SDK, loaded on first use. It costs about 20 MiB and 0.4 s to load,
 * which `serve` and the other commands must not pay; MCP commands call
 * {@linkcode loadMcpSdk}. Runtime specifiers are literals so `deno compile`
 * bundles them.
 *
 * Types come from extension-less subpaths: the SDK's `"./*"` export maps
 * `x.js` to `x.js.d.ts`, which does not exist, so `…/x.js` would type as
 * `any`.
 *
 * @module
 */

export type { Transport } from "@modelcontextprotocol/sdk/shared/transport";
export type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types";
export type { McpServer } from "@modelcontextprotocol/sdk/server/mcp";
export type { CallToolResult } from "@modelcontextprotocol/sdk/types";

/** The SDK pieces this package uses. */
export interface McpSdk {
  /** NDJSON (de)serialisation with schema validation. */
  readonly stdio: typeof import("@modelcontextprotocol/sdk/shared/stdio");
  /** `McpServer`. */
  readonly mcp: typeof import("@modelcontextprotocol/sdk/server/mcp");
  /** The Web-standard Streamable HTTP server transport. */
  readonly http: typeof import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp");
  /** `zod`, for tool schemas. */
  readonly z: typeof import("zod");
}

let loading: Promise<McpSdk> | null = null;

/** Loads the SDK once. */
export function loadMcpSdk(): Promise<McpSdk> {
  loading ??= (async () => {
    const [stdio, mcp, http, z] = await Promise.all([
      import("@modelcontextprotocol/sdk/shared/stdio.js"),
      import("@modelcontextprotocol/sdk/server/mcp.js"),
      import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"),
      import("zod"),
    ]);
    return {
      stdio: stdio as McpSdk["stdio"],
      mcp: mcp as McpSdk["mcp"],
      http: http as McpSdk["http"],
      z,
    };
  })();
  return loading;
}

/** The SDK's client side (loaded separately: servers never need it). */
export interface McpClientSdk {
  /** `Client`. */
  readonly client: typeof import("@modelcontextprotocol/sdk/client");
  /** `StreamableHTTPClientTransport`. */
  readonly http: typeof import("@modelcontextprotocol/sdk/client/streamableHttp");
  /** Request and notification schemas. */
  readonly types: typeof import("@modelcontextprotocol/sdk/types");
  /** The OAuth client (discovery, registration, authorization, tokens). */
  readonly auth: typeof import("@modelcontextprotocol/sdk/client/auth");
}

let loadingClient: Promise<McpClientSdk> | null = null;

/** Loads the SDK's client side once. */
export function loadMcpClientSdk(): Promise<McpClientSdk> {
  loadingClient ??= (async () => {
    const [client, http, types, auth] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
      import("@modelcontextprotocol/sdk/types.js"),
      import("@modelcontextprotocol/sdk/client/auth.js"),
    ]);
    return {
      client: client as McpClientSdk["client"],
      http: http as McpClientSdk["http"],
      types: types as McpClientSdk["types"],
      auth: auth as McpClientSdk["auth"],
    };
  })();
  return loadingClient;
}

/** The SDK's machine-client helpers (`private_key_jwt`): loaded only by a client that signs. */
export type McpAuthExtensions = typeof import("@modelcontextprotocol/sdk/client/auth-extensions");

/** Loads the SDK's auth extensions (and `jose`) once. */
export async function loadMcpAuthExtensions(): Promise<McpAuthExtensions> {
  return await import("@modelcontextprotocol/sdk/client/auth-extensions.js") as McpAuthExtensions;
}
