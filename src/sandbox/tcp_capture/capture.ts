/**
 * Transparent TCP capture, run by the proxy bridge inside a sandbox whose
 * process asked for `networkProxy.proxy.transparentTcp`: every IPv4 TCP
 * connection the program makes — proxy variables or not — goes through the
 * managed proxy's SOCKS5 listener, which applies its policy
 * (`socks5_tcp`); a refused one is reset.
 *
 * How: the namespace's default routes (IPv4 and IPv6) lead into a TUN
 * device, and {@linkcode TcpNat} turns each connection's packets into a
 * connection to the bridge's own listener (the kernel's TCP at both ends —
 * no TCP stack here), which CONNECTs through the SOCKS5 route to where the
 * program meant to go. UDP and ICMP find no way out (dropped, as before),
 * loopback stays the sandbox's own.
 *
 * Why not a redirect rule (nftables `redirect`, `tproxy`): that needs the
 * `nft` program and netlink inside the sandbox, and the original
 * destination from `SO_ORIGINAL_DST` or an `IP_TRANSPARENT` listener, which
 * Deno's sockets cannot give; a TUN device needs only ioctls.
 *
 * @module
 */

import { acceptConnections, type ConnectionLoop } from "../../util/accept_loop.ts";
import { relay } from "../../util/conn_io.ts";
import { delay } from "../../util/async.ts";
import { socks5Connect } from "../../socks5/wire.ts";
import { TcpNat } from "./nat.ts";
import { ipBytes } from "../../util/host.ts";
import { Tun } from "./tun.ts";

/** The device's name inside the sandbox. */
export const CAPTURE_DEVICE = "exectun0";
/** The sandbox's addresses on it (documentation ranges, as the reference's). */
export const CAPTURE_ADDRESSES = { 4: "192.0.2.1", 6: "2001:db8::1" } as const;
/**
 * Where captured connections seem to come from, as the bridge's listeners
 * see them (benchmarking ranges: no program means them; one that connects
 * to them is captured like any other address).
 */
const PEER_ADDRESSES = { 4: "198.18.0.1", 6: "2001:2::1" } as const;
/**
 * The device's MTU: the largest a TUN device takes, so the kernel's TCP
 * sends up to 64 KiB per packet through it — each packet is one FFI read
 * here, and at 1500 bytes that read rate capped a download at ~20 MiB/s
 * (the reference, with 1500: ~140; at 64 KiB: 250–340; see
 * `bench/transparent_tcp_bench.ts`).
 */
const MTU = 65_535;
/** How long a new address may take to become usable (see {@linkcode listenOnNewAddress}). */
const ADDRESS_READY_MS = 10_000;

/** A running capture. */
export interface TcpCapture {
  /** Stops accepting and closes the device. */
  close(): Promise<void>;
}

/**
 * Starts capturing (needs `CAP_NET_ADMIN` in the namespace, until it
 * returns): connections go through `dialSocks()`, a fresh connection to the
 * managed proxy's SOCKS5 listener each.
 */
export async function startTcpCapture(
  dialSocks: () => Promise<Deno.Conn>,
): Promise<TcpCapture> {
  const tun = Tun.open(
    CAPTURE_DEVICE,
    ipBytes(CAPTURE_ADDRESSES[4])!,
    ipBytes(CAPTURE_ADDRESSES[6])!,
    MTU,
  );
  const loops: ConnectionLoop[] = [];
  const nats: Array<TcpNat | undefined> = [];
  try {
    for (const family of tun.ipv6 ? [4, 6] as const : [4] as const) {
      const listener = await listenOnNewAddress(CAPTURE_ADDRESSES[family]);
      const nat = new TcpNat({
        local: ipBytes(CAPTURE_ADDRESSES[family])!,
        peer: ipBytes(PEER_ADDRESSES[family])!,
        listenerPort: (listener.addr as Deno.NetAddr).port,
      });
      nats[family] = nat;
      loops.push(acceptCaptured(listener, nat, PEER_ADDRESSES[family], dialSocks));
    }
  } catch (error) {
    for (const loop of loops) void loop.close();
    tun.close();
    throw error;
  }
  const emit = (packet: Uint8Array) => tun.write(packet);
  const pumping = (async () => {
    for (;;) {
      const packet = await tun.read();
      if (!packet) return;
      nats[packet[0]! >> 4]?.translate(packet, emit);
    }
  })();
  pumping.catch((error) => console.error(`transparent TCP capture stopped: ${error.message}`));
  return {
    async close() {
      await Promise.allSettled(loops.map((loop) => loop.close()));
      tun.close();
    },
  };
}

/**
 * Listens on `hostname`, an address just given to the device: a new IPv6
 * address is "tentative" until the kernel has finished with it (moments,
 * later on a busy machine), and binding to it fails until then.
 */
async function listenOnNewAddress(hostname: string): Promise<Deno.Listener> {
  const deadline = Date.now() + ADDRESS_READY_MS;
  for (let wait = 1;; wait = Math.min(wait * 2, 50)) {
    try {
      return Deno.listen({ hostname, port: 0 });
    } catch (error) {
      if (!(error instanceof Deno.errors.AddrNotAvailable) || Date.now() > deadline) throw error;
    }
    await delay(wait);
  }
}

/** Serves `listener`: each captured connection CONNECTs through the proxy, or is reset. */
function acceptCaptured(
  listener: Deno.Listener,
  nat: TcpNat,
  peer: string,
  dialSocks: () => Promise<Deno.Conn>,
): ConnectionLoop {
  return acceptConnections(listener, async (conn) => {
    const from = conn.remoteAddr as Deno.NetAddr;
    const flow = from.hostname === peer ? nat.flow(from.port) : undefined;
    if (!flow) {
      // Not a captured connection (the program dialled the listener itself).
      conn.close();
      return;
    }
    let upstream: Deno.Conn | null = null;
    try {
      upstream = await dialSocks();
      await socks5Connect(upstream, flow.host, flow.port);
    } catch {
      upstream?.close();
      nat.reset(flow.peerPort);
      conn.close();
      return;
    }
    await relay(conn, upstream);
  });
}
