/**
 * An MCP server process as three byte streams and a way to stop it, however
 * it was started (here, or through an exec-server).
 *
 * @module
 */

/** A started MCP stdio server. */
export interface McpChild {
  /** For logs: the program. */
  readonly label: string;
  /** The server's stdout (MCP messages). */
  readonly stdout: ReadableStream<Uint8Array>;
  /** The server's stdin. */
  readonly stdin: WritableStream<Uint8Array>;
  /** The server's stderr (logged line by line). */
  readonly stderr: ReadableStream<Uint8Array>;
  /** Longest stderr line logged whole. */
  readonly stderrLineBytes: number;
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>;
  /** Stops the process (and its group); idempotent. */
  terminate(): Promise<void>;
}
