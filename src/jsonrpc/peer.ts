/**
 * The JSON-RPC peer: the one engine used by the server, the client and the
 * relay executor. It reads a {@linkcode Connection}, dispatches requests to a
 * handler with bounded concurrency, surfaces notifications, and matches
 * responses to the calls it made.
 *
 * Scheduling: each request goes to a lane (by method); a lane runs up to
 * `concurrency` handlers at once and queues the rest in arrival order.
 * Handlers start synchronously in arrival order, so work they do before
 * their first `await` is ordered. A handler that waits for a long time
 * (a long poll) wraps the wait in `ctx.idle()` to give its slot back.
 * Requests that share an ordering key (the process or file handle they are
 * about) take effect in arrival order whatever their lanes: each starts
 * only once the previous one with that key has finished or gone idle.
 * When too many requests are queued the peer stops reading, so a flooding
 * client is slowed by its own transport.
 *
 * @module
 */

import { type Lane, RequestScheduler, type Turn } from "./scheduler.ts";
import type { CloseInfo, Connection, MessageSource } from "./connection.ts";
import { CallTimeoutError, ConnectionClosedError, JsonRpcCode, RpcError } from "./errors.ts";
import {
  type IncomingMessage,
  isFailure,
  isMalformed,
  isNotification,
  isRequest,
  type JsonRpcFailure,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type JsonRpcSuccess,
  type RequestId,
  type TraceContext,
} from "./message.ts";
import type { MessageSink } from "./output_sink.ts";
import { type Logger, nullLogger } from "../log/logger.ts";
import type { RequestTracer } from "../log/otel.ts";
import { settleWithin } from "../util/async.ts";

/**
 * Told of an inbound request once its answer is enqueued (or its
 * connection went first: `disconnected`), with the seconds it waited for
 * its lane or turn and the seconds its handler ran until the answer was
 * enqueued.
 */
export type RequestObserver = (
  method: string,
  result: "success" | "error" | "disconnected",
  queuedSeconds: number,
  runSeconds: number,
) => void;

/** What a request handler can use besides its params. */
export interface RequestContext {
  /** The request id. */
  readonly id: RequestId;
  /** The method name. */
  readonly method: string;
  /** Aborted when the connection ends. */
  readonly signal: AbortSignal;
  /**
   * Awaits `wait` without holding a concurrency slot (for long polls), then
   * takes a slot again before returning.
   */
  idle<T>(wait: Promise<T>): Promise<T>;
  /**
   * Runs `callback` once the successful response has been queued (e.g. to
   * start notifications that must follow the response).
   */
  afterResponse(callback: () => void): void;
}

/** Handles one request; the return value is the result. */
export type RequestHandler = (
  method: string,
  params: unknown,
  ctx: RequestContext,
) => unknown;

/**
 * Handles one notification. Returning a promise pauses reading until it
 * settles (consumer backpressure reaches the transport).
 */
export type NotificationHandler = (method: string, params: unknown) => unknown;

/** Options for {@linkcode RpcPeer}. */
export interface RpcPeerOptions {
  /** Handles inbound requests; without it every request gets `-32601`. */
  readonly onRequest?: RequestHandler;
  /** Handles inbound notifications. */
  readonly onNotification?: NotificationHandler;
  /** Handlers running at once per lane. Default 32. */
  readonly concurrency?: number;
  /** Lane of a method. Default: one lane. */
  readonly laneOf?: (method: string) => string;
  /**
   * When true for a request, it runs alone: the peer stops reading until
   * it completes (used before a handshake is finished).
   */
  readonly inline?: (method: string) => boolean;
  /**
   * The ordering key of a request (what it is about: a process, a file
   * handle), or null. A request with a key starts only once the request
   * with the same key that arrived before it has finished or gone idle
   * (`ctx.idle`), whatever their lanes: so a `process/terminate` cannot
   * overtake the `process/start` it follows, while a long poll does not
   * hold up what comes after it.
   */
  readonly orderKey?: (method: string, params: unknown) => string | null;
  /** Requests queued (all lanes) before the peer stops reading. Default 1024. */
  readonly maxQueued?: number;
  /** Where to log. */
  readonly logger?: Logger;
  /** Trace context for each outbound request (e.g. the caller's active span). */
  readonly trace?: () => TraceContext | undefined;
  /** Runs each inbound request inside a span (OpenTelemetry); default: none. */
  readonly tracer?: RequestTracer | null;
  /** Told of every answered inbound request (metrics); default: none. */
  readonly observer?: RequestObserver | null;
  /**
   * What a malformed message does: `answer` (a server: a `-32600` with id
   * -1, the connection goes on) or `close` (a client: a server that sends
   * garbage is broken; the connection ends at once and calls fail).
   */
  readonly onMalformed?: "answer" | "close";
}

