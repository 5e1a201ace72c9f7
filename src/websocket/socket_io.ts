/**
 * A channel's bytes in and out, whatever the transport offers: direct
 * `read`/`write` (a `Deno.Conn`: one operation each, no stream promise
 * hops), a BYOB-readable stream, or a plain stream. Reads go into one
 * reused buffer that grows while reads fill it — or, for a large payload,
 * straight into the frame's own buffer. Writes keep their order; a failed
 * one is reported once and every later one fails at once.
 *
 * @module
 */

import { type ByteWriter, writeAll } from "../util/conn_io.ts";

/** The duplex byte stream a channel runs over (e.g. a `Deno.Conn`). */
export interface ByteDuplex {
  /** Inbound bytes. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Outbound bytes. */
  readonly writable: WritableStream<Uint8Array>;
  /**
   * Reads into `p` (as `Deno.Conn.read`). When both this and `write` exist
   * the channel uses them instead of the streams: one operation per read and
   * per write, without the stream machinery's promise hops.
   */
  read?(p: Uint8Array): Promise<number | null>;
  /** Writes some of `p`; resolves with how much (as `Deno.Conn.write`). */
  write?(p: Uint8Array): Promise<number>;
  /** Closes the underlying transport. */
  close(): void;
}

/**
 * Bytes asked of the transport per read between payloads: from READ_MIN,
 * doubling while reads fill the buffer, up to READ_MAX (idle sockets stay
 * small, busy ones read several frames at once).
 */
const READ_MIN = 4 * 1024;
const READ_MAX = 256 * 1024;
/** Payload bytes still to come that are read straight into the payload. */
const DIRECT_READ_MIN = 128 * 1024;
/** Most read straight into a payload at once. */
const DIRECT_READ_MAX = 1024 * 1024;

/** One read: the bytes, and whether they landed in the payload tail offered. */
export interface SocketRead {
  readonly chunk: Uint8Array;
  /** The bytes are the start of the `tail` passed to {@linkcode SocketIo.read}. */
  readonly intoTail: boolean;
}

const readFailed = (): null => null;

/** See the module documentation. */
export class SocketIo {
  #transport: ByteDuplex;
  #direct: (ByteWriter & { read(p: Uint8Array): Promise<number | null> }) | null;
  #reader: ReadableStreamDefaultReader<Uint8Array> | ReadableStreamBYOBReader | null = null;
  #byob = false;
  #writer: WritableStreamDefaultWriter<Uint8Array> | null = null;
  /** Reads land here between payloads (reused, grown; transferred each BYOB read). */
  #scratch: Uint8Array = new Uint8Array(0);
  /** Where the direct read in progress goes (one read at a time). */
  #readInto: Uint8Array = new Uint8Array(0);
  #readIntoTail = false;
  /** The bytes of the write started by {@linkcode write}'s common case. */
  #writing: Uint8Array | null = null;
  /** Direct writes, in order. */
  #writeChain: Promise<void> = Promise.resolve();
  /** Writes started and not yet settled. */
  #writesInFlight = 0;
  #closed = false;
  readonly #onWriteFailed: () => void;

  /** Wraps `transport`; `onWriteFailed` runs when a write fails (once per failure). */
  constructor(transport: ByteDuplex, onWriteFailed: () => void) {
    this.#transport = transport;
    this.#onWriteFailed = onWriteFailed;
    const { read, write } = transport;
    this.#direct = read && write
      ? { read: (p) => read.call(transport, p), write: (p) => write.call(transport, p) }
      : null;
    if (this.#direct) {
      this.#scratch = new Uint8Array(READ_MIN);
      return;
    }
    try {
      this.#reader = transport.readable.getReader({ mode: "byob" });
      this.#byob = true;
      this.#scratch = new Uint8Array(READ_MIN);
    } catch {
      this.#reader = transport.readable.getReader();
    }
    this.#writer = transport.writable.getWriter();
    this.#writer.closed.catch(() => onWriteFailed());
  }

