/**
 * `exec-server mcp-servers login NAME` and `logout NAME`: OAuth for a
 * Streamable HTTP server of a Codex configuration, the tokens kept where
 * Codex keeps them (one login serves both). The person signs in through a
 * browser: the desktop's opener, `--browser-command CMD` (run as
 * `CMD URL`), or, with `--no-browser`, the URL printed and the callback URL
 * pasted back when the browser runs on another machine.
 *
 * @module
 */

import type { McpOAuthSettings, McpServerConfig } from "../mcp/runtime/config.ts";
import { loginMcpServer, logoutMcpServer } from "../mcp/oauth/login.ts";
import type { McpClientRegistration } from "../mcp/oauth/provider.ts";
import { credentialStoreFor } from "../mcp/oauth/session.ts";
import { splitCommand } from "./client_args.ts";
import { onTerminationSignal, parseDuration, printLine, UsageError } from "./common.ts";

/** Flags of `login`. */
export interface McpLoginFlags {
  readonly scopes?: string;
  readonly browserCommand?: string;
  readonly noBrowser?: boolean;
  readonly timeout?: string;
  readonly registration?: string;
}

const BROWSER_FAILED = "(Browser launch failed; please copy the URL above manually.)";

/** The desktop's URL opener, or null when this machine has no desktop. */
function desktopOpener(): string[] | null {
  if (Deno.build.os === "darwin") return ["open"];
  if (Deno.build.os === "windows") return ["rundll32", "url.dll,FileProtocolHandler"];
  const env = Deno.env.toObject();
  return env.DISPLAY || env.WAYLAND_DISPLAY ? ["xdg-open"] : null;
}

/** Runs `command URL` without waiting for it; says so when it cannot start or fails. */
function launch(command: readonly string[], url: URL): void {
  const [program, ...args] = command;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(program!, {
      args: [...args, url.href],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
  } catch {
    void printLine(`\n${BROWSER_FAILED}`);
    return;
  }
  child.unref();
  void child.status.then((status) => {
    if (!status.success) void printLine(`\n${BROWSER_FAILED}`);
  });
}

/**
 * Lines typed on stdin; on a terminal without echo (a callback URL
 * carries the authorization code).
 */
async function* pastedLines(): AsyncGenerator<string> {
  const hidden = Deno.stdin.isTerminal();
  if (hidden) Deno.stdin.setRaw(true);
  const decoder = new TextDecoder();
  let line = "";
  const buffer = new Uint8Array(4096);
  try {
    while (true) {
      const n = await Deno.stdin.read(buffer);
      if (n === null) {
        if (line !== "") yield line;
        return;
      }
      for (const char of decoder.decode(buffer.subarray(0, n), { stream: true })) {
        if (char === "\n" || char === "\r") {
          if (hidden) await printLine("");
          if (line !== "") yield line;
          line = "";
        } else if (hidden && char === "\u0003") {
          throw new Error("login cancelled");
        } else if (hidden && (char === "\u007f" || char === "\b")) {
          line = line.slice(0, -1);
        } else line += char;
      }
    }
  } finally {
    if (hidden) Deno.stdin.setRaw(false);
  }
}

function registrationFlag(value: string | undefined): McpClientRegistration | undefined {
  if (value === undefined) return undefined;
  if (value === "auto" || value === "cimd" || value === "dcr") return value;
  throw new UsageError(
    `--oauth-client-registration expects auto, cimd or dcr, got ${value}`,
    2,
  );
}

function httpServer(server: McpServerConfig, verb: "login" | "logout"): boolean {
  if (server.transport.type === "streamable_http") return true;
  console.error(
    verb === "login"
      ? "Error: OAuth login is only supported for streamable HTTP servers."
      : "Error: OAuth logout is only supported for streamable_http transports.",
  );
  return false;
}

/** Runs `login`; returns the exit status. */
export async function runMcpLogin(
  server: McpServerConfig,
  settings: McpOAuthSettings,
  codexHome: string,
  flags: McpLoginFlags,
): Promise<number> {
  if (server.problem) {
    console.error(`Error: ${server.problem.message}`);
    return 1;
  }
  if (!httpServer(server, "login")) return 1;
  const registration = registrationFlag(flags.registration);
  const timeoutMs = flags.timeout === undefined
    ? undefined
    : parseDuration("timeout", flags.timeout);
  const scopes = flags.scopes?.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const opener = flags.browserCommand !== undefined
    ? splitCommand(flags.browserCommand)
    : flags.noBrowser
    ? null
    : desktopOpener();
  if (flags.browserCommand !== undefined && opener!.length === 0) {
    throw new UsageError("--browser-command needs a command", 2);
  }
  const abort = new AbortController();
  const removeSignals = onTerminationSignal(() => abort.abort(new Error("login cancelled")));
  try {
    const store = credentialStoreFor(codexHome, settings);
    await loginMcpServer({
      server,
      settings,
      store,
      ...(scopes && scopes.length > 0 ? { scopes } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(registration ? { registration } : {}),
      signal: abort.signal,
      openUrl: async (url) => {
        if (flags.noBrowser) {
          await printLine(
            `Authorize the MCP server by opening this URL in your browser:\n${url.href}\n\n` +
              "After signing in, copy the full URL from your browser's address bar.\n" +
              "If the callback page cannot load, paste that URL here anyway.",
          );
          await Deno.stdout.write(new TextEncoder().encode("Callback URL (input hidden): "));
          return;
        }
        await printLine(
          `Authorize \`${server.name}\` by opening this URL in your browser:\n${url.href}`,
        );
        if (opener) launch(opener, url);
      },
      ...(flags.noBrowser ? { pastedCallbacks: pastedLines() } : {}),
    });
    await printLine(`Successfully logged in to MCP server '${server.name}'.`);
    return 0;
  } catch (error) {
    console.error(`Error: ${(error as Error).message}`);
    return 1;
  } finally {
    removeSignals();
    // A paste that never came leaves a read pending in raw mode.
    if (flags.noBrowser && Deno.stdin.isTerminal()) Deno.stdin.setRaw(false);
  }
}

/** Runs `logout`; returns the exit status. */
export async function runMcpLogout(
  server: McpServerConfig,
  settings: McpOAuthSettings,
  codexHome: string,
): Promise<number> {
  if (!httpServer(server, "logout")) return 1;
  try {
    const removed = await logoutMcpServer(server, credentialStoreFor(codexHome, settings));
    await printLine(
      removed
        ? `Removed OAuth credentials for '${server.name}'.`
        : `No OAuth credentials stored for '${server.name}'.`,
    );
    return 0;
  } catch (error) {
    console.error(`Error: ${(error as Error).message}`);
    return 1;
  }
}