/** Options for one outbound call. */
export interface CallOptions {
  /** Aborts the wait (the request stays sent). */
  readonly signal?: AbortSignal;
  /** Rejects after this many milliseconds. */
  readonly timeoutMs?: number;
  /** Trace context sent with the request (overrides the peer's `trace`). */
  readonly trace?: TraceContext;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  method: string;
}

/** A stream reader as a {@linkcode MessageSource} (read errors propagate). */
function readerSource(reader: ReadableStreamDefaultReader<IncomingMessage>): MessageSource {
  return {
    next: () => reader.read().then((r) => r.done ? null : r.value),
    cancel: () => void reader.cancel().catch(() => {}),
  };
}

/** A stream writer as a {@linkcode MessageSink}. */
function writerSink(writer: WritableStreamDefaultWriter<JsonRpcMessage>): MessageSink {
  return {
    write: (message) => writer.write(message),
    get congested() {
      const size = writer.desiredSize;
      return size !== null && size <= 0;
    },
    ready: () => writer.ready.catch(() => {}),
    close: () => writer.close(),
    // Settles only on failure (a clean close is not one).
    failed: writer.closed.then(() => new Promise<never>(() => {}), (error) => error),
  };
}

type Answer = JsonRpcSuccess | JsonRpcFailure;

function success(req: JsonRpcRequest, result: unknown): JsonRpcSuccess {
  return { jsonrpc: "2.0", id: req.id, result: result === undefined ? null : result };
}

const SENT = Promise.resolve(true);
const NOT_SENT = Promise.resolve(false);
const sent = () => true;
const notSent = () => false;

/** A JSON-RPC endpoint over one connection; see the module documentation. */
export class RpcPeer {
  /** Resolves once, after the connection ended and calls were failed. */
  readonly closed: Promise<CloseInfo>;
  /** The underlying connection. */
  readonly connection: Connection;

  #options: RpcPeerOptions;
  #sink: MessageSink;
  #logger: Logger;
  #abandonedIds = new Set<number>();
  #scheduler: RequestScheduler;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #abort = new AbortController();
  #closeInfo: CloseInfo | null = null;
  #resolveClosed!: (info: CloseInfo) => void;
  /** Requests dispatched and not yet answered. */
  #running = 0;
  #idle: PromiseWithResolvers<void> | null = null;
  #outputClosed = false;

