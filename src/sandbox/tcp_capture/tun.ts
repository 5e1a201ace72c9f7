/**
 * A TUN device in the sandbox's network namespace, through libc: created
 * with `TUNSETIFF`, given an IPv4 and an IPv6 address and default routes
 * with the classic `SIOC*` ioctls on `AF_INET`/`AF_INET6` sockets (no
 * netlink, which the sandbox's seccomp filter refuses, and no `ip`
 * program), then read and written one IP packet at a time.
 *
 * Creating and configuring needs `CAP_NET_ADMIN` in the namespace; the
 * bridge holds it only until the program starts (see `proxy_bridge.ts`).
 *
 * @module
 */

import { C, errno, type Libc, libcLoadError, loadLibc, strerror } from "../../util/libc.ts";

/** `linux/if_tun.h` and `linux/sockios.h` (x86-64 and aarch64 agree). */
const TUNSETIFF = 0x400454can;
const IFF_TUN = 0x0001;
const IFF_NO_PI = 0x1000;
const SIOCGIFFLAGS = 0x8913n;
const SIOCSIFFLAGS = 0x8914n;
const SIOCSIFADDR = 0x8916n;
const SIOCSIFNETMASK = 0x891cn;
const SIOCSIFMTU = 0x8922n;
const SIOCADDRT = 0x890bn;
const SIOCGIFINDEX = 0x8933n;
const IFF_UP = 0x1;
const IFF_RUNNING = 0x40;
const RTF_UP = 0x1;
const AF_INET = 2;
const AF_INET6 = 10;
const SOCK_DGRAM = 2;
/** `struct ifreq`: a 16-byte name, then a 24-byte union. */
const IFREQ_SIZE = 40;
/** `struct rtentry` on LP64, and the offsets used here. */
const RTENTRY_SIZE = 120;
const RT_DST = 8;
const RT_GENMASK = 40;
const RT_FLAGS = 56;
const RT_DEV = 88;
/** `struct in6_ifreq` and `struct in6_rtmsg`, and their offsets used here. */
const IN6_IFREQ_SIZE = 24;
const IN6_RTMSG_SIZE = 80;
const RTMSG_DST_LEN = 52;
const RTMSG_METRIC = 56;
const RTMSG_FLAGS = 72;
const RTMSG_IFINDEX = 76;

/** Largest packet read at once (at least the device's MTU, 65 535 at most). */
const READ_SIZE = 65_536;

function ifreq(name: string): Uint8Array {
  const req = new Uint8Array(IFREQ_SIZE);
  req.set(new TextEncoder().encode(name).subarray(0, 15));
  return req;
}

/** Writes a `sockaddr_in` for `ip` (4 bytes) at `offset`. */
function sockaddrIn(into: Uint8Array, offset: number, ip: Uint8Array): void {
  new DataView(into.buffer, into.byteOffset).setUint16(offset, AF_INET, true);
  into.set(ip, offset + 4);
}

/** An open TUN device. */
export class Tun {
  readonly #libc: Libc;
  readonly #fd: number;
  readonly #buffer = new Uint8Array(READ_SIZE);
  #closed = false;
  /** IPv6 is routed through the device too (false: the kernel has no IPv6 here). */
  ipv6 = false;

  private constructor(libc: Libc, fd: number) {
    this.#libc = libc;
    this.#fd = fd;
  }

