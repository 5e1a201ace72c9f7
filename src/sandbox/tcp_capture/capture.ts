/**
 * Transparent TCP capture, run by the proxy bridge inside a sandbox whose
 * process asked for `networkProxy.proxy.transparentTcp`: every IPv4 TCP
 * connection the program makes — proxy variables or not — goes through the
 * managed proxy's SOCKS5 listener, which applies its policy
 * (`socks5_tcp`); a refused one is reset.
 *
 * How: the namespace's default route leads into a TUN device, and
 * {@linkcode TcpNat} turns each connection's packets into a connection to
 * the bridge's own listener (the kernel's TCP at both ends — no TCP stack
 * here), which CONNECTs through the SOCKS5 route to where the program
 * meant to go. UDP and ICMP find no way out (dropped, as before), IPv6 has
 * no route (unreachable), loopback stays the sandbox's own.
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
import { socks5Connect } from "../../socks5/wire.ts";
import { ipv4, TcpNat } from "./nat.ts";
import { Tun } from "./tun.ts";

/** The device's name inside the sandbox. */
export const CAPTURE_DEVICE = "exectun0";
/** The sandbox's address on it (TEST-NET-1, as the reference's). */
export const CAPTURE_ADDRESS = "192.0.2.1";
/**
 * Where captured connections seem to come from, as the bridge's listener
 * sees them (benchmarking range: no program means it; one that connects
 * to it is captured like any other address).
 */
const PEER_ADDRESS = "198.18.0.1";
const MTU = 1500;

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
export function startTcpCapture(dialSocks: () => Promise<Deno.Conn>): TcpCapture {
  const local = CAPTURE_ADDRESS.split(".").map(Number);
  const tun = Tun.open(CAPTURE_DEVICE, new Uint8Array(local), MTU);
  let listener: Deno.Listener;
  try {
    listener = Deno.listen({ hostname: CAPTURE_ADDRESS, port: 0 });
  } catch (error) {
    tun.close();
    throw error;
  }
  const nat = new TcpNat({
    local: ipv4(local),
    peer: ipv4(PEER_ADDRESS.split(".").map(Number)),
    listenerPort: (listener.addr as Deno.NetAddr).port,
  });
  const emit = (packet: Uint8Array) => tun.write(packet);
  const pumping = (async () => {
    for (;;) {
      const packet = await tun.read();
      if (!packet) return;
      nat.translate(packet, emit);
    }
  })();
  pumping.catch((error) => console.error(`transparent TCP capture stopped: ${error.message}`));
  const loop: ConnectionLoop = acceptConnections(listener, async (conn) => {
    const from = conn.remoteAddr as Deno.NetAddr;
    const flow = from.hostname === PEER_ADDRESS ? nat.flow(from.port) : undefined;
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
  return {
    async close() {
      await loop.close();
      tun.close();
    },
  };
}