  /** Starts reading `connection` immediately. */
  constructor(connection: Connection, options: RpcPeerOptions = {}) {
    this.connection = connection;
    this.#options = options;
    this.#logger = options.logger ?? nullLogger;
    this.#scheduler = new RequestScheduler(options.concurrency ?? 32, options.maxQueued ?? 1024);
    this.#sink = connection.sink ?? writerSink(connection.writable.getWriter());
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    this.#sink.failed.then((error) => {
      this.#outputClosed = true;
      this.#shutdown({ reason: `write failed: ${(error as Error)?.message ?? error}`, error });
    });
    connection.closed.then((info) => this.#shutdown(info));
    this.#readLoop();
  }

  /** The first close reason, or null while open. */
  get closeInfo(): CloseInfo | null {
    return this.#closeInfo;
  }

  /** Resolves when the outbound side has room (producers should await it). */
  get ready(): Promise<void> {
    return this.#sink.ready();
  }

  /** True when the outbound queue is full. */
  get congested(): boolean {
    return this.#sink.congested;
  }

  /** Aborted when the connection ends. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /**
   * Sends a raw message. Resolves true once the transport queue accepted it,
   * false when the connection is closed (never rejects).
   */
  send(message: JsonRpcMessage): Promise<boolean> {
    // Output may outlive input (a client that sends requests and then closes
    // its end still gets the answers): only a local close or a failed
    // transport stops it.
    if (this.#outputClosed) return NOT_SENT;
    const wait = this.#sink.write(message);
    return wait === undefined ? SENT : wait.then(sent, notSent);
  }

  /** Sends a notification; resolves false when the connection is closed. */
  notify(method: string, params?: unknown): Promise<boolean> {
    const msg: JsonRpcMessage = params === undefined
      ? { jsonrpc: "2.0", method }
      : { jsonrpc: "2.0", method, params };
    return this.send(msg);
  }

  /**
   * Sends a notification; resolves true only once it has been handed to the
   * operating system (false when the connection failed first). Used where
   * "delivered" must mean more than "queued" (process output).
   */
  async notifyDelivered(method: string, params?: unknown): Promise<boolean> {
    if (!(await this.notify(method, params))) return false;
    return this.connection.flushed ? await this.connection.flushed() : true;
  }

  /**
   * Calls `method`; resolves with the result or rejects with
   * {@linkcode RpcError} (error response) or {@linkcode ConnectionClosedError}.
   */
  request<T = unknown>(method: string, params?: unknown, options: CallOptions = {}): Promise<T> {
    if (this.#closeInfo !== null) {
      return Promise.reject(new ConnectionClosedError(this.#closeInfo.reason));
    }
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<T>();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const cleanup = () => {
      this.#pending.delete(id);
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      cleanup();
      this.#abandoned(id);
      reject(options.signal!.reason ?? new DOMException("aborted", "AbortError"));
    };
    if (options.signal?.aborted) {
      return Promise.reject(options.signal.reason ?? new DOMException("aborted", "AbortError"));
    }
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        cleanup();
        this.#abandoned(id);
        reject(new CallTimeoutError(method, options.timeoutMs!));
      }, options.timeoutMs);
    }
    this.#pending.set(id, {
      method,
      resolve: (value) => {
        cleanup();
        resolve(value as T);
      },
      reject: (error) => {
        cleanup();
        reject(error);
      },
    });
    const msg: JsonRpcRequest = params === undefined
      ? { jsonrpc: "2.0", id, method }
      : { jsonrpc: "2.0", id, method, params };
    const trace = options.trace ?? this.#options.trace?.();
    if (trace) msg.trace = trace;
    this.#sink.write(msg)?.catch((error) => {
      this.#pending.get(id)?.reject(
        new ConnectionClosedError(this.#closeInfo?.reason ?? "connection closed", { cause: error }),
      );
    });
    return promise;
  }

  /** Remembers (boundedly) a call given up on, whose answer may still come. */
  #abandoned(id: number): void {
    this.#abandonedIds.add(id);
    if (this.#abandonedIds.size > 1024) {
      this.#abandonedIds.delete(this.#abandonedIds.values().next().value!);
    }
  }

  /** Ends the connection; in-flight calls fail with `reason`. */
  close(reason = "closed locally"): void {
    this.#outputClosed = true;
    this.connection.close(reason);
    this.#shutdown({ reason });
  }

  /** Waits for running handlers to finish and their responses to be queued. */
  async drain(): Promise<void> {
    while (this.#running > 0) await (this.#idle ??= Promise.withResolvers()).promise;
  }

  /** Flushes queued output and closes the outbound side. */
  async flushAndClose(timeoutMs = 5000): Promise<void> {
    this.#outputClosed = true;
    await settleWithin(this.#sink.close(), timeoutMs);
  }

  #shutdown(info: CloseInfo): void {
    if (this.#closeInfo !== null) return;
    this.#closeInfo = info;
    this.#abort.abort(new ConnectionClosedError(info.reason));
    for (const [id, pending] of [...this.#pending]) {
      this.#abandoned(id);
      pending.reject(new ConnectionClosedError(info.reason));
    }
    this.#pending.clear();
    this.#scheduler.close();
    this.#resolveClosed(info);
  }

  async #readLoop(): Promise<void> {
    const reader = this.connection.source ? null : this.connection.readable.getReader();
    const source = this.connection.source ?? readerSource(reader!);
    try {
      while (this.#closeInfo === null) {
        let msg: IncomingMessage | null;
        try {
          const next = source.next();
          msg = next instanceof Promise ? await next : next;
        } catch (error) {
          this.#shutdown({ reason: `read failed: ${(error as Error).message}`, error });
          break;
        }
        if (msg === null) break;
        if (isMalformed(msg)) {
          this.#logger.debug("jsonrpc.malformed", {
            connection: this.connection.label,
            detail: msg.malformed,
          });
          if (this.#options.onMalformed === "close") {
            const reason = `malformed message from ${this.connection.label}: ${msg.malformed}`;
            this.connection.close(reason);
            this.#shutdown({ reason });
            break;
          }
          this.send({
            jsonrpc: "2.0",
            id: -1,
            error: { code: JsonRpcCode.InvalidRequest, message: msg.malformed },
          });
        } else if (isRequest(msg)) {
          const run = this.#dispatch(msg);
          if (run !== null) await run;
          const room = this.#scheduler.roomToRead();
          if (room !== null) await room;
        } else if (isNotification(msg)) {
          const wait = this.#handleNotification(msg.method, msg.params);
          if (wait) await wait;
        } else {
          this.#handleResponse(msg);
        }
      }
    } finally {
      reader?.releaseLock();
    }
    await this.connection.closed.then((info) => this.#shutdown(info));
  }

  #handleNotification(method: string, params: unknown): Promise<void> | undefined {
    const handler = this.#options.onNotification;
    if (!handler) {
      this.#logger.debug("jsonrpc.notification_ignored", { method });
      return undefined;
    }
    try {
      const result = handler(method, params);
      if (result instanceof Promise) {
        return result.catch((error) => {
          this.#logger.error("jsonrpc.notification_failed", { method, error });
        });
      }
    } catch (error) {
      this.#logger.error("jsonrpc.notification_failed", { method, error });
    }
    return undefined;
  }

  #handleResponse(msg: JsonRpcMessage): void {
    const id = (msg as { id: RequestId }).id;
    const pending = typeof id === "number" ? this.#pending.get(id) : undefined;
    if (!pending) {
      // A late answer to a call we gave up on (timeout, abort) is expected.
      const expected = typeof id === "number" && this.#abandonedIds.delete(id);
      this.#logger[expected ? "debug" : "warn"]("jsonrpc.unmatched_response", {
        connection: this.connection.label,
        id: String(id),
      });
      return;
    }
    if (isFailure(msg)) {
      pending.reject(new RpcError(msg.error.code, msg.error.message, { data: msg.error.data }));
    } else {
      pending.resolve((msg as { result: unknown }).result);
    }
  }

  /** Starts or queues a request; returns a promise only for inline requests. */
  #dispatch(req: JsonRpcRequest): Promise<void> | null {
    const options = this.#options;
    const inline = options.inline?.(req.method) ?? false;
    const scheduler = this.#scheduler;
    const lane = scheduler.lane(inline ? "\0inline" : options.laneOf?.(req.method) ?? "default");
    const key = options.orderKey?.(req.method, req.params) ?? null;
    const turn = key === null ? null : scheduler.takeTurn(key);
    const call = new InboundCall(scheduler, this.#abort.signal, req, lane, turn);
    if (options.observer || options.tracer) call.received = performance.now();
    this.#running++;
    // Its turn may come after an earlier request about the same thing.
    const after = call.turn?.after;
    const run = after ? after.then(() => this.#start(call)) : this.#start(call);
    return inline ? run : null;
  }

  #start(call: InboundCall): Promise<void> {
    const waiting = this.#scheduler.acquire(call.lane);
    return waiting === null ? this.#run(call) : waiting.then(() => this.#run(call));
  }

  async #run(call: InboundCall): Promise<void> {
    try {
      const req = call.request;
      const began = call.received === 0 ? 0 : performance.now();
      const started = this.#logger.enabled("debug") ? performance.now() : 0;
      const tracer = this.#options.tracer;
      const answer = tracer
        ? tracer.run(
          req.method,
          req.id,
          req.trace,
          async () => await this.#answer(call),
          call.received,
        )
        : this.#answer(call);
      const response = answer instanceof Promise ? await answer : answer;
      const succeeded = "result" in response;
      const observer = this.#options.observer;
      if (observer) {
        const now = performance.now();
        const result = this.#abort.signal.aborted
          ? "disconnected"
          : succeeded
          ? "success"
          : "error";
        observer(req.method, result, (began - call.received) / 1000, (now - began) / 1000);
      }
      const sending = this.send(response);
      if (sending !== SENT) await sending;
      if (started !== 0) {
        // One event per request: what, which, how long, and how it ended.
        this.#logger.debug("jsonrpc.request", {
          connection: this.connection.label,
          method: req.method,
          id: typeof req.id === "bigint" ? String(req.id) : req.id,
          durationMs: Math.round((performance.now() - started) * 1000) / 1000,
          outcome: succeeded ? "ok" : (response as { error: { code: number } }).error.code,
        });
      }
      const after = call.afterCallbacks;
      if (succeeded && after !== null) {
        for (const callback of after) {
          try {
            callback();
          } catch (error) {
            this.#logger.error("jsonrpc.after_response_failed", { method: req.method, error });
          }
        }
      }
    } catch (error) {
      // Nothing above should throw (a tracer might): never an unhandled rejection.
      this.#logger.error("jsonrpc.request_failed", { method: call.method, error });
    } finally {
      if (--this.#running === 0 && this.#idle !== null) {
        this.#idle.resolve();
        this.#idle = null;
      }
    }
  }

  /**
   * Runs the handler; the answer (a result or an error), never a throw: at
   * once when the handler answers synchronously, else a promise.
   */
  #answer(call: InboundCall): Answer | Promise<Answer> {
    const req = call.request;
    let result: unknown;
    try {
      const handler = this.#options.onRequest;
      if (!handler) {
        throw new RpcError(JsonRpcCode.MethodNotFound, `method not found: ${req.method}`);
      }
      result = handler(req.method, req.params ?? null, call);
    } catch (error) {
      call.release();
      return this.#failure(req, error);
    }
    if (!(result instanceof Promise)) {
      call.release();
      return success(req, result);
    }
    return result.then(
      (value) => {
        call.release();
        return success(req, value);
      },
      (error) => {
        call.release();
        return this.#failure(req, error);
      },
    );
  }

  #failure(req: JsonRpcRequest, error: unknown): JsonRpcFailure {
    return { jsonrpc: "2.0", id: req.id, error: this.#toErrorObject(req, error) };
  }

  #toErrorObject(
    req: JsonRpcRequest,
    error: unknown,
  ): { code: number; message: string; data?: unknown } {
    if (error instanceof RpcError) {
      if (error.logDetail !== undefined) {
        this.#logger.debug("jsonrpc.error_detail", {
          method: req.method,
          code: error.code,
          message: error.message,
          detail: error.logDetail,
        });
      }
      return error.data === undefined
        ? { code: error.code, message: error.message }
        : { code: error.code, message: error.message, data: error.data };
    }
    if (error instanceof ConnectionClosedError) {
      return { code: JsonRpcCode.InternalError, message: error.message };
    }
    this.#logger.error("jsonrpc.handler_failed", { method: req.method, error });
    const message = error instanceof Error ? error.message : String(error);
    return { code: JsonRpcCode.InternalError, message: `internal error: ${message}` };
  }
}

