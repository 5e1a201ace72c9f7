/**
 * How a byte transport delimits payloads (a newline, a WebSocket frame
 * header, a length prefix): what the output sink needs to frame a batch of
 * encoded messages in place. Shared by the JSON-RPC transports, the
 * WebSocket channel and the relay, so none of them imports another.
 *
 * @module
 */

/** How messages are delimited on a transport. */
export interface Framing {
  /** Bytes of header before a payload of `length` bytes. */
  headerSize(length: number): number;
  /**
   * Writes the header ending right before `out[payloadOffset]` for a payload
   * of `length` bytes already in place (and may transform the payload, e.g.
   * mask it).
   */
  seal(out: Uint8Array, payloadOffset: number, length: number): void;
  /** Bytes after each payload (e.g. a newline); may be empty. */
  readonly trailer: Uint8Array;
  /**
   * Frames a payload the fast path cannot (too large for one frame, or not
   * ASCII): returns the complete bytes for it.
   */
  frameSlow(text: string): Uint8Array;
  /** Largest payload the fast path may frame in one piece. */
  readonly maxFastPayload: number;
  /**
   * True when a payload may go out in pieces, in order, with nothing to
   * write ahead of it (no header, no transformation: newline-delimited
   * JSON). A message too large for the reused output buffer is then
   * encoded through it piece by piece instead of into a buffer of its own.
   */
  readonly streamable?: boolean;
}
