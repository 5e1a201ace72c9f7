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
import { isRemoteFailure } from "../client/fs.ts";
import { posix } from "node:path";
import { pathToUri } from "../protocol/path_uri.ts";
import type { FileSystemSandboxContext } from "../protocol/types.ts";
import { PROTECTED_NAMES } from "../sandbox/policy.ts";
import { type CallToolResult, loadMcpSdk, type Transport } from "./sdk.ts";
import type { McpTransport } from "./transport.ts";
import {
  type ExecReport,
  ExecSessions,
  type ExecToolLimits,
  renderReport,
} from "./tools/exec_sessions.ts";
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

function text(body: string, structured?: ExecReport): CallToolResult {
  return {
    content: [{ type: "text", text: body }],
    ...(structured ? { structuredContent: structured as unknown as Record<string, unknown> } : {}),
  };
}

/**
 * Runs a tool; a failure is an `isError` result. The exec-server reports OS
 * errors without the path (the reference's texts), so a file tool names
 * it: `<path>: No such file or directory (os error 2)`.
 */
async function guarded(
  work: () => Promise<CallToolResult>,
  path?: string,
): Promise<CallToolResult> {
  try {
    return await work();
  } catch (error) {
    const message = (error as Error).message;
    const named = path !== undefined && isRemoteFailure(error) && !message.includes(path)
      ? `${path}: ${message}`
      : message;
    return { content: [{ type: "text", text: named }], isError: true };
  }
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

  const report = z.object({
    exit_code: z.number().nullable(),
    signal: z.string().nullable(),
    stdout: z.string(),
    stderr: z.string(),
    stdout_omitted_bytes: z.number(),
    stderr_omitted_bytes: z.number(),
    timed_out: z.boolean(),
    duration_ms: z.number(),
    session_id: z.string().nullable(),
    running: z.boolean(),
  });
  const path = z.string().describe("Absolute path");
  const ms = (what: string) => z.number().int().min(0).optional().describe(what);
  const ran = (r: ExecReport) => text(renderReport(r), r);

  server.registerTool("exec_command", {
    title: "Run a command",
    description: "Runs a shell command line (`command`, via /bin/sh -c) or a program (`argv`) " +
      "in `cwd` and returns its exit code and output. Without yield_time_ms it runs to completion " +
      "or is killed at timeout_ms (default 120 s). With yield_time_ms it returns after that long " +
      "and, if still running, stays alive as a session (session_id) for write_stdin.",
    inputSchema: {
      command: z.string().optional().describe("Shell command line"),
      argv: z.array(z.string()).min(1).optional().describe("Program and arguments (no shell)"),
      cwd: path.describe("Absolute working directory"),
      env: z.record(z.string(), z.string()).optional().describe("Variables to set"),
      stdin: z.string().optional().describe("Text written to stdin"),
      timeout_ms: ms("Kill after this long (default 120000)"),
      yield_time_ms: ms("Return after this long, leaving the command running as a session"),
      max_output_bytes: z.number().int().min(1).optional().describe(
        "Bytes of output kept per stream (newest kept; default 65536)",
      ),
      tty: z.boolean().optional().describe("Run on a pseudo-terminal"),
    },
    outputSchema: report.shape,
    annotations: { destructiveHint: true, openWorldHint: true, readOnlyHint: false },
  }, (a) =>
    guarded(async () =>
      ran(
        await sessions.start({
          command: a.command,
          argv: a.argv,
          cwd: a.cwd,
          env: a.env,
          stdin: a.stdin,
          timeoutMs: a.timeout_ms,
          yieldMs: a.yield_time_ms,
          maxOutputBytes: a.max_output_bytes,
          tty: a.tty,
        }),
      )
    ));

  server.registerTool(
    "write_stdin",
    {
      title: "Write to a running command",
      description: "Writes `chars` to a session's stdin (empty string: just poll), waits up to " +
        "yield_time_ms (default 1000) and returns the output produced since the last call.",
      inputSchema: {
        session_id: z.string(),
        chars: z.string().describe("Text to write; empty to poll"),
        yield_time_ms: ms("How long to wait for output or exit (default 1000)"),
        close_stdin: z.boolean().optional().describe("Close stdin after writing (EOF)"),
      },
      outputSchema: report.shape,
      annotations: { destructiveHint: true, openWorldHint: true, readOnlyHint: false },
    },
    (a) =>
      guarded(async () =>
        ran(await sessions.write(a.session_id, a.chars, a.yield_time_ms, a.close_stdin ?? false))
      ),
  );

  server.registerTool("terminate_process", {
    title: "Stop a running command",
    description: "Kills a session's whole process group and returns its last output.",
    inputSchema: { session_id: z.string() },
    outputSchema: report.shape,
    annotations: { destructiveHint: true, idempotentHint: true, readOnlyHint: false },
  }, (a) => guarded(async () => ran(await sessions.terminate(a.session_id))));

  server.registerTool("read_text_file", {
    title: "Read a text file",
    description: "Reads a UTF-8 file; `head` or `tail` return only the first or last N lines.",
    inputSchema: {
      path,
      head: z.number().int().min(0).optional().describe("First N lines only"),
      tail: z.number().int().min(0).optional().describe("Last N lines only"),
    },
    annotations: { readOnlyHint: true },
  }, (a) => guarded(async () => text(await files.readText(a.path, a.head, a.tail)), a.path));

  server.registerTool("write_file", {
    title: "Write a file",
    description: "Creates or replaces a file with `content` (atomically).",
    inputSchema: { path, content: z.string() },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  }, (a) => guarded(async () => text(await files.write(a.path, a.content)), a.path));

  server.registerTool(
    "edit_file",
    {
      title: "Edit a file",
      description: "Replaces each `oldText` with `newText` (an exact unique match, else a " +
        "whitespace-insensitive line match, re-indented) and returns a unified diff. " +
        "`dryRun` shows the diff without writing.",
      inputSchema: {
        path,
        edits: z.array(z.object({ oldText: z.string(), newText: z.string() })).min(1),
        dryRun: z.boolean().optional(),
      },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
    },
    (a) => guarded(async () => text(await files.edit(a.path, a.edits, a.dryRun ?? false)), a.path),
  );

  server.registerTool("create_directory", {
    title: "Create a directory",
    description: "Creates a directory and any missing parents; succeeds if it exists.",
    inputSchema: { path },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  }, (a) => guarded(async () => text(await files.mkdir(a.path)), a.path));

  server.registerTool("list_directory", {
    title: "List a directory",
    description: "Lists entries as `[DIR] name` or `[FILE] name` lines.",
    inputSchema: { path },
    annotations: { readOnlyHint: true },
  }, (a) => guarded(async () => text(await files.list(a.path)), a.path));

  server.registerTool(
    "search_files",
    {
      title: "Find files",
      description:
        "Recursively finds paths under `path` matching a glob (`*.ts`, `src/**/test_*`); " +
        "a pattern without `/` matches file names at any depth.",
      inputSchema: {
        path,
        pattern: z.string(),
        excludePatterns: z.array(z.string()).optional(),
      },
      annotations: { readOnlyHint: true },
    },
    (a) =>
      guarded(async () => text(await files.search(a.path, a.pattern, a.excludePatterns)), a.path),
  );

  server.registerTool("get_file_info", {
    title: "File information",
    description: "Type, size and times of a file or directory.",
    inputSchema: { path },
    annotations: { readOnlyHint: true },
  }, (a) => guarded(async () => text(await files.info(a.path)), a.path));

  server.registerTool("move_file", {
    title: "Move a file",
    description: "Moves a file or directory; fails if the destination exists.",
    inputSchema: { source: path, destination: path },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  }, (a) => guarded(async () => text(await files.move(a.source, a.destination)), a.source));

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
