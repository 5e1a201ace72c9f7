/**
 * `process/*` methods: translate between the protocol and
 * {@linkcode ManagedProcess}. Processes belong to the session; ids are the
 * client's. `process/start` itself is `process_start.ts`.
 *
 * @module
 */

import type { RpcError } from "../../jsonrpc/errors.ts";
import { releaseDecoded } from "../../jsonrpc/large_message.ts";
import { StdinWriteError } from "../../process/managed_process.ts";
import { internalError, invalidParams, invalidRequest } from "../../protocol/errors.ts";
import { Method } from "../../protocol/methods.ts";
import type {
  ProcessReadResult,
  ProcessTerminateResult,
  ProcessWriteResult,
} from "../../protocol/types.ts";
import { defineMethods, type HandlerContext, type MethodTable } from "../handler.ts";
import type { Session } from "../session.ts";
import { type ChildStarter, defaultStarter, startProcess } from "./process_start.ts";

function unknownProcess(id: string): RpcError {
  return invalidRequest(`unknown process id ${id}`);
}

function readResult(
  session: Session,
  id: string,
  afterSeq: number,
  maxBytes?: number,
): ProcessReadResult {
  const process = session.process(id);
  if (!process) throw unknownProcess(id);
  const { chunks, nextSeq } = process.log.read(afterSeq, maxBytes);
  return {
    chunks: chunks.map((c) => ({ seq: c.seq, stream: c.stream, chunk: c.chunk.toBase64() })),
    nextSeq,
    exited: process.exited,
    exitCode: process.exitCode,
    closed: process.closed,
    failure: null,
    sandboxDenied: process.sandboxDenied,
  };
}

async function read(
  ctx: HandlerContext,
  id: string,
  afterSeq: number,
  maxBytes: number | undefined,
  waitMs: number | undefined,
): Promise<ProcessReadResult> {
  const deadline = waitMs ? Date.now() + waitMs : 0;
  for (;;) {
    const process = ctx.session.process(id);
    if (!process) throw unknownProcess(id);
    const result = readResult(ctx.session, id, afterSeq, maxBytes);
    const settled = result.chunks.length > 0 || result.closed ||
      (result.exited && afterSeq < process.log.nextSeq - 1);
    const remaining = deadline - Date.now();
    if (settled || !waitMs || remaining <= 0 || ctx.rpc.signal.aborted) return result;
    // Long poll: wait for the next event without holding a request slot.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const aborted = Promise.withResolvers<void>();
    const onAbort = () => aborted.resolve();
    ctx.rpc.signal.addEventListener("abort", onAbort, { once: true });
    try {
      await ctx.rpc.idle(Promise.race([
        process.log.changed(),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, remaining))),
        aborted.promise,
      ]));
    } finally {
      clearTimeout(timer);
      ctx.rpc.signal.removeEventListener("abort", onAbort);
    }
  }
}

/** Builds the process methods around a child starter. */
export function processMethods(starter: ChildStarter = defaultStarter): MethodTable {
  return defineMethods({
    [Method.ProcessStart]: (p, ctx) => startProcess(p, ctx, starter),

    [Method.ProcessRead]: async (p, ctx) => {
      const result = await read(ctx, p.processId, p.afterSeq ?? 0, p.maxBytes, p.waitMs);
      // Reading from a cursor is how a resumed client catches up: history
      // held since a disconnect can go once this answer is on its way.
      ctx.session.process(p.processId)?.log.releaseHistory();
      return result;
    },

    [Method.ProcessWrite]: async (p, ctx): Promise<ProcessWriteResult> => {
      const process = ctx.session.process(p.processId);
      if (!process) return { status: "unknownProcess" };
      try {
        // The write is queued synchronously (arrival order); waiting for the
        // pipe to take it does not hold a request slot.
        return { status: await ctx.rpc.idle(process.write(p.chunk, p.writeId)) };
      } catch (error) {
        if (error instanceof StdinWriteError) throw internalError(error.message, error);
        throw error;
      } finally {
        // The pipe has them (or never will): the buffer may take the next upload.
        releaseDecoded(p.chunk);
      }
    },

    [Method.ProcessCloseStdin]: async (p, ctx): Promise<ProcessWriteResult> => {
      const process = ctx.session.process(p.processId);
      if (!process) return { status: "unknownProcess" };
      return { status: await ctx.rpc.idle(process.closeStdin()) };
    },

    [Method.ProcessSignal]: (p, ctx) => {
      const process = ctx.session.process(p.processId);
      if (!process) return {};
      try {
        process.signal(p.signal);
      } catch (error) {
        throw internalError(`failed to signal process: ${(error as Error).message}`, error);
      }
      return {};
    },

    [Method.ProcessPauseOutput]: (p, ctx) => {
      ctx.session.process(p.processId)?.pauseOutput();
      return {};
    },

    [Method.ProcessResumeOutput]: (p, ctx) => {
      ctx.session.process(p.processId)?.resumeOutput();
      return {};
    },

    [Method.ProcessResize]: (p, ctx) => {
      const process = ctx.session.process(p.processId);
      if (!process) throw unknownProcess(p.processId);
      if (p.rows === 0 || p.cols === 0) throw invalidParams("rows and cols must be at least 1");
      try {
        process.resize(p.rows, p.cols);
      } catch (error) {
        throw invalidRequest((error as Error).message);
      }
      return {};
    },

    [Method.ProcessTerminate]: (p, ctx): ProcessTerminateResult => {
      const process = ctx.session.process(p.processId);
      if (!process) return { running: false };
      return { running: process.terminate(p.graceMs ?? 0) };
    },
  });
}
