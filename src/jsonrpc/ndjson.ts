/**
 * Newline-delimited JSON over a pair of byte streams (stdio, a child's pipes).
 *
 * Input is split on `\n` bytes before any decoding, in linear time even for
 * lines that arrive in many pieces. A trailing `\r` is tolerated, blank lines
 * are ignored, a line over the limit or with invalid UTF-8 ends the
 * connection (logged by the caller through `closed`), and text that is not a
 * JSON-RPC message yields a {@linkcode MalformedMessage} so the peer can
 * answer it while the connection stays open.
 *
 * @module
 */

import { MessageBuffer } from "../util/spare_buffer.ts";
import { indexOfNewline } from "../util/bytes.ts";
import { C, loadLibc } from "../util/libc.ts";
import type { ByteReader } from "../util/conn_io.ts";
import {
  type CloseInfo,
  closeLatch,
  type Connection,
  messageConnection,
  type MessageSource,
} from "./connection.ts";
import { decodeMessage, type IncomingMessage } from "./message.ts";
import { createOutputSink, ndjsonFraming } from "./output_sink.ts";
import { DEFAULT_JSON_LIMITS, type StrictJsonLimits } from "./strict_json.ts";
import { strictUtf8Decoder } from "../util/utf8.ts";
import { decodeLargeMessage, LARGE_MESSAGE_BYTES } from "./large_message.ts";

/** The pipe buffer and read size for long lines. */
const PIPE_BYTES = 1024 * 1024;

/** Default maximum line length: 64 MiB, newline excluded. */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

/** Options for {@linkcode ndjsonConnection}. */
export interface NdjsonOptions {
  /** Label for logs and parse errors. Default `"stdio"`. */
  readonly label?: string;
  /** Prefix of parse-error messages. Default `failed to parse JSON-RPC message from <label>`. */
  readonly parseErrorPrefix?: string;
  /** Maximum line length in bytes. Default 64 MiB. */
  readonly maxLineBytes?: number;
  /** JSON value budget and depth. */
  readonly jsonLimits?: StrictJsonLimits;
  /** Output bytes that may wait before writes block. Default 1 MiB. */
  readonly outputHighWaterMark?: number;
  /** Largest message the reader of `output` accepts. Default: unlimited. */
  readonly maxOutgoingBytes?: number;
  /**
   * `output` is one of Deno's resource streams (stdout, a child's stdin),
   * which are done with written bytes once a write resolves: output buffers
   * can be reused.
   */
  readonly outputIsResource?: boolean;
  /**
   * Where a large message's base64 may be decoded straight from its bytes
   * (see {@linkcode decodeLargeMessage}). Default: nowhere.
   */
  readonly base64Members?: ReadonlyMap<string, string>;
  /**
   * The input's file descriptor when it may be a pipe (stdin): once a line
   * outgrows 64 KiB, the pipe's buffer is grown to 1 MiB (`F_SETPIPE_SZ`,
   * where libc is reachable; nothing happens for anything but a pipe) and
   * reads take up to that much — a 43 MB upload in 43 reads, not 680.
   */
  readonly pipeFd?: number;
}

const EMPTY = new Uint8Array(0);

function isBlank(line: Uint8Array): boolean {
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0a) return false;
  }
  return true;
}

/**
 * Splits a byte stream into lines without the `\n`, keeping at most
 * `maxLineBytes` of an unfinished line, gathered in one buffer
 * ({@linkcode MessageBuffer}). A line handed to `onLine` is valid only
 * until it returns.
 */
export class LineSplitter {
  #pending: MessageBuffer;

  /** Creates a splitter rejecting lines longer than `maxLineBytes`. */
  constructor(readonly maxLineBytes: number) {
    this.#pending = new MessageBuffer(maxLineBytes);
  }

