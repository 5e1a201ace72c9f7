// The address translation behind transparent TCP capture, packet by packet:
// what a program's SYN becomes, what the listener's answer becomes, that
// every checksum stays valid, and what is dropped, refused and reset.

import { assert, assertEquals } from "../helpers/assert.ts";
import { LINGER_MS, TcpNat } from "../../src/sandbox/tcp_capture/nat.ts";
import { ipBytes } from "../../src/util/host.ts";

const FIN = 0x01;
const SYN = 0x02;
const RST = 0x04;
const ACK = 0x10;
const LISTENER = 40_000;

interface Segment {
  src: string;
  sport: number;
  dst: string;
  dport: number;
  flags: number;
  seq?: number;
  ack?: number;
  data?: string;
  /** IP protocol (default TCP). */
  protocol?: number;
}

function sum16(b: Uint8Array, from: number, to: number, sum = 0): number {
  for (let i = from; i < to; i += 2) sum += (b[i]! << 8) | (i + 1 < to ? b[i + 1]! : 0);
  while (sum > 0xffff) sum = (sum & 0xffff) + Math.floor(sum / 0x10000);
  return sum;
}

/** A packet as a kernel would send it, with correct checksums. */
function packet(s: Segment): Uint8Array {
  const src = ipBytes(s.src)!;
  const dst = ipBytes(s.dst)!;
  const v6 = src.length === 16;
  const t = v6 ? 40 : 20;
  const data = new TextEncoder().encode(s.data ?? "");
  const b = new Uint8Array(t + 20 + data.length);
  const v = new DataView(b.buffer);
  if (v6) {
    b[0] = 0x60;
    v.setUint16(4, 20 + data.length);
    b[6] = s.protocol ?? 6;
    b[7] = 64;
    b.set(src, 8);
    b.set(dst, 24);
  } else {
    b[0] = 0x45;
    v.setUint16(2, b.length);
    b[8] = 64;
    b[9] = s.protocol ?? 6;
    b.set(src, 12);
    b.set(dst, 16);
    const c = ~sum16(b, 0, 20) & 0xffff;
    v.setUint16(10, c);
  }
  v.setUint16(t, s.sport);
  v.setUint16(t + 2, s.dport);
  v.setUint32(t + 4, s.seq ?? 1000);
  v.setUint32(t + 8, s.ack ?? 0);
  b[t + 12] = 5 << 4;
  b[t + 13] = s.flags;
  v.setUint16(t + 14, 65535);
  b.set(data, t + 20);
  v.setUint16(t + 16, ~tcpSum(b) & 0xffff);
  return b;
}

function tcpSum(b: Uint8Array): number {
  const v6 = b[0]! >> 4 === 6;
  const t = v6 ? 40 : (b[0]! & 15) * 4;
  const [a, z] = v6 ? [8, 40] : [12, 20];
  return sum16(b, t, b.length, sum16(b, a, z) + 6 + (b.length - t));
}

/** The packet read back, checking both checksums. */
function parse(b: Uint8Array): Segment {
  const v6 = b[0]! >> 4 === 6;
  const t = v6 ? 40 : 20;
  const v = new DataView(b.buffer, b.byteOffset);
  if (!v6) assertEquals(sum16(b, 0, 20), 0xffff, "IPv4 header checksum");
  assertEquals(tcpSum(b), 0xffff, "TCP checksum");
  const text = (at: number, n: number) => {
    const bytes = b.subarray(at, at + n);
    return n === 4 ? bytes.join(".") : ipText6(bytes);
  };
  const n = v6 ? 16 : 4;
  const at = v6 ? 8 : 12;
  return {
    src: text(at, n),
    sport: v.getUint16(t),
    dst: text(at + n, n),
    dport: v.getUint16(t + 2),
    flags: b[t + 13]!,
    seq: v.getUint32(t + 4),
    ack: v.getUint32(t + 8),
    data: new TextDecoder().decode(b.subarray(t + 20)),
  };
}

function ipText6(b: Uint8Array): string {
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(((b[i]! << 8) | b[i + 1]!).toString(16));
  return words.join(":").replace(/(^|:)0(:0)+(:|$)/, "::");
}

function table(family: 4 | 6, options: { maxFlows?: number; now?: () => number } = {}) {
  return new TcpNat({
    local: ipBytes(family === 4 ? "192.0.2.1" : "2001:db8::1")!,
    peer: ipBytes(family === 4 ? "198.18.0.1" : "2001:2::1")!,
    listenerPort: LISTENER,
    ...options,
  });
}

function run(nat: TcpNat, s: Segment): Segment[] {
  const out: Segment[] = [];
  nat.translate(packet(s), (p) => out.push(parse(p)));
  return out;
}

