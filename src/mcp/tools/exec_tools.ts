/**
 * The command tools: `exec_command`, `write_stdin`, `terminate_process`.
 *
 * @module
 */

import type { McpSdk, McpServer } from "../sdk.ts";
import { type ExecReport, type ExecSessions, renderReport } from "./exec_sessions.ts";
import { guarded, text } from "./result.ts";

/** Registers the command tools on `server`, backed by `sessions`. */
export function registerExecTools(server: McpServer, z: McpSdk["z"], sessions: ExecSessions): void {
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
}
