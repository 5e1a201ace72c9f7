/**
 * The address translation behind transparent TCP capture. The sandbox's
 * default route leads into a TUN device whose packets come here; the
 * kernel's own TCP stays at both ends:
 *
 * ```text
 * program 192.0.2.1:S → D:P          becomes  PEER:F → 192.0.2.1:L (the bridge's listener)
 * listener 192.0.2.1:L → PEER:F      becomes  D:P → 192.0.2.1:S
 * ```
 *
 * Each connection (a SYN from the program) gets its own peer port `F`; the
 * listener learns `D:P` from {@linkcode TcpNat.flow} of the connection's
 * remote port and puts it through the proxy. Anything else (UDP, ICMP,
 * fragments, IPv6, packets of no connection) is dropped. A connection the
 * proxy refuses is reset toward the program, as a TCP stack in the path
 * would: {@linkcode TcpNat.reset}, then close the accepted connection.
 *
 * @module
 */

const TCP = 6;
const FIN = 0x01;
const SYN = 0x02;
const RST = 0x04;
const ACK = 0x10;

/** How long a finished connection's mapping stays, for late segments (TIME_WAIT). */
export const LINGER_MS = 60_000;

/** One captured connection. */
export interface CapturedFlow {
  /** The program's port. */
  readonly clientPort: number;
  /** Where the program connected (dotted IPv4) and its port. */
  readonly host: string;
  readonly port: number;
  /** The peer port its accepted connection has. */
  readonly peerPort: number;
}

interface Flow extends CapturedFlow {
  readonly key: string;
  readonly dst: number;
  /** Reset toward the program when the listener closes. */
  reset: boolean;
  clientFin: boolean;
  listenerFin: boolean;
  /** When the connection ended (both FINs or a reset), else 0. */
  endedAt: number;
}

/** Addresses as 32-bit numbers. */
export function ipv4(bytes: ArrayLike<number>): number {
  return ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
}

