/**
 * The receiving side's message logic, without I/O: data frames (and
 * fragments) into messages within the size limit, text checked as strict
 * UTF-8, and Close payloads validated (RFC 6455 §5.4, §5.5.1, §7.4). The
 * channel ({@linkcode ./channel.ts}) reads the socket and answers control
 * frames; this decides what the frames mean.
 *
 * @module
 */

import { MessageBuffer, messageSpare } from "../util/spare_buffer.ts";
import { strictUtf8Decoder } from "../util/utf8.ts";
import { CloseCode, type Frame, Opcode, WebSocketProtocolError } from "./frame.ts";

/**
 * A long text message's bytes, their UTF-8 not checked yet (a channel made
 * with `rawTextFrom`): the consumer checks it — failing the channel with
 * {@linkcode CloseCode.InvalidPayload} when it is not — and may skip
 * building a string of it. `owned`: the bytes are the consumer's (given
 * back to `messageSpare` when done with); else they are valid until the
 * next message is asked for.
 */
export class RawText {
  /** Wraps a message's bytes. */
  constructor(readonly bytes: Uint8Array, readonly owned: boolean) {}
}

/** One inbound data message: text, or binary bytes. */
export type WebSocketMessage = string | Uint8Array;

/** What the assembler hands out: a message, or a long text's bytes ({@linkcode RawText}). */
export type AssembledMessage = WebSocketMessage | RawText;

/** Turns data frames into messages (see the module documentation). */
export class MessageAssembler {
  #fragments: MessageBuffer;
  #fragmentOpcode = -1;
  #decode = strictUtf8Decoder();

  /**
   * An assembler of messages up to `maxMessageBytes`; text messages of
   * `rawTextFrom` bytes or more are handed out as {@linkcode RawText}.
   */
  constructor(readonly maxMessageBytes: number, readonly rawTextFrom = Infinity) {
    this.#fragments = new MessageBuffer(maxMessageBytes);
  }

  /** A text or binary frame that is a message on its own (not a fragment). */
  isWholeData(frame: Frame): boolean {
    return frame.fin && this.#fragmentOpcode === -1 &&
      (frame.opcode === Opcode.Text || frame.opcode === Opcode.Binary);
  }

  /**
   * Takes a data frame (text, binary or continuation): the completed
   * message, or null while fragments are still coming. Throws
   * {@linkcode WebSocketProtocolError} for an out-of-order frame, a message
   * over the limit, or invalid UTF-8.
   */
  data(frame: Frame): AssembledMessage | null {
    if (frame.opcode === Opcode.Continuation) {
      if (this.#fragmentOpcode === -1) {
        throw new WebSocketProtocolError(CloseCode.ProtocolError, "unexpected continuation frame");
      }
      this.#addFragment(frame.payload);
      if (!frame.fin) return null;
      const opcode = this.#fragmentOpcode;
      this.#fragmentOpcode = -1;
      const total = this.#fragments.view();
      if (opcode === Opcode.Text && total.length >= this.rawTextFrom) {
        // The gathered buffer goes with the message.
        this.#fragments.forget();
        return new RawText(total, true);
      }
      // Copied out (a binary message is kept by its consumer; a text one is decoded).
      try {
        return this.complete(opcode, opcode === Opcode.Binary ? total.slice() : total);
      } finally {
        this.#fragments.release();
      }
    }
    if (this.#fragmentOpcode !== -1) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, "expected a continuation frame");
    }
    if (frame.fin) return this.complete(frame.opcode, frame.payload, frame.lent !== true);
    this.#fragmentOpcode = frame.opcode;
    this.#addFragment(frame.payload);
    return null;
  }

  /**
   * A whole message's payload as the message (limit and UTF-8 checked; a
   * long text's bytes lent as {@linkcode RawText}).
   */
  complete(opcode: number, payload: Uint8Array, owned = false): AssembledMessage {
    if (payload.length > this.maxMessageBytes) {
      throw new WebSocketProtocolError(
        CloseCode.MessageTooBig,
        `message exceeds the limit of ${this.maxMessageBytes} bytes`,
      );
    }
    if (opcode === Opcode.Binary) return payload;
    if (payload.length >= this.rawTextFrom) return new RawText(payload, owned);
    try {
      return this.#decode(payload);
    } catch {
      throw new WebSocketProtocolError(CloseCode.InvalidPayload, "invalid UTF-8 in a text frame");
    }
  }

  /** A {@linkcode RawText}'s text, null when it is not UTF-8 (its buffer given back when owned). */
  text(raw: RawText): string | null {
    try {
      return this.#decode(raw.bytes);
    } catch {
      return null;
    } finally {
      if (raw.owned) messageSpare.give(raw.bytes);
    }
  }

  /** A Close frame's code (1005 when it has none) and reason, validated. */
  closeFrame(p: Uint8Array): { code: number; reason: string } {
    if (p.length === 1) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, "invalid close payload");
    }
    const code = p.length >= 2 ? new DataView(p.buffer, p.byteOffset).getUint16(0) : 1005;
    if (p.length >= 2 && !isValidCloseCode(code)) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, `invalid close code ${code}`);
    }
    try {
      return { code, reason: p.length > 2 ? this.#decode(p.subarray(2)) : "" };
    } catch {
      throw new WebSocketProtocolError(CloseCode.InvalidPayload, "invalid close reason");
    }
  }

  #addFragment(payload: Uint8Array): void {
    if (this.#fragments.length + payload.length > this.maxMessageBytes) {
      this.#fragments.release();
      throw new WebSocketProtocolError(
        CloseCode.MessageTooBig,
        `message exceeds the limit of ${this.maxMessageBytes} bytes`,
      );
    }
    this.#fragments.append(payload);
    // Copied: a large fragment's buffer may take the next frame.
    messageSpare.give(payload);
  }
}

/**
 * True for a close code a peer may send (RFC 6455 §7.4): the defined
 * 1000–1003 and 1007–1014, and 3000–4999 for libraries and applications.
 * 1004 (reserved), 1005, 1006 and 1015 (never on the wire), everything below
 * 1000 and the unassigned ranges are protocol errors.
 */
export function isValidCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
}
