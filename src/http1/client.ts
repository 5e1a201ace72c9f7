/**
 * The client side of one HTTP/1.1 exchange on an open connection, shared by
 * the `http/request` client and the egress proxy's upstream client: the
 * request head and body go out (the body streamed, framed by length or
 * chunked, while the response is read), response heads are read until the
 * final one (interim `1xx` responses, but `101`, handed to a callback), and
 * the final head comes back with its status checked. Pooling and retries
 * stay with the caller: {@linkcode ClientExchange.progress} says whether
 * anything happened on the connection yet.
 *
 * @module
 */

import type { ByteSource } from "./body.ts";
import { encodeChunk, LAST_CHUNK } from "./body.ts";
import { isInterim, type MessageHead, responseStatus } from "./head.ts";
import { type ByteWriter, writeAll } from "../util/conn_io.ts";

/** A response head that ends the exchange (not an interim one). */
export interface FinalHead {
  /** The parsed head. */
  readonly head: MessageHead;
  /** Its status code. */
  readonly status: number;
}

/** The request body: bytes written after the head, or a stream (length-framed or chunked). */
export type RequestBody =
  | { readonly kind: "none" }
  | { readonly kind: "bytes"; readonly bytes: Uint8Array }
  | {
    readonly kind: "stream";
    readonly stream: ReadableStream<Uint8Array>;
    readonly chunked: boolean;
  };

/** What {@linkcode startExchange} returns. */
export interface ClientExchange {
  /**
   * The final response head; null when the connection closed before any
   * head arrived. Rejects with {@linkcode InvalidStatusLine}, a read error, or
   * the upload's error when the upload failed before a response came.
   */
  readonly response: Promise<FinalHead | null>;
  /** Resolves true once the whole request (head and body) was written, false if it failed. */
  readonly sent: Promise<boolean>;
  /** Whether any body byte was read from the stream or any response head arrived. */
  progress(): { bodyStarted: boolean; headSeen: boolean };
}

/** A response's status line is not `HTTP/1.x NNN`. */
export class InvalidStatusLine extends Error {
  /** Creates the error. */
  constructor() {
    super("invalid response status line");
    this.name = "InvalidStatusLine";
  }
}

/**
 * Writes `head` and `body` on `conn`, and reads response heads from
 * `source` until a final one, handing interim ones to `onInterim`.
 */
export function startExchange(
  conn: ByteWriter,
  source: ByteSource,
  head: Uint8Array,
  body: RequestBody,
  onInterim: (head: MessageHead, status: number) => Promise<void> | void = () => {},
): ClientExchange {
  let bodyStarted = false;
  let headSeen = false;
  const sending = (async () => {
    await writeAll(conn, head);
    if (body.kind === "none") return;
    if (body.kind === "bytes") {
      if (body.bytes.length) await writeAll(conn, body.bytes);
      return;
    }
    const reader = body.stream.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        bodyStarted = true;
        if (value.length) await writeAll(conn, body.chunked ? encodeChunk(value) : value);
      }
      if (body.chunked) await writeAll(conn, LAST_CHUNK);
    } finally {
      reader.releaseLock();
    }
  })();
  const sent = sending.then(() => true, () => false);
  const response = (async (): Promise<FinalHead | null> => {
    for (;;) {
      const parsed = await Promise.race([
        source.head(),
        // A failed upload ends the wait unless a response is already on its way.
        sending.then(() => new Promise<never>(() => {}), (error) => Promise.reject(error)),
      ]);
      if (parsed === null) return null;
      headSeen = true;
      const status = responseStatus(parsed);
      if (status === null) throw new InvalidStatusLine();
      if (!isInterim(status)) return { head: parsed, status };
      await onInterim(parsed, status);
    }
  })();
  return { response, sent, progress: () => ({ bodyStarted, headSeen }) };
}
