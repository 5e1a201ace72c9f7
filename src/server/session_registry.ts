/**
 * Creates, resumes and expires sessions.
 *
 * @module
 */

import type { Logger } from "../log/logger.ts";
import { RpcError } from "../jsonrpc/errors.ts";
import { ErrorCode, unknownSession } from "../protocol/errors.ts";
import { Session, type SessionAttachment, type SessionTimings } from "./session.ts";

/** See the module documentation. */
export class SessionRegistry {
  #sessions = new Map<string, Session>();
  #timings: SessionTimings;
  #logger: Logger;
  #terminating = new Set<Promise<void>>();

  /** Creates an empty registry. */
  constructor(timings: SessionTimings, logger: Logger) {
    this.#timings = timings;
    this.#logger = logger;
  }

  /** Number of live sessions. */
  get size(): number {
    return this.#sessions.size;
  }

  /** Creates a session attached to `attachment`. */
  create(attachment: SessionAttachment): Session {
    const session = new Session(
      crypto.randomUUID(),
      this.#timings,
      this.#logger,
      (s) => this.terminate(s),
    );
    this.#sessions.set(session.id, session);
    session.attach(attachment);
    return session;
  }

  /**
   * Re-attaches a detached session. Fails with `-32600` for an unknown or
   * expired id and `-32010` when another connection holds it.
   */
  resume(id: string, attachment: SessionAttachment): Session {
    const session = this.#sessions.get(id);
    if (!session) throw unknownSession(id);
    if (session.attached) {
      throw new RpcError(
        ErrorCode.SessionAttached,
        `session ${id} is already attached to another connection`,
      );
    }
    session.attach(attachment);
    return session;
  }

  /** Looks a session up. */
  get(id: string): Session | undefined {
    return this.#sessions.get(id);
  }

  /** Kills a session's processes and forgets it. */
  terminate(session: Session): Promise<void> {
    this.#sessions.delete(session.id);
    const done = session.terminate();
    this.#terminating.add(done);
    done.finally(() => this.#terminating.delete(done));
    return done;
  }

  /** Terminates every session. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#sessions.values()].map((s) => this.terminate(s)));
    await Promise.all([...this.#terminating]);
  }
}
