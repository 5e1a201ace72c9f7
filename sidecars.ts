/**
 * Sidecars: the auth-injecting Responses API proxy and the stdio to Unix
 * socket relay.
 *
 * @example Relay this process's stdio to a Unix socket
 * ```ts ignore
 * import { relayStdioToUnixSocket } from "jsr:@org/exec-server/sidecars";
 *
 * await relayStdioToUnixSocket("/run/my-mcp.sock");
 * ```
 *
 * @module
 */

export {
  DEFAULT_RESPONSES_UPSTREAM,
  type ResponsesProxy,
  type ResponsesProxyOptions,
  startResponsesProxy,
} from "./src/sidecars/responses_proxy.ts";
export {
  API_KEY_ERRORS,
  ApiKeyError,
  type KeySource,
  readApiKeyHeader,
} from "./src/sidecars/api_key.ts";
export {
  relayStdioToUnixSocket,
  StdioRelayError,
  type StdioRelayOptions,
} from "./src/sidecars/stdio_to_uds.ts";