/**
 * One inbound request while it runs: its handler's {@linkcode RequestContext}
 * (one object per request, its methods shared), the lane slot it holds and
 * its ordering turn.
 */
class InboundCall implements RequestContext {
  readonly id: RequestId;
  readonly method: string;
  readonly signal: AbortSignal;
  readonly request: JsonRpcRequest;
  readonly lane: Lane;
  readonly turn: Turn | null;
  /** Callbacks for after the response (most requests have none). */
  afterCallbacks: Array<() => void> | null = null;
  /** When it was received (`performance.now()`), when observed; else 0. */
  received = 0;
  #scheduler: RequestScheduler;
  #holding = true;

  constructor(
    scheduler: RequestScheduler,
    signal: AbortSignal,
    request: JsonRpcRequest,
    lane: Lane,
    turn: Turn | null,
  ) {
    this.#scheduler = scheduler;
    this.signal = signal;
    this.request = request;
    this.id = request.id;
    this.method = request.method;
    this.lane = lane;
    this.turn = turn;
  }

  afterResponse(callback: () => void): void {
    (this.afterCallbacks ??= []).push(callback);
  }

  /** The request has taken effect: the next one about the same thing may start, and the slot is free. */
  release(): void {
    this.turn?.pass();
    if (this.#holding) {
      this.#holding = false;
      this.#scheduler.release(this.lane);
    }
  }

  async idle<T>(wait: Promise<T>): Promise<T> {
    // Waiting for something outside: the request has taken effect.
    this.release();
    try {
      return await wait;
    } finally {
      const again = this.#scheduler.acquire(this.lane);
      if (again !== null) await again;
      this.#holding = true;
    }
  }
}
