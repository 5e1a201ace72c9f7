/**
 * `exec-server mcp`: an execution environment as MCP tools — run commands
 * (with deadlines, output limits and interactive sessions), read, write and
 * edit files, list and search directories — backed by an exec-server
 * through the client library (this machine's in-process server, or a
 * remote one). Tool failures are `isError` results the model can read, not
 * protocol errors. Tool names and arguments follow the ecosystem's
 * conventions (`@modelcontextprotocol/server-filesystem`, Codex's
 * `exec_command`/`write_stdin`).
 *
 * @module
 */

import type { ExecServerClient } from "../client/client.ts";
import { VERSION } from "../version.ts";
import { posix } from "node:path";
import { pathToUri } from "../protocol/path_uri.ts";
import type { FileSystemSandboxContext } from "../protocol/types.ts";
import { PROTECTED_NAMES } from "../sandbox/policy.ts";
import { loadMcpSdk, type Transport } from "./sdk.ts";
import type { McpTransport } from "./transport.ts";
import { ExecSessions, type ExecToolLimits } from "./tools/exec_sessions.ts";
import { registerExecTools } from "./tools/exec_tools.ts";
import { registerFileTools } from "./tools/file_tools.ts";
import { text } from "./tools/result.ts";
import { FileOps, loadFileToolLibs } from "./tools/file_ops.ts";
import { PathGuard } from "./tools/path_guard.ts";

/** Options of {@linkcode createExecToolServer}. */
export interface ExecToolServerOptions {
  /**
   * Confine file tools and command working directories to these absolute
   * directories. Paths are checked (lexically and after resolving symlinks)
   * and every file operation then runs inside a sandbox that can write only
   * the roots, so a path swapped between the check and the use (a symlink
   * planted in a race, a dangling link out) cannot write elsewhere. Needs a
   * server that enforces sandboxed file access
   * (`capabilities.sandboxedFileStreaming`).
   */
  readonly roots?: readonly string[];
  /**
   * With `roots` on a server that cannot sandbox file operations: check
   * paths only (a race can escape). Refused unless set.
   */
  readonly rootsWithoutSandbox?: boolean;
  /** Limits of the command tools. */
  readonly limits?: ExecToolLimits;
}

/** A tool server and what it holds. */
export interface ExecToolServer {
  /** Serves the tools on `transport` (once per tool server). */
  connect(transport: McpTransport): Promise<void>;
  /** Resolves when the MCP connection has closed. */
  readonly closed: Promise<void>;
  /** Running command sessions. */
  readonly sessions: ExecSessions;
  /** Terminates the sessions and closes the server. */
  close(): Promise<void>;
}

/**
 * The sandbox of the file tools: the roots writable (their `.git`, `.codex`…
 * too: named explicitly, they are not protected as in Codex's policies),
 * nothing else visible but what the server's sandbox helper needs to run.
 */
function rootsSandbox(roots: readonly string[]): FileSystemSandboxContext {
  const entries = roots.flatMap((root) =>
    [root, ...PROTECTED_NAMES.map((name) => posix.join(root, name))].map((path) => ({
      path: { type: "path" as const, path: pathToUri(path) },
      access: "write" as const,
    }))
  );
  return {
    permissions: {
      type: "managed",
      file_system: { type: "restricted", entries },
      network: "restricted",
    },
    windowsSandboxLevel: "disabled",
  };
}

/** Builds a tool server over `client`. */
export async function createExecToolServer(
  client: ExecServerClient,
  options: ExecToolServerOptions = {},
): Promise<ExecToolServer> {
  const [{ mcp, z }, libs] = await Promise.all([loadMcpSdk(), loadFileToolLibs()]);
  const roots = options.roots ?? [];
  const guard = new PathGuard(client.fs, roots);
  const sessions = new ExecSessions(client, guard, options.limits);
  let fs = client.fs;
  if (roots.length > 0) {
    if (client.environmentInfo?.capabilities.sandboxedFileStreaming) {
      fs = client.fs.confined(rootsSandbox(roots));
    } else if (!options.rootsWithoutSandbox) {
      throw new Error(
        "--root needs an exec-server that enforces sandboxed file access " +
          "(bubblewrap on Linux: apt-get install bubblewrap); without it a path swapped " +
          "between the check and the use could escape the roots. Pass --root-check-only " +
          "to accept that.",
      );
    }
  }
  const files = new FileOps(fs, guard, libs);
  const server = new mcp.McpServer(
    { name: "exec-server", version: VERSION },
    {
      instructions: "Tools to run commands and work with files in one execution environment. " +
        "Paths are absolute. exec_command runs to completion (or its timeout); give yield_time_ms " +
        "to keep a long-running or interactive command as a session for write_stdin.",
    },
  );

  registerExecTools(server, z, sessions);
  registerFileTools(server, z, files);

  if (guard.roots.length > 0) {
    server.registerTool("list_allowed_directories", {
      title: "Allowed directories",
      description:
        "The directories the file tools and command working directories are confined to.",
      inputSchema: {},
      annotations: { readOnlyHint: true },
    }, () => Promise.resolve(text(guard.roots.join("\n"))));
  }

  const closed = Promise.withResolvers<void>();
  server.server.onclose = () => closed.resolve();
  return {
    connect: (transport) => server.connect(transport as Transport),
    closed: closed.promise,
    sessions,
    async close() {
      await sessions.closeAll();
      await server.close();
    },
  };
}