for (const family of [4, 6] as const) {
  const local = family === 4 ? "192.0.2.1" : "2001:db8::1";
  const peer = family === 4 ? "198.18.0.1" : "2001:2::1";
  const remote = family === 4 ? "203.0.113.7" : "2001:db8::9";

  Deno.test(`tcp capture nat (IPv${family}): a connection goes to the listener and back, checksums intact`, () => {
    const nat = table(family);
    const [syn] = run(nat, { src: local, sport: 5555, dst: remote, dport: 80, flags: SYN });
    assertEquals([syn!.src, syn!.dst, syn!.dport, syn!.flags], [peer, local, LISTENER, SYN]);
    const flow = nat.flow(syn!.sport)!;
    assertEquals([flow.host, flow.port, flow.clientPort], [remote, 80, 5555]);
    // The listener's SYN-ACK comes back as the remote's.
    const [synAck] = run(nat, {
      src: local,
      sport: LISTENER,
      dst: peer,
      dport: syn!.sport,
      flags: SYN | ACK,
      seq: 7000,
      ack: 1001,
    });
    assertEquals(
      [synAck!.src, synAck!.sport, synAck!.dst, synAck!.dport, synAck!.seq, synAck!.ack],
      [remote, 80, local, 5555, 7000, 1001],
    );
    // Data (odd length: the checksum's padding) keeps its bytes.
    const [data] = run(nat, {
      src: local,
      sport: 5555,
      dst: remote,
      dport: 80,
      flags: ACK,
      seq: 1001,
      data: "GET / HTTP/1.0\r\n\r\n!",
    });
    assertEquals([data!.sport, data!.data], [syn!.sport, "GET / HTTP/1.0\r\n\r\n!"]);
    assertEquals(nat.live, 1);
    // Both ends finish: the connection has ended.
    run(nat, { src: local, sport: 5555, dst: remote, dport: 80, flags: FIN | ACK });
    run(nat, { src: local, sport: LISTENER, dst: peer, dport: syn!.sport, flags: FIN | ACK });
    assertEquals(nat.live, 0);
  });

  Deno.test(`tcp capture nat (IPv${family}): a refused connection is reset at both ends`, () => {
    const nat = table(family);
    const [syn] = run(nat, { src: local, sport: 6000, dst: remote, dport: 443, flags: SYN });
    nat.reset(syn!.sport);
    const out = run(nat, {
      src: local,
      sport: LISTENER,
      dst: peer,
      dport: syn!.sport,
      flags: FIN | ACK,
      seq: 9000,
      ack: 1001,
      data: "",
    });
    assertEquals(out.map((s) => [s.src, s.sport, s.dst, s.dport, s.flags, s.seq]), [
      [remote, 443, local, 6000, RST | ACK, 9000],
      [peer, syn!.sport, local, LISTENER, RST, 1001],
    ]);
    assertEquals(nat.live, 0);
  });
}

Deno.test("tcp capture nat: what is not a captured TCP connection is dropped", () => {
  const nat = table(4);
  const local = "192.0.2.1";
  // UDP, a packet of no connection, a packet not from the sandbox's address.
  assertEquals(
    run(nat, { src: local, sport: 1, dst: "8.8.8.8", dport: 53, flags: 0, protocol: 17 }),
    [],
  );
  assertEquals(run(nat, { src: local, sport: 2, dst: "8.8.8.8", dport: 80, flags: ACK }), []);
  assertEquals(run(nat, { src: "10.0.0.1", sport: 3, dst: "8.8.8.8", dport: 80, flags: SYN }), []);
  // The listener answering a peer port nobody holds.
  assertEquals(
    run(nat, { src: local, sport: LISTENER, dst: "198.18.0.1", dport: 999, flags: ACK }),
    [],
  );
  // IPv6 packets to the IPv4 table (and a truncated one).
  assertEquals(
    run(nat, { src: "2001:db8::1", sport: 4, dst: "2001:db8::9", dport: 80, flags: SYN }),
    [],
  );
  nat.translate(new Uint8Array(30), () => assert(false, "a truncated packet is dropped"));
  assertEquals(nat.live, 0);
});

Deno.test("tcp capture nat: connections past the limit are refused at once; ended ones free their ports", () => {
  const nat = table(4, { maxFlows: 2 });
  const open = (sport: number) =>
    run(nat, { src: "192.0.2.1", sport, dst: "203.0.113.7", dport: 80, flags: SYN, seq: 41 });
  const a = open(1)[0]!;
  const b = open(2)[0]!;
  assert(a.sport !== b.sport);
  // The third gets a reset that acknowledges its SYN (connect fails with ECONNREFUSED).
  assertEquals(open(3).map((s) => [s.src, s.sport, s.dst, s.dport, s.flags, s.ack]), [
    ["203.0.113.7", 80, "192.0.2.1", 3, RST | ACK, 42],
  ]);
  // A reset ends one: there is room again.
  run(nat, { src: "192.0.2.1", sport: 1, dst: "203.0.113.7", dport: 80, flags: RST });
  assertEquals(open(3)[0]!.dport, LISTENER);
  // The same port reused for a new connection (once there is room) gets a new mapping.
  run(nat, { src: "192.0.2.1", sport: 2, dst: "203.0.113.7", dport: 80, flags: RST });
  const again = open(1)[0]!;
  assertEquals(again.dport, LISTENER);
  assert(again.sport !== a.sport, `a fresh peer port: ${a.sport} ${b.sport} ${again.sport}`);
  assertEquals(nat.flow(again.sport)!.clientPort, 1);
  assertEquals(nat.live, 2);
});

Deno.test("tcp capture nat: ended connections are forgotten after they linger, not before", () => {
  let now = 1_000;
  const nat = table(4, { now: () => now });
  const peers: number[] = [];
  for (let sport = 1; sport <= 70; sport++) {
    const [syn] = run(nat, { src: "192.0.2.1", sport, dst: "203.0.113.7", dport: 80, flags: SYN });
    peers.push(syn!.sport);
    run(nat, { src: "192.0.2.1", sport, dst: "203.0.113.7", dport: 80, flags: RST });
  }
  const next = () =>
    run(nat, { src: "192.0.2.1", sport: 999, dst: "203.0.113.7", dport: 80, flags: SYN });
  next();
  // Late segments of an ended connection still find it.
  assert(peers.every((p) => nat.flow(p) !== undefined));
  now += LINGER_MS + 1;
  run(nat, { src: "192.0.2.1", sport: 999, dst: "203.0.113.7", dport: 80, flags: RST });
  next();
  assert(peers.every((p) => nat.flow(p) === undefined));
});
