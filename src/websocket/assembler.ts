/**
 * The receiving side's message logic, without I/O: data frames (and
 * fragments) into messages within the size limit, text checked as strict
 * UTF-8, and Close payloads validated (RFC 6455 §5.4, §5.5.1, §7.4). The
 * channel ({@linkcode ./channel.ts}) reads the socket and answers control
 * frames; this decides what the frames mean.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";
import { strictUtf8Decoder } from "../util/utf8.ts";
import { CloseCode, type Frame, Opcode, WebSocketProtocolError } from "./frame.ts";

/** One inbound data message: text, or binary bytes. */
export type WebSocketMessage = string | Uint8Array;

/** Turns data frames into messages (see the module documentation). */
export class MessageAssembler {
  #fragments: Uint8Array[] = [];
  #fragmentBytes = 0;
  #fragmentOpcode = -1;
  #decode = strictUtf8Decoder();

  /** An assembler of messages up to `maxMessageBytes`. */
  constructor(readonly maxMessageBytes: number) {}

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
  data(frame: Frame): WebSocketMessage | null {
    if (frame.opcode === Opcode.Continuation) {
      if (this.#fragmentOpcode === -1) {
        throw new WebSocketProtocolError(CloseCode.ProtocolError, "unexpected continuation frame");
      }
      this.#addFragment(frame.payload);
      if (!frame.fin) return null;
      const total = concatBytes(this.#fragments, this.#fragmentBytes);
      const opcode = this.#fragmentOpcode;
      this.#fragments = [];
      this.#fragmentBytes = 0;
      this.#fragmentOpcode = -1;
      return this.complete(opcode, total);
    }
    if (this.#fragmentOpcode !== -1) {
      throw new WebSocketProtocolError(CloseCode.ProtocolError, "expected a continuation frame");
    }
    if (frame.fin) return this.complete(frame.opcode, frame.payload);
    this.#fragmentOpcode = frame.opcode;
    this.#addFragment(frame.payload);
    return null;
  }

  /** A whole message's payload as the message (limit and UTF-8 checked). */
  complete(opcode: number, payload: Uint8Array): WebSocketMessage {
    if (payload.length > this.maxMessageBytes) {
      throw new WebSocketProtocolError(
        CloseCode.MessageTooBig,
        `message exceeds the limit of ${this.maxMessageBytes} bytes`,
      );
    }
    if (opcode === Opcode.Binary) return payload;
    try {
      return this.#decode(payload);
    } catch {
      throw new WebSocketProtocolError(CloseCode.InvalidPayload, "invalid UTF-8 in a text frame");
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
    this.#fragmentBytes += payload.length;
    if (this.#fragmentBytes > this.maxMessageBytes) {
      throw new WebSocketProtocolError(
        CloseCode.MessageTooBig,
        `message exceeds the limit of ${this.maxMessageBytes} bytes`,
      );
    }
    this.#fragments.push(payload);
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
