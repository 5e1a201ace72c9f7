/**
 * The file tools: read, write, edit, create, list, search, inspect, move.
 *
 * @module
 */

import type { McpSdk, McpServer } from "../sdk.ts";
import type { FileOps } from "./file_ops.ts";
import { guarded, text } from "./result.ts";

/** Registers the file tools on `server`, backed by `files`. */
export function registerFileTools(server: McpServer, z: McpSdk["z"], files: FileOps): void {
  const path = z.string().describe("Absolute path");
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
}
