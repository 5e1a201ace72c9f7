/**
 * exec-server: execution and integration sidecar servers for coding agents.
 *
 * A harness drives an execution environment over JSON-RPC 2.0 (stdio or
 * WebSocket), wire-compatible with the Codex exec-server protocol: start
 * processes and stream their output, write stdin, signal and kill process
 * trees, read and write files, make HTTP requests from inside the
 * environment.
 *
 * Serve over stdio:
 *
 * ```ts ignore
 * import { ExecServer, serveStdio } from "jsr:@org/exec-server";
 *
 * await using server = new ExecServer();
 * await serveStdio(server);
 * ```
 *
 * Serve over WebSocket:
 *
 * ```ts ignore
 * import { ExecServer, listenWebSocket } from "jsr:@org/exec-server";
 *
 * const server = new ExecServer();
 * const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
 * console.log(listener.url);
 * ```
 *
 * The root exports what a user starts with: the server and its listeners,
 * the client, and the protocol's method names, parameter and result types
 * and error codes. Everything else is on its area's entry, which loads only
 * what it needs: `@org/exec-server/client`, `/server`, `/protocol` (the
 * whole wire library), `/proxy`, `/relay`, `/mcp`, `/sidecars`, `/cli`.
 *
 * Run as a program, this module is the `exec-server` command line:
 * `deno run -A jsr:@org/exec-server serve --listen stdio` (JSR's default
 * entry), `deno install -g -A -n exec-server jsr:@org/exec-server`.
 *
 * @module
 */

export { VERSION } from "./src/version.ts";

export * from "./server.ts";
export * from "./client.ts";
export {
  ClientNotification,
  ErrorCode,
  JsonRpcCode,
  Method,
  type MethodName,
  type MethodParams,
  type MethodResult,
  type NotificationName,
  type NotificationParams,
  pathToUri,
  RpcError,
  ServerNotification,
  ServerRequest,
} from "./protocol.ts";

// Run as a program (`deno run -A jsr:@org/exec-server …`): the command line.
// Loaded only then, so a library import does not load the CLI's modules.
if (import.meta.main) {
  const { main } = await import("./src/cli/main.ts");
  Deno.exit(await main(Deno.args));
}