  /**
   * Creates the device `name` with `address` (IPv4, a /32) and `address6`
   * (IPv6, a /128), brings it up with `mtu` and routes every destination
   * through it. Throws with the system's reason when an IPv4 step fails;
   * without IPv6 in the kernel, IPv6 stays unrouted (unreachable).
   */
  static open(name: string, address: Uint8Array, address6: Uint8Array, mtu: number): Tun {
    const libc = loadLibc();
    if (!libc) throw new Error(libcLoadError());
    const fail = (what: string): never => {
      throw new Error(`${what}: ${strerror(libc, errno(libc))}`);
    };
    const fd = libc.open(new TextEncoder().encode("/dev/net/tun\0"), C.O_RDWR | C.O_CLOEXEC);
    if (fd < 0) fail("cannot open /dev/net/tun");
    const tun = new Tun(libc, fd);
    let sock = -1;
    try {
      const req = ifreq(name);
      new DataView(req.buffer).setUint16(16, IFF_TUN | IFF_NO_PI, true);
      if (libc.ioctl(fd, TUNSETIFF, req) !== 0) fail(`cannot create the TUN device ${name}`);
      sock = libc.socket(AF_INET, SOCK_DGRAM | C.SOCK_CLOEXEC, 0);
      if (sock < 0) fail("cannot open a configuration socket");
      const set = (request: bigint, fill: (req: Uint8Array) => void, what: string) => {
        const r = ifreq(name);
        fill(r);
        if (libc.ioctl(sock, request, r) !== 0) fail(`cannot ${what} of ${name}`);
        return r;
      };
      set(SIOCSIFADDR, (r) => sockaddrIn(r, 16, address), "set the address");
      set(
        SIOCSIFNETMASK,
        (r) => sockaddrIn(r, 16, new Uint8Array([255, 255, 255, 255])),
        "set the netmask",
      );
      set(SIOCSIFMTU, (r) => new DataView(r.buffer).setInt32(16, mtu, true), "set the MTU");
      const flags = set(SIOCGIFFLAGS, () => {}, "read the flags");
      const view = new DataView(flags.buffer);
      view.setInt16(16, view.getInt16(16, true) | IFF_UP | IFF_RUNNING, true);
      if (libc.ioctl(sock, SIOCSIFFLAGS, flags) !== 0) fail(`cannot bring ${name} up`);
      // default dev NAME: destination and mask 0.0.0.0, no gateway.
      const route = new Uint8Array(RTENTRY_SIZE);
      const device = new TextEncoder().encode(`${name}\0`);
      const rv = new DataView(route.buffer);
      sockaddrIn(route, RT_DST, new Uint8Array(4));
      sockaddrIn(route, RT_GENMASK, new Uint8Array(4));
      rv.setUint16(RT_FLAGS, RTF_UP, true);
      rv.setBigUint64(
        RT_DEV,
        BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(device))),
        true,
      );
      if (libc.ioctl(sock, SIOCADDRT, route) !== 0) fail(`cannot route through ${name}`);
      const index = new DataView(set(SIOCGIFINDEX, () => {}, "read the index").buffer).getInt32(
        16,
        true,
      );
      tun.ipv6 = routeIpv6(libc, index, address6);
    } catch (error) {
      tun.close();
      throw error;
    } finally {
      if (sock >= 0) libc.close(sock);
    }
    return tun;
  }

  /**
   * The next packet the namespace sent, or null once closed. The bytes are
   * valid until the next call: handle them before reading again.
   */
  async read(): Promise<Uint8Array | null> {
    if (this.#closed) return null;
    const n = Number(await this.#libc.read(this.#fd, this.#buffer, BigInt(READ_SIZE)));
    if (n > 0) return this.#buffer.subarray(0, n);
    if (this.#closed) return null;
    // errno belongs to the thread the read ran on: not readable here.
    throw new Error(`reading the TUN device failed (${n === 0 ? "end of file" : "error"})`);
  }

  /** Hands `packet` to the namespace (a TUN write takes a whole packet or nothing). */
  write(packet: Uint8Array): void {
    if (this.#closed) return;
    this.#libc.write(this.#fd, packet, BigInt(packet.length));
  }

  /** Closes the device (a read under way ends with the process). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#libc.close(this.#fd);
  }
}

/** Gives device `index` the IPv6 address `address` and the default route; false if IPv6 is off. */
function routeIpv6(libc: Libc, index: number, address: Uint8Array): boolean {
  const sock = libc.socket(AF_INET6, SOCK_DGRAM | C.SOCK_CLOEXEC, 0);
  if (sock < 0) return false;
  try {
    const req = new Uint8Array(IN6_IFREQ_SIZE);
    const rv = new DataView(req.buffer);
    req.set(address);
    rv.setUint32(16, 128, true);
    rv.setInt32(20, index, true);
    if (libc.ioctl(sock, SIOCSIFADDR, req) !== 0) return false;
    // ::/0 through the device.
    const route = new Uint8Array(IN6_RTMSG_SIZE);
    const v = new DataView(route.buffer);
    v.setUint16(RTMSG_DST_LEN, 0, true);
    v.setUint32(RTMSG_METRIC, 1, true);
    v.setUint32(RTMSG_FLAGS, RTF_UP, true);
    v.setInt32(RTMSG_IFINDEX, index, true);
    return libc.ioctl(sock, SIOCADDRT, route) === 0;
  } finally {
    libc.close(sock);
  }
}
