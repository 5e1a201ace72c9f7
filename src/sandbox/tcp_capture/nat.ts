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
 * (and the same for IPv6, with a table of its own). Each connection (a SYN
 * from the program) gets its own peer port `F`; the listener learns `D:P`
 * from {@linkcode TcpNat.flow} of the connection's remote port and puts it
 * through the proxy. Anything else (UDP, ICMP, fragments, IPv6 extension
 * headers, packets of no connection) is dropped. A connection the
 * proxy refuses is reset toward the program, as a TCP stack in the path
 * would: {@linkcode TcpNat.reset}, then close the accepted connection.
 *
 * @module
 */

import { ipFromBytes } from "../../util/host.ts";

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
  readonly dst: Uint8Array;
  /** Reset toward the program when the listener closes. */
  reset: boolean;
  clientFin: boolean;
  listenerFin: boolean;
  /** When the connection ended (both FINs or a reset), else null. */
  endedAt: number | null;
}

/** Where an IP version keeps what the translation reads and writes. */
interface Layout {
  readonly version: 4 | 6;
  /** Source address offset; the destination follows it. */
  readonly src: number;
  readonly addressLength: number;
  /** The transport protocol's byte (IPv6: only a TCP header right after the fixed one). */
  readonly protocol: number;
  readonly minHeader: number;
}

const IPV4: Layout = { version: 4, src: 12, addressLength: 4, protocol: 9, minHeader: 20 };
const IPV6: Layout = { version: 6, src: 8, addressLength: 16, protocol: 6, minHeader: 40 };