  /**
   * Feeds `chunk`, calling `onLine` for every completed line. Returns false
   * (and stops) when a line exceeds the limit.
   */
  push(chunk: Uint8Array, onLine: (line: Uint8Array) => void): boolean {
    const pending = this.#pending;
    let start = 0;
    let nl = indexOfNewline(chunk, start);
    while (nl !== -1) {
      const piece = chunk.subarray(start, nl);
      if (pending.length > 0) {
        if (pending.length + piece.length > this.maxLineBytes) return false;
        pending.append(piece);
        try {
          onLine(pending.view());
        } finally {
          pending.release();
        }
      } else if (piece.length > this.maxLineBytes) {
        return false;
      } else {
        onLine(piece);
      }
      start = nl + 1;
      nl = indexOfNewline(chunk, start);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (pending.length + rest.length > this.maxLineBytes) return false;
      // Copied: the caller may reuse the chunk's buffer.
      pending.append(rest);
    }
    return true;
  }

  /**
   * Room for up to `max` more bytes of the unfinished line, when one longer
   * than {@linkcode LARGE_MESSAGE_BYTES} is held and at least that much
   * room is left under the limit (else empty): a reader may read straight
   * into it — no copy of a long line's bytes — and report them with
   * {@linkcode pushTail}.
   */
  pendingTail(max: number): Uint8Array {
    const pending = this.#pending;
    const room = Math.min(max, this.maxLineBytes - pending.length);
    return pending.length > LARGE_MESSAGE_BYTES && room >= LARGE_MESSAGE_BYTES
      ? pending.tail(room)
      : EMPTY;
  }

  /**
   * Takes `n` bytes read into the last {@linkcode pendingTail} as
   * {@linkcode push} takes a chunk (only they are searched for a newline).
   */
  pushTail(n: number, onLine: (line: Uint8Array) => void): boolean {
    const pending = this.#pending;
    let start = 0;
    const from = pending.length;
    pending.commit(n);
    const bytes = pending.view();
    let nl = indexOfNewline(bytes, from);
    if (nl === -1) return true;
    // The lines end inside the buffer: each is handed out from it, and the
    // bytes after the last newline move to its front.
    while (nl !== -1) {
      if (nl - start > this.maxLineBytes) return false;
      onLine(bytes.subarray(start, nl));
      start = nl + 1;
      nl = indexOfNewline(bytes, start);
    }
    pending.keepFrom(start);
    return true;
  }

  /** Bytes of an unfinished line held right now. */
  get pendingBytes(): number {
    return this.#pending.length;
  }

