/**
 * An MCP SDK `Transport` over newline-delimited JSON on a pair of byte
 * streams: a child's stdio (local or through an exec-server) or this
 * process's own stdin/stdout.
 *
 * Lines are split on `\n` before decoding (a trailing `\r` is dropped, blank
 * lines skipped) and capped (8 MiB by default): an oversized line closes the
 * transport with an error instead of growing memory. A line that is not an
 * MCP message is logged and skipped. At end of input a final unterminated
 * line is still delivered once. Messages are parsed and validated by the
 * SDK. A child's stderr is logged line by line, never mixed into framing.
 *
 * @module
 */

import { LineSplitter } from "../jsonrpc/ndjson.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import { settleWithin } from "../util/async.ts";
import { drainLines } from "../util/line_drain.ts";
import type { McpChild } from "./child.ts";
import { type JSONRPCMessage, loadMcpSdk, type Transport } from "./sdk.ts";
import { strictUtf8Decoder } from "../util/utf8.ts";

/** Default cap of one MCP message line. */
export const MCP_MAX_LINE_BYTES = 8 * 1024 * 1024;

/** Options of {@linkcode stdioMcpTransport}. */
export interface StdioMcpTransportOptions {
  /** For logs. */
  readonly label: string;
  /** Incoming bytes. */
  readonly input: ReadableStream<Uint8Array>;
  /** Outgoing bytes. */
  readonly output: WritableStream<Uint8Array>;
  /** Longest message line. Default {@linkcode MCP_MAX_LINE_BYTES}. */
  readonly maxLineBytes?: number;
  /** Runs once when the transport closes (stop the child). */
  readonly onClose?: () => Promise<void>;
  /** Where parse failures go. */
  readonly logger?: Logger;
  /** Leave `output` open on close (this process's stdout). */
  readonly keepOutputOpen?: boolean;
  /**
   * At end of input, how long requests already received may take to be
   * answered before the transport closes anyway. Default 60 s.
   */
  readonly drainTimeoutMs?: number;
}

const encoder = new TextEncoder();

/** Builds the transport (loads the SDK for message validation). */
export async function stdioMcpTransport(options: StdioMcpTransportOptions): Promise<Transport> {
  const { stdio } = await loadMcpSdk();
  const logger = options.logger ?? nullLogger;
  const maxLine = options.maxLineBytes ?? MCP_MAX_LINE_BYTES;
  const decode = strictUtf8Decoder();
  const reader = options.input.getReader();
  const writer = options.output.getWriter();
  let closing: Promise<void> | null = null;
  // Requests received and not yet answered: end of input waits for them
  // (`echo REQUEST | exec-server mcp` gets its answer).
  const pending = new Set<string | number>();
  let drained: PromiseWithResolvers<void> | null = null;

  const transport: Transport = {
    start() {
      void readLoop();
      return Promise.resolve();
    },
    async send(message: JSONRPCMessage) {
      if (closing) throw new Error(`${options.label}: transport closed`);
      await writer.write(encoder.encode(stdio.serializeMessage(message)));
      if (("result" in message || "error" in message) && "id" in message) {
        pending.delete(message.id as string | number);
        if (pending.size === 0) drained?.resolve();
      }
    },
    close() {
      closing ??= (async () => {
        await reader.cancel().catch(() => {});
        if (options.keepOutputOpen) writer.releaseLock();
        else await writer.close().catch(() => {});
        await options.onClose?.().catch((error) =>
          logger.warn("mcp.stop_failed", { server: options.label, error })
        );
        transport.onclose?.();
      })();
      return closing;
    },
  };

  function deliver(line: Uint8Array): void {
    let end = line.length;
    if (end > 0 && line[end - 1] === 0x0d) end--;
    let text: string;
    try {
      text = decode(line.subarray(0, end));
    } catch {
      logger.debug("mcp.parse_failed", { server: options.label, error: "invalid UTF-8" });
      return;
    }
    if (text.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = stdio.deserializeMessage(text);
    } catch (error) {
      logger.debug("mcp.parse_failed", { server: options.label, error });
      return;
    }
    if ("method" in message && "id" in message) pending.add(message.id as string | number);
    transport.onmessage?.(message);
  }

  async function readLoop(): Promise<void> {
    const splitter = new LineSplitter(maxLine);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (!splitter.push(value, deliver)) {
          transport.onerror?.(
            new Error(`${options.label}: MCP message line exceeds ${maxLine} bytes`),
          );
          break;
        }
      }
      const rest = splitter.takeRest();
      if (rest) deliver(rest);
      if (pending.size > 0) {
        drained = Promise.withResolvers<void>();
        await settleWithin(drained.promise, options.drainTimeoutMs ?? 60_000);
      }
    } catch (error) {
      if (!closing) transport.onerror?.(error as Error);
    }
    await transport.close();
  }

  return transport;
}

/**
 * The transport of a started MCP server: its stdout and stdin carry MCP,
 * its stderr is logged, closing the transport stops it, and its exit closes
 * the transport (once its output is read).
 */
export async function childMcpTransport(
  child: McpChild,
  options: { logger?: Logger; maxLineBytes?: number } = {},
): Promise<Transport> {
  const logger = options.logger ?? nullLogger;
  const stderrDone = drainLines(child.stderr, {
    maxLineBytes: child.stderrLineBytes,
    onLine: (line) => logger.info("mcp.server_stderr", { server: child.label, line }),
    onOverflow: (line) =>
      logger.info("mcp.server_stderr_line_exceeded_limit", { server: child.label, line }),
  });
  return await stdioMcpTransport({
    label: child.label,
    input: child.stdout,
    output: child.stdin,
    logger,
    onClose: async () => {
      await child.terminate();
      await settleWithin(stderrDone, 1000);
    },
    ...(options.maxLineBytes !== undefined ? { maxLineBytes: options.maxLineBytes } : {}),
  });
}
