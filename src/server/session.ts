/**
 * A session owns processes and outlives WebSocket connections: when its
 * connection drops it is detached (processes keep running, their output is
 * kept) and a new connection may resume it until the TTL expires, at which
 * point every process group is killed.
 *
 * The session is each process's sink: it turns process events into
 * notifications on the attached connection, and reports delivery back so
 * the process can bound what it keeps.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import type { ManagedProcess, ProcessSink } from "../process/managed_process.ts";
import type { ProcessEvent } from "../process/output_log.ts";
import { ServerNotification } from "../protocol/methods.ts";
import type { ProcessClosedNotification, ProcessExitedNotification } from "../protocol/types.ts";
import { Base64Part, RawJson } from "../jsonrpc/message.ts";
import type { NotificationName, NotificationParams } from "../protocol/spec.ts";

/** Where a session sends notifications while attached. */
export interface SessionAttachment {
  /** Sends a notification; resolves true once a live connection queued it. */
  notify<N extends NotificationName>(
    method: N,
    params: NotificationParams<N> | RawJson,
  ): Promise<boolean>;
  /** Null when there is room; otherwise resolves when there is. */
  ready(): Promise<void> | null;
  /** Asks the client; rejects on an error answer, a lost connection or after `timeoutMs`. */
  request(method: string, params: unknown, timeoutMs: number): Promise<unknown>;
  /** For logs. */
  readonly label: string;
}

/** How long a resumed session keeps history for clients that never read. */
const HISTORY_HOLD_MS = 15_000;

/** Timing options of sessions. */
export interface SessionTimings {
  /** How long a closed process stays readable (ms). */
  readonly processRetentionMs: number;
  /** How long a detached session waits to be resumed (ms). */
  readonly sessionTtlMs: number;
}

/** A process notification: its name and payload (output is serialised ahead). */
export type ProcessEventNotification =
  | { method: typeof ServerNotification.ProcessOutput; params: RawJson }
  | { method: typeof ServerNotification.ProcessExited; params: ProcessExitedNotification }
  | { method: typeof ServerNotification.ProcessClosed; params: ProcessClosedNotification };

/** Maps a process event to its notification. */
export function eventNotification(
  processId: string,
  event: ProcessEvent,
): ProcessEventNotification {
  switch (event.kind) {
    case "output": {
      // Built as text: base64 never needs escaping, and JSON.stringify would
      // scan every byte of the largest messages the server sends.
      const params = new RawJson(
        `{"processId":${
          JSON.stringify(processId)
        },"seq":${event.seq},"stream":"${event.stream}","chunk":"`,
        new Base64Part(event.chunk),
        '"}',
      );
      return { method: ServerNotification.ProcessOutput, params };
    }
    case "exited": {
      const params: ProcessExitedNotification = {
        processId,
        seq: event.seq,
        exitCode: event.exitCode,
        sandboxDenied: event.sandboxDenied,
      };
      if (event.signal !== null) params.signal = event.signal;
      return { method: ServerNotification.ProcessExited, params };
    }
    case "closed": {
      const params: ProcessClosedNotification = { processId, seq: event.seq };
      return { method: ServerNotification.ProcessClosed, params };
    }
  }
}

/** See the module documentation. */
export class Session implements ProcessSink {
  /** The session id (a UUID). */
  readonly id: string;

  #processes = new Map<string, ManagedProcess>();
  #retention = new Map<string, ReturnType<typeof setTimeout>>();
  #attachment: SessionAttachment | null = null;
  #expiry: ReturnType<typeof setTimeout> | undefined;
  #timings: SessionTimings;
  #logger: Logger;
  #onExpire: (session: Session) => void;
  #terminated = false;
  #holdTimer: ReturnType<typeof setTimeout> | undefined;

  /** Creates a detached session; call {@linkcode attach} next. */
  constructor(
    id: string,
    timings: SessionTimings,
    logger: Logger,
    onExpire: (session: Session) => void,
  ) {
    this.id = id;
    this.#timings = timings;
    this.#logger = logger.child({ sessionId: id });
    this.#onExpire = onExpire;
  }

  /** True while a connection is attached. */
  get attached(): boolean {
    return this.#attachment !== null;
  }

  /** True once the session was terminated. */
  get terminated(): boolean {
    return this.#terminated;
  }

