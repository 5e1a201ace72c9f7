/**
 * What a tool returns: text (with structured content for command reports),
 * and failures as `isError` results the model can read.
 *
 * @module
 */

import { isRemoteFailure } from "../../client/fs.ts";
import type { CallToolResult } from "../sdk.ts";
import type { ExecReport } from "./exec_sessions.ts";

/** A text result, with a command report as structured content. */
export function text(body: string, structured?: ExecReport): CallToolResult {
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
export async function guarded(
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