  /**
   * The next bytes, or null at the end (or when reading fails). `tail` is
   * the rest of a payload being received: when large, the bytes go straight
   * into it.
   */
  read(tail: Uint8Array): Promise<SocketRead | null> {
    const direct = this.#direct;
    if (direct === null) return this.#streamRead(tail);
    const intoTail = tail.length >= DIRECT_READ_MIN;
    const into = intoTail ? tail.subarray(0, DIRECT_READ_MAX) : this.#scratch;
    this.#readInto = into;
    this.#readIntoTail = intoTail;
    try {
      return direct.read(into).then(this.#directRead, readFailed);
    } catch {
      return Promise.resolve(null);
    }
  }

  readonly #directRead = (n: number | null): SocketRead | null => {
    if (n === null) return null;
    const into = this.#readInto;
    const intoTail = this.#readIntoTail;
    if (!intoTail && n === into.length && n < READ_MAX) this.#scratch = new Uint8Array(n * 2);
    return { chunk: into.subarray(0, n), intoTail };
  };

  async #streamRead(tail: Uint8Array): Promise<SocketRead | null> {
    try {
      if (this.#byob) {
        const intoTail = tail.length >= DIRECT_READ_MIN;
        const into = intoTail ? tail.subarray(0, DIRECT_READ_MAX) : this.#scratch;
        const result = await (this.#reader as ReadableStreamBYOBReader).read(into);
        if (result.done || !result.value) return null;
        const chunk = result.value;
        if (!intoTail) {
          // The buffer was transferred: keep its new self, or a bigger one.
          const full = chunk.length === chunk.buffer.byteLength;
          this.#scratch = full && chunk.length < READ_MAX
            ? new Uint8Array(chunk.length * 2)
            : new Uint8Array(chunk.buffer);
        }
        return { chunk, intoTail };
      }
      const result = await (this.#reader as ReadableStreamDefaultReader<Uint8Array>).read();
      return result.done ? null : { chunk: result.value, intoTail: false };
    } catch {
      return null;
    }
  }

  /** Writes `bytes` after every earlier write; resolves when the transport took them. */
  write(bytes: Uint8Array): Promise<void> {
    const direct = this.#direct;
    if (!direct) return this.#writer!.write(bytes);
    let written: Promise<void>;
    if (this.#writesInFlight === 0 && !this.#closed) {
      // The common case: the bytes go to the socket now, before the rest of
      // this turn's work (a reply leaves ahead of its bookkeeping), and most
      // writes are taken whole — no async frame.
      this.#writesInFlight++;
      this.#writing = bytes;
      try {
        written = direct.write(bytes).then(this.#wrote, this.#writeFailed);
      } catch (error) {
        written = Promise.resolve().then(() => this.#writeFailed(error));
      }
    } else {
      written = this.#writeAfter(
        direct,
        bytes,
        this.#writesInFlight === 0 ? null : this.#writeChain,
      );
    }
    this.#writeChain = written;
    return written;
  }

  readonly #wrote = (n: number): Promise<void> | undefined => {
    const bytes = this.#writing!;
    this.#writing = null;
    this.#writesInFlight--;
    if (n >= bytes.length) return undefined;
    // Taken in part: the rest goes next (writes after this one wait for
    // the promise this becomes part of).
    return this.#writeAfter(this.#direct!, bytes.subarray(n), null);
  };

  readonly #writeFailed = (error: unknown): never => {
    this.#writing = null;
    this.#writesInFlight--;
    // A failed write ends the channel; later writes then fail at once.
    this.#onWriteFailed();
    throw error;
  };

  async #writeAfter(
    direct: ByteWriter,
    bytes: Uint8Array,
    after: Promise<void> | null,
  ): Promise<void> {
    this.#writesInFlight++;
    try {
      if (after !== null) {
        try {
          await after;
        } catch { /* reported by that write; the channel is closed now */ }
      }
      if (this.#closed) throw new Error("WebSocket is closed");
      await writeAll(direct, bytes);
    } catch (error) {
      // A failed write ends the channel; later writes then fail at once.
      this.#onWriteFailed();
      throw error;
    } finally {
      this.#writesInFlight--;
    }
  }

  /** Stops reading and writing and closes the transport. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#reader?.cancel().catch(() => {});
    this.#writer?.close().catch(() => {});
    try {
      this.#transport.close();
    } catch { /* already closed */ }
  }
}