function equal(b: Uint8Array, at: number, address: Uint8Array): boolean {
  for (let i = 0; i < address.length; i++) if (b[at + i] !== address[i]) return false;
  return true;
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

/** The TCP checksum of the segment at `t..end` of packet `b`, written in place. */
function tcpChecksum(b: Uint8Array, layout: Layout, t: number, end: number): void {
  b[t + 16] = b[t + 17] = 0;
  let sum = sum16(b, layout.src, layout.src + 2 * layout.addressLength) + TCP + (end - t);
  sum = sum16(b, t, end, sum);
  const c = ~fold(sum) & 0xffff;
  b[t + 16] = c >> 8;
  b[t + 17] = c & 255;
}

/** The words a translation changes: addresses (pseudo-header) and ports. */
function changedWords(b: Uint8Array, layout: Layout, t: number): number {
  return sum16(b, layout.src, layout.src + 2 * layout.addressLength) + sum16(b, t, t + 4);
}

function setAddresses(
  b: Uint8Array,
  layout: Layout,
  t: number,
  src: Uint8Array,
  sport: number,
  dst: Uint8Array,
  dport: number,
): void {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const before = fold(changedWords(b, layout, t));
  b.set(src, layout.src);
  b.set(dst, layout.src + layout.addressLength);
  v.setUint16(t, sport);
  v.setUint16(t + 2, dport);
  // RFC 1624: HC' = ~(~HC + ~m + m'), over every changed word at once.
  const old = v.getUint16(t + 16);
  const sum = fold((~old & 0xffff) + (~before & 0xffff) + fold(changedWords(b, layout, t)));
  v.setUint16(t + 16, ~sum & 0xffff);
  if (layout.version === 4) ipChecksum(b, (b[0]! & 15) * 4);
}

/** A bare TCP segment (no options, no data) in a fresh packet. */
function segment(
  layout: Layout,
  src: Uint8Array,
  sport: number,
  dst: Uint8Array,
  dport: number,
  seq: number,
  ack: number,
  flags: number,
): Uint8Array {
  const t = layout.minHeader;
  const b = new Uint8Array(t + 20);
  const v = new DataView(b.buffer);
  if (layout.version === 4) {
    b[0] = 0x45;
    v.setUint16(2, t + 20);
    b[6] = 0x40; // don't fragment
    b[8] = 64;
    b[9] = TCP;
  } else {
    b[0] = 0x60;
    v.setUint16(4, 20);
    b[6] = TCP;
    b[7] = 64;
  }
  b.set(src, layout.src);
  b.set(dst, layout.src + layout.addressLength);
  v.setUint16(t, sport);
  v.setUint16(t + 2, dport);
  v.setUint32(t + 4, seq >>> 0);
  v.setUint32(t + 8, ack >>> 0);
  b[t + 12] = 5 << 4;
  b[t + 13] = flags;
  if (layout.version === 4) ipChecksum(b, t);
  tcpChecksum(b, layout, t, t + 20);
  return b;
}

/** Options of {@linkcode TcpNat}. */
export interface TcpNatOptions {
  /** The sandbox's address on the TUN device (4 bytes: IPv4, 16: IPv6). */
  readonly local: Uint8Array;
  /** The address captured connections come from, as the listener sees them (same family). */
  readonly peer: Uint8Array;
  /** The bridge listener's port on `local`. */
  readonly listenerPort: number;
  /** Connections held at once (default 16 384); a SYN past it is refused with a reset. */
  readonly maxFlows?: number;
  /** Clock (tests). */
  readonly now?: () => number;
}

/** The translation table; feed it every packet the TUN device gives. */
export class TcpNat {
  readonly #layout: Layout;
  readonly #local: Uint8Array;
  readonly #peer: Uint8Array;
  readonly #listenerPort: number;
  readonly #maxFlows: number;
  readonly #now: () => number;
  readonly #byKey = new Map<string, Flow>();
  readonly #byPeerPort = new Map<number, Flow>();
  #nextPort = 1024;
  #live = 0;

  /** Creates an empty table. */
  constructor(options: TcpNatOptions) {
    this.#layout = options.local.length === 4 ? IPV4 : IPV6;
    if (options.peer.length !== options.local.length) throw new TypeError("mixed address families");
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
    const layout = this.#layout;
    if (b.length < layout.minHeader + 20 || b[0]! >> 4 !== layout.version) return;
    if (b[layout.protocol] !== TCP) return;
    const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
    let t: number;
    let total: number;
    if (layout.version === 4) {
      t = (b[0]! & 15) * 4;
      total = v.getUint16(2);
      if ((v.getUint16(6) & 0x3fff) !== 0) return; // a fragment
    } else {
      t = 40;
      total = 40 + v.getUint16(4);
    }
    if (t < layout.minHeader || total > b.length || total < t + 20) return;
    if (!equal(b, layout.src, this.#local)) return;
    const dstAt = layout.src + layout.addressLength;
    const sport = v.getUint16(t);
    const dport = v.getUint16(t + 2);
    const flags = b[t + 13]!;
    const bytes = b.subarray(0, total);
    if (sport === this.#listenerPort && equal(b, dstAt, this.#peer)) {
      this.#fromListener(bytes, t, dport, flags, emit);
    } else {
      const dst = b.subarray(dstAt, dstAt + layout.addressLength);
      this.#fromProgram(bytes, t, dst, sport, dport, flags, emit);
    }
  }

  /** `dst` is a view into `b` (copied only when a connection opens). */
  #fromProgram(
    b: Uint8Array,
    t: number,
    dst: Uint8Array,
    sport: number,
    dport: number,
    flags: number,
    emit: (packet: Uint8Array) => void,
  ): void {
    const key = `${dst.join(".")}:${dport}:${sport}`;
    let flow = this.#byKey.get(key);
    const opening = (flags & (SYN | ACK | RST)) === SYN;
    if (opening && flow && flow.endedAt !== null) {
      // The program reuses its port for a new connection: a new mapping.
      this.#remove(flow);
      flow = undefined;
    }
    if (!flow) {
      if (!opening) return;
      flow = this.#open(key, dst, sport, dport);
      if (!flow) {
        const seq = new DataView(b.buffer, b.byteOffset).getUint32(t + 4);
        emit(segment(this.#layout, dst, dport, this.#local, sport, 0, seq + 1, RST | ACK));
        return;
      }
    }
    if (flags & RST) this.#end(flow);
    else if (flags & FIN) {
      flow.clientFin = true;
      if (flow.listenerFin) this.#end(flow);
    }
    setAddresses(b, this.#layout, t, this.#peer, flow.peerPort, this.#local, this.#listenerPort);
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
      const l = this.#layout;
      emit(segment(l, flow.dst, flow.port, this.#local, flow.clientPort, seq, ack, RST | ACK));
      if (!(flags & RST)) {
        emit(segment(l, this.#peer, peerPort, this.#local, this.#listenerPort, ack, 0, RST));
      }
      return;
    }
    if (flags & RST) this.#end(flow);
    else if (flags & FIN) {
      flow.listenerFin = true;
      if (flow.clientFin) this.#end(flow);
    }
    setAddresses(b, this.#layout, t, flow.dst, flow.port, this.#local, flow.clientPort);
    emit(b);
  }

  #open(key: string, dst: Uint8Array, clientPort: number, port: number): Flow | undefined {
    this.#sweep();
    // Peer ports are 1024–65535: lingering mappings hold theirs too.
    if (this.#live >= this.#maxFlows || this.#byPeerPort.size >= 64_000) return undefined;
    // A free peer port (at most #maxFlows + lingering ones are taken).
    let peerPort = this.#nextPort;
    while (this.#byPeerPort.has(peerPort)) peerPort = peerPort >= 65_535 ? 1024 : peerPort + 1;
    this.#nextPort = peerPort >= 65_535 ? 1024 : peerPort + 1;
    const flow: Flow = {
      key,
      dst: dst.slice(),
      clientPort,
      host: ipFromBytes(dst),
      port,
      peerPort,
      reset: false,
      clientFin: false,
      listenerFin: false,
      endedAt: null,
    };
    this.#byKey.set(key, flow);
    this.#byPeerPort.set(peerPort, flow);
    this.#live++;
    return flow;
  }

  #end(flow: Flow): void {
    if (flow.endedAt !== null) return;
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
      if (flow.endedAt !== null && flow.endedAt < before) this.#remove(flow);
    }
  }
}