  /** Hands out the unfinished line (at end of input) and forgets it; `null` when none. */
  takeRest(): Uint8Array | null {
    if (this.#pending.length === 0) return null;
    const rest = this.#pending.view().slice();
    this.#pending.release();
    return rest;
  }
}

/**
 * Builds a {@linkcode Connection} over newline-delimited JSON carried by
 * `input` and `output`. `input` may be a byte stream or, cheaper, a reader
 * like `Deno.stdin` (one read operation per chunk into a reused buffer).
 */
export function ndjsonConnection(
  input: ReadableStream<Uint8Array> | ByteReader,
  output: WritableStream<Uint8Array>,
  options: NdjsonOptions = {},
): Connection {
  const label = options.label ?? "stdio";
  const prefix = options.parseErrorPrefix ?? `failed to parse JSON-RPC message from ${label}`;
  const maxLine = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const limits = options.jsonLimits ?? DEFAULT_JSON_LIMITS;
  const members = options.base64Members;
  const latch = closeLatch();
  const decode = strictUtf8Decoder();
  const splitter = new LineSplitter(maxLine);
  const direct = input instanceof ReadableStream ? null : input;
  const reader = input instanceof ReadableStream ? input.getReader() : null;
  let buffer = direct ? new Uint8Array(64 * 1024) : null;
  let grown = false;
  /** A long line is coming: larger reads (see `pipeFd`). */
  const growReads = () => {
    grown = true;
    if (options.pipeFd !== undefined) loadLibc()?.fcntl(options.pipeFd, C.F_SETPIPE_SZ, PIPE_BYTES);
    buffer = new Uint8Array(PIPE_BYTES);
  };
  /**
   * Reads the next bytes and hands them to the splitter: false when a line
   * exceeds the limit; null at the end. A long line's bytes are read
   * straight into its buffer; other reads go to the reused one.
   */
  const readInto = async (onLine: (line: Uint8Array) => void): Promise<boolean | null> => {
    const tail = direct && grown ? splitter.pendingTail(PIPE_BYTES) : EMPTY;
    if (tail.length > 0) {
      const n = await direct!.read(tail);
      return n === null ? null : splitter.pushTail(n, onLine);
    }
    const chunk = await readChunk();
    return chunk === null ? null : splitter.push(chunk, onLine);
  };
  /** The next chunk (a view of the reused buffer when reading directly), null at the end. */
  const readChunk = async (): Promise<Uint8Array | null> => {
    if (direct) {
      const n = await direct.read(buffer!);
      return n === null ? null : buffer!.subarray(0, n);
    }
    const result = await reader!.read();
    return result.done ? null : result.value;
  };
  const writer = output.getWriter();

  const finish = (info: CloseInfo) => {
    if (latch.done) return;
    latch.resolve(info);
    reader?.cancel().catch(() => {});
  };

  // Messages of lines already read, handed out one by one without a promise.
  let ready: IncomingMessage[] = [];
  let taken = 0;
  let reading: Promise<IncomingMessage | null> | null = null;
  let ended = false;

  /** Reads until at least one message is ready; false at the end. */
  const fill = async (): Promise<boolean> => {
    let violation: string | null = null;
    const onLine = (line: Uint8Array) => {
      if (violation !== null) return;
      if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, -1);
      if (isBlank(line)) return;
      const large = decodeLargeMessage(line, members, limits, decode);
      if (large !== null) {
        ready.push(large);
        return;
      }
      let text: string;
      try {
        text = decode(line);
      } catch {
        violation = "invalid UTF-8 in input";
        return;
      }
      ready.push(decodeMessage(text, prefix, limits));
    };
    while (ready.length === 0) {
      let fits: boolean | null;
      try {
        // Lines are decoded as they are found and the splitter copies an
        // unfinished one: the buffer is free again once push returns.
        fits = latch.done ? null : await readInto(onLine);
      } catch (error) {
        finish({ reason: `read failed: ${(error as Error).message}`, error });
        return false;
      }
      if (fits === null || latch.done) {
        finish({ reason: "eof" });
        return false;
      }
      if (!fits) violation = `line exceeds ${maxLine} bytes`;
      if (!grown && direct && splitter.pendingBytes > LARGE_MESSAGE_BYTES) growReads();
      if (violation !== null) {
        // Messages before the violation are still delivered, then the end.
        ended = true;
        finish({ reason: violation });
        return ready.length > 0;
      }
    }
    return true;
  };
  const take = (): IncomingMessage => {
    const message = ready[taken]!;
    if (++taken === ready.length) {
      ready = [];
      taken = 0;
    }
    return message;
  };
  const messages: MessageSource = {
    next() {
      if (taken < ready.length) return take();
      if (reading !== null) return reading.then(() => messages.next());
      if (ended) return null;
      reading = fill().then((more) => {
        reading = null;
        if (!more) {
          ended = true;
          return null;
        }
        return take();
      });
      return reading;
    },
    cancel() {
      finish({ reason: "closed locally" });
    },
  };

  const output$ = createOutputSink(
    ndjsonFraming,
    (bytes) => writer.write(bytes),
    async () => {
      await writer.close().catch(() => {});
    },
    { highWaterMark: options.outputHighWaterMark, reuseBuffers: options.outputIsResource },
  );
  writer.closed.catch((error) => {
    output$.fail(error);
    finish({ reason: "output closed", error });
  });

  return messageConnection({
    input: messages,
    output: output$,
    closed: latch.promise,
    label,
    maxOutgoingBytes: options.maxOutgoingBytes ?? Infinity,
    close(reason) {
      finish({ reason });
      // An explicit close ends our output too (EOF for the other side); an
      // input EOF alone does not, so pending answers still go out.
      writer.close().catch(() => writer.abort().catch(() => {}));
    },
  });
}