function ipText(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** One's-complement sum of 16-bit words of `b` in `[from, to)` added to `sum`. */
function sum16(b: Uint8Array, from: number, to: number, sum = 0): number {
  let i = from;
  for (; i + 1 < to; i += 2) sum += (b[i]! << 8) | b[i + 1]!;
  if (i < to) sum += b[i]! << 8;
  return sum;
}

function fold(sum: number): number {
  while (sum > 0xffff) sum = (sum & 0xffff) + Math.floor(sum / 0x10000);
  return sum;
}

/** The IPv4 header checksum of `b` (header length `ihl`), written in place. */
function ipChecksum(b: Uint8Array, ihl: number): void {
  b[10] = b[11] = 0;
  const c = ~fold(sum16(b, 0, ihl)) & 0xffff;
  b[10] = c >> 8;
  b[11] = c & 255;
}

/** The TCP checksum of the segment at `t..end` of IPv4 packet `b`, written in place. */
function tcpChecksum(b: Uint8Array, t: number, end: number): void {
  b[t + 16] = b[t + 17] = 0;
  let sum = sum16(b, 12, 20) + TCP + (end - t);
  sum = sum16(b, t, end, sum);
  const c = ~fold(sum) & 0xffff;
  b[t + 16] = c >> 8;
  b[t + 17] = c & 255;
}

/** The words a translation changes: addresses (pseudo-header) and ports. */
function changedWords(b: Uint8Array, t: number): number {
  return sum16(b, 12, 20) + sum16(b, t, t + 4);
}

function setAddresses(
  b: Uint8Array,
  t: number,
  src: number,
  sport: number,
  dst: number,
  dport: number,
): void {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const before = fold(changedWords(b, t));
  v.setUint32(12, src);
  v.setUint32(16, dst);
  v.setUint16(t, sport);
  v.setUint16(t + 2, dport);
  // RFC 1624: HC' = ~(~HC + ~m + m'), over every changed word at once.
  const old = v.getUint16(t + 16);
  const sum = fold((~old & 0xffff) + (~before & 0xffff) + fold(changedWords(b, t)));
  v.setUint16(t + 16, ~sum & 0xffff);
  ipChecksum(b, (b[0]! & 15) * 4);
}

/** A bare TCP segment (no options, no data) in a fresh IPv4 packet. */
function segment(
  src: number,
  sport: number,
  dst: number,
  dport: number,
  seq: number,
  ack: number,
  flags: number,
): Uint8Array {
  const b = new Uint8Array(40);
  const v = new DataView(b.buffer);
  b[0] = 0x45;
  v.setUint16(2, 40);
  b[6] = 0x40; // don't fragment
  b[8] = 64;
  b[9] = TCP;
  v.setUint32(12, src);
  v.setUint32(16, dst);
  v.setUint16(20, sport);
  v.setUint16(22, dport);
  v.setUint32(24, seq >>> 0);
  v.setUint32(28, ack >>> 0);
  b[32] = 5 << 4;
  b[33] = flags;
  ipChecksum(b, 20);
  tcpChecksum(b, 20, 40);
  return b;
}

/** Options of {@linkcode TcpNat}. */
export interface TcpNatOptions {
  /** The sandbox's address (the TUN device's). */
  readonly local: number;
  /** The address captured connections come from, as the listener sees them. */
  readonly peer: number;
  /** The bridge listener's port on `local`. */
  readonly listenerPort: number;
  /** Connections held at once (default 16 384); a SYN past it is refused with a reset. */
  readonly maxFlows?: number;
  /** Clock (tests). */
  readonly now?: () => number;
}

/** The translation table; feed it every packet the TUN device gives. */
export class TcpNat {
  readonly #local: number;
  readonly #peer: number;
  readonly #listenerPort: number;
  readonly #maxFlows: number;
  readonly #now: () => number;
  readonly #byKey = new Map<string, Flow>();
  readonly #byPeerPort = new Map<number, Flow>();
  #nextPort = 1024;
  #live = 0;

  /** Creates an empty table. */
  constructor(options: TcpNatOptions) {
    this.#local = options.local;
    this.#peer = options.peer;
    this.#listenerPort = options.listenerPort;
    this.#maxFlows = options.maxFlows ?? 16_384;
    this.#now = options.now ?? Date.now;
  }

  /** Connections not yet ended. */
  get live(): number {
    return this.#live;
  }

  /** The connection whose accepted socket has remote port `peerPort`. */
  flow(peerPort: number): CapturedFlow | undefined {
    return this.#byPeerPort.get(peerPort);
  }

  /** The listener will close `peerPort`'s connection: the program gets a reset, not an end. */
  reset(peerPort: number): void {
    const flow = this.#byPeerPort.get(peerPort);
    if (flow) flow.reset = true;
  }

  /**
   * Translates `packet` (modified in place) and hands what goes back to
   * the device to `emit`: nothing (dropped), the packet, or made-up resets.
   */
  translate(packet: Uint8Array, emit: (packet: Uint8Array) => void): void {
    const b = packet;
    if (b.length < 40 || b[0]! >> 4 !== 4 || b[9] !== TCP) return;
    const ihl = (b[0]! & 15) * 4;
    const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const total = v.getUint16(2);
    if (ihl < 20 || total > b.length || total < ihl + 20) return;
    if ((v.getUint16(6) & 0x3fff) !== 0) return; // a fragment
    const src = v.getUint32(12);
    if (src !== this.#local) return;
    const dst = v.getUint32(16);
    const t = ihl;
    const sport = v.getUint16(t);
    const dport = v.getUint16(t + 2);
    const flags = b[t + 13]!;
    const bytes = b.subarray(0, total);
    if (dst === this.#peer && sport === this.#listenerPort) {
      this.#fromListener(bytes, t, dport, flags, emit);
    } else {
      this.#fromProgram(bytes, t, dst, sport, dport, flags, emit);
    }
  }

  #fromProgram(
    b: Uint8Array,
    t: number,
    dst: number,
    sport: number,
    dport: number,
    flags: number,
    emit: (packet: Uint8Array) => void,
  ): void {
    const key = `${dst}:${dport}:${sport}`;
    let flow = this.#byKey.get(key);
    const opening = (flags & (SYN | ACK | RST)) === SYN;
    if (opening && flow?.endedAt) {
      // The program reuses its port for a new connection: a new mapping.
      this.#remove(flow);
      flow = undefined;
    }
    if (!flow) {
      if (!opening) return;
      flow = this.#open(key, dst, sport, dport);
      if (!flow) {
        const seq = new DataView(b.buffer, b.byteOffset).getUint32(t + 4);
        emit(segment(dst, dport, this.#local, sport, 0, seq + 1, RST | ACK));
        return;
      }
    }
    if (flags & RST) this.#end(flow);
    else if (flags & FIN) {
      flow.clientFin = true;
      if (flow.listenerFin) this.#end(flow);
    }
    setAddresses(b, t, this.#peer, flow.peerPort, this.#local, this.#listenerPort);
    emit(b);
  }

  #fromListener(
    b: Uint8Array,
    t: number,
    peerPort: number,
    flags: number,
    emit: (packet: Uint8Array) => void,
  ): void {
    const flow = this.#byPeerPort.get(peerPort);
    if (!flow) return;
    if (flow.reset && (flags & (FIN | RST))) {
      // The proxy refused: the program sees a reset, the listener's socket is reset too.
      const v = new DataView(b.buffer, b.byteOffset);
      const seq = v.getUint32(t + 4);
      const ack = v.getUint32(t + 8);
      this.#end(flow);
      emit(segment(flow.dst, flow.port, this.#local, flow.clientPort, seq, ack, RST | ACK));
      if (!(flags & RST)) {
        emit(segment(this.#peer, peerPort, this.#local, this.#listenerPort, ack, 0, RST));
      }
      return;
    }
    if (flags & RST) this.#end(flow);
    else if (flags & FIN) {
      flow.listenerFin = true;
      if (flow.clientFin) this.#end(flow);
    }
    setAddresses(b, t, flow.dst, flow.port, this.#local, flow.clientPort);
    emit(b);
  }

  #open(key: string, dst: number, clientPort: number, port: number): Flow | undefined {
    this.#sweep();
    // Peer ports are 1024–65535: lingering mappings hold theirs too.
    if (this.#live >= this.#maxFlows || this.#byPeerPort.size >= 64_000) return undefined;
    // A free peer port (at most #maxFlows + lingering ones are taken).
    let peerPort = this.#nextPort;
    while (this.#byPeerPort.has(peerPort)) peerPort = peerPort >= 65_535 ? 1024 : peerPort + 1;
    this.#nextPort = peerPort >= 65_535 ? 1024 : peerPort + 1;
    const flow: Flow = {
      key,
      dst,
      clientPort,
      host: ipText(dst),
      port,
      peerPort,
      reset: false,
      clientFin: false,
      listenerFin: false,
      endedAt: 0,
    };
    this.#byKey.set(key, flow);
    this.#byPeerPort.set(peerPort, flow);
    this.#live++;
    return flow;
  }

  #end(flow: Flow): void {
    if (flow.endedAt) return;
    flow.endedAt = this.#now();
    this.#live--;
  }

  #remove(flow: Flow): void {
    this.#end(flow);
    this.#byKey.delete(flow.key);
    this.#byPeerPort.delete(flow.peerPort);
  }

  /** Forgets connections ended longer than {@linkcode LINGER_MS} ago (insertion order: oldest first). */
  #sweep(): void {
    const before = this.#now() - LINGER_MS;
    // Ended flows can sit behind live ones: the scan is bounded by the table.
    if (this.#byKey.size - this.#live < 64 && this.#byKey.size < 64_000) return;
    for (const flow of this.#byKey.values()) {
      if (flow.endedAt && flow.endedAt < before) this.#remove(flow);
    }
  }
}