  /** Attaches a connection and replays what it has not yet received. */
  attach(attachment: SessionAttachment): void {
    // Only a timer that exists is cleared: Deno loads its timers on the
    // first `clearTimeout` too, and a new session's first answer need not wait.
    if (this.#expiry !== undefined) clearTimeout(this.#expiry);
    this.#expiry = undefined;
    this.#attachment = attachment;
    for (const process of this.#processes.values()) process.setSink(this);
    // A resumed client catches up with process/read, which releases each
    // process's held history; a client that never does must not pause its
    // processes for ever.
    // Only a resumed session's processes hold history (a new one has none).
    if (this.#holdTimer !== undefined) clearTimeout(this.#holdTimer);
    this.#holdTimer = undefined;
    if (this.#processes.size > 0) {
      this.#holdTimer = setTimeout(() => {
        this.#holdTimer = undefined;
        for (const process of this.#processes.values()) process.log.releaseHistory();
      }, HISTORY_HOLD_MS);
    }
    this.#logger.debug("session.attached", { connection: attachment.label });
  }

  /** Detaches the connection; processes keep running until the TTL expires. */
  detach(): void {
    if (this.#terminated) return;
    this.#attachment = null;
    clearTimeout(this.#holdTimer);
    this.#holdTimer = undefined;
    // The lost connection may not have received the tail of what was sent:
    // keep that history until the next client has caught up.
    for (const process of this.#processes.values()) process.log.holdHistory();
    clearTimeout(this.#expiry);
    this.#expiry = setTimeout(() => {
      this.#expiry = undefined;
      this.#logger.info("session.expired", { processes: this.#processes.size });
      this.#onExpire(this);
    }, this.#timings.sessionTtlMs);
    this.#logger.debug("session.detached", { ttlMs: this.#timings.sessionTtlMs });
  }

  /** {@inheritDoc ProcessSink.deliver} */
  deliver(process: ManagedProcess, event: ProcessEvent): Promise<boolean> {
    const attachment = this.#attachment;
    if (attachment === null || this.#processes.get(process.id) !== process) {
      return Promise.resolve(false);
    }
    const notification = eventNotification(process.id, event);
    return attachment.notify(notification.method, notification.params);
  }

  /**
   * Asks the attached client (a server → client request); rejects when no
   * client is attached, on an error answer, or after `timeoutMs`.
   */
  request(method: string, params: unknown, timeoutMs: number): Promise<unknown> {
    const attachment = this.#attachment;
    if (attachment === null) return Promise.reject(new Error("no client attached"));
    return attachment.request(method, params, timeoutMs);
  }

  /** Notifies the attached client, if any (best effort: nothing is kept for a later one). */
  notify<N extends NotificationName>(method: N, params: NotificationParams<N>): void {
    void this.#attachment?.notify(method, params);
  }

  /** {@inheritDoc ProcessSink.ready} */
  ready(): Promise<void> | null {
    return this.#attachment?.ready() ?? null;
  }

  /** The process with `id`, if retained. */
  process(id: string): ManagedProcess | undefined {
    return this.#processes.get(id);
  }

  /** True when `id` is taken (running, or exited and retained). */
  hasProcess(id: string): boolean {
    return this.#processes.has(id);
  }

  /** Number of retained processes. */
  get processCount(): number {
    return this.#processes.size;
  }

  /** Adds a started process and schedules its removal after it closes. */
  addProcess(process: ManagedProcess): void {
    this.#processes.set(process.id, process);
    process.setSink(this);
    process.finished.then(() => this.#scheduleRetention(process));
  }

  #scheduleRetention(process: ManagedProcess): void {
    if (this.#terminated || this.#processes.get(process.id) !== process) return;
    clearTimeout(this.#retention.get(process.id));
    this.#retention.set(
      process.id,
      setTimeout(() => {
        this.#retention.delete(process.id);
        if (this.#processes.get(process.id) !== process) return;
        // Never forget output nobody has received yet.
        if (process.log.deliveredSeq < process.log.nextSeq - 1 && !this.attached) {
          this.#scheduleRetention(process);
          return;
        }
        this.#processes.delete(process.id);
        process.dispose();
      }, this.#timings.processRetentionMs),
    );
  }

  /** Kills every process group and forgets everything. */
  async terminate(): Promise<void> {
    if (this.#terminated) return;
    this.#terminated = true;
    this.#attachment = null;
    clearTimeout(this.#expiry);
    this.#expiry = undefined;
    clearTimeout(this.#holdTimer);
    this.#holdTimer = undefined;
    for (const timer of this.#retention.values()) clearTimeout(timer);
    this.#retention.clear();
    const processes = [...this.#processes.values()];
    this.#processes.clear();
    await Promise.all(processes.map((p) => p.dispose()));
  }
}
