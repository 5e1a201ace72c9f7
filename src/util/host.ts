/**
 * Host names and IP literals as policies see them (egress proxy, Origin and
 * Host checks): normalisation,
 * loopback detection, and the non-public address ranges (the "local"
 * targets that need `allow_local_binding`).
 *
 * @module
 */

/**
 * Normalises a host for policy decisions: trims; takes the inside of
 * `[...]`; drops a `:port` when there is exactly one colon (unbracketed IPv6
 * is left alone); lower-cases; strips trailing dots; writes IPv6 zone ids
 * `%25x` as `%x`.
 */
export function normalizeHost(input: string): string {
  let host = input.trim();
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    host = end === -1 ? host.slice(1) : host.slice(1, end);
  } else if (host.split(":").length === 2) {
    host = host.slice(0, host.indexOf(":"));
  }
  host = host.toLowerCase().replace(/\.+$/, "");
  const zone = host.indexOf("%25");
  if (zone !== -1 && isIPv6(host.slice(0, zone))) {
    host = host.slice(0, zone) + "%" + host.slice(zone + 3);
  }
  return host;
}

/** The host without an IPv6 zone id (`fe80::1%lo0` → `fe80::1`). */
export function unscoped(host: string): string {
  const at = host.indexOf("%");
  return at !== -1 && isIPv6(host.slice(0, at)) ? host.slice(0, at) : host;
}

/** True for an IPv4 or IPv6 literal (zone ids allowed). */
export function isIpLiteral(host: string): boolean {
  const h = unscoped(host);
  return isIPv4(h) || isIPv6(h);
}

/** `localhost` (any case, trailing dot) or a loopback IP literal. */
export function isLoopbackHost(input: string): boolean {
  const host = normalizeHost(input);
  if (host === "localhost") return true;
  const bytes = ipBytes(unscoped(host));
  if (!bytes) return false;
  if (bytes.length === 4) return bytes[0] === 127;
  const v4 = mappedV4(bytes);
  if (v4) return v4[0] === 127;
  return bytes.every((b, i) => (i === 15 ? b === 1 : b === 0));
}

/** Parses an IP literal to 4 or 16 bytes (an IPv6 zone id is left out); `null` if it is not one. */
export function ipBytes(ip: string): Uint8Array | null {
  return parseIPv4(ip) ?? parseIPv6(ip);
}

/**
 * True for a dotted-quad IPv4 literal: four decimal parts 0–255, no leading
 * zeros (`node:net`'s `isIPv4`; `tests/proxy/host_test.ts` compares them).
 */
export function isIPv4(text: string): boolean {
  return parseIPv4(text) !== null;
}

/**
 * True for an IPv6 literal in any RFC 4291 text form: eight groups of 1–4
 * hex digits, or fewer around one `::` standing for at least one zero group,
 * the last two groups optionally a dotted quad, and an optional zone id
 * (`%` and letters, digits, `-`, `.`, `:`) — `node:net`'s `isIPv6`, without
 * loading Node's networking modules into every server.
 */
export function isIPv6(text: string): boolean {
  return parseIPv6(text) !== null;
}

function parseIPv4(text: string): Uint8Array | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = parts[i]!;
    if (!/^(?:0|[1-9]\d{0,2})$/.test(part) || Number(part) > 255) return null;
    out[i] = Number(part);
  }
  return out;
}

const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;
const ZONE_ID = /^[0-9a-zA-Z.:-]+$/;

function parseIPv6(text: string): Uint8Array | null {
  const percent = text.indexOf("%");
  if (percent !== -1) {
    if (!ZONE_ID.test(text.slice(percent + 1))) return null;
    text = text.slice(0, percent);
  }
  const gap = text.indexOf("::");
  if (gap !== -1 && text.indexOf("::", gap + 1) !== -1) return null;
  const head = gap === -1 ? text : text.slice(0, gap);
  const tail = gap === -1 ? "" : text.slice(gap + 2);
  const left = head === "" ? [] : head.split(":");
  const right = tail === "" ? [] : tail.split(":");
  // A dotted quad may only end the address (after `::` when there is one).
  const last = gap === -1 ? left : right;
  let quad: Uint8Array | null = null;
  if (last.length > 0 && last[last.length - 1]!.includes(".")) {
    quad = parseIPv4(last.pop()!);
    if (!quad) return null;
  }
  const groups = left.length + right.length + (quad ? 2 : 0);
  if (gap === -1 ? groups !== 8 : groups > 7) return null;
  const out = new Uint8Array(16);
  const put = (words: string[], at: number) => {
    for (const word of words) {
      if (!HEX_GROUP.test(word)) return false;
      const value = parseInt(word, 16);
      out[at++] = value >> 8;
      out[at++] = value & 0xff;
    }
    return true;
  };
  const rightAt = 16 - (quad ? 4 : 0) - right.length * 2;
  if (!put(left, 0) || !put(right, rightAt)) return null;
  if (quad) out.set(quad, 12);
  return out;
}

function mappedV4(bytes: Uint8Array): Uint8Array | null {
  if (bytes.length !== 16) return null;
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return null;
  return bytes[10] === 0xff && bytes[11] === 0xff ? bytes.subarray(12) : null;
}

function v4NonPublic([a, b, c]: Uint8Array): boolean {
  return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) ||
    (a === 172 && b! >= 16 && b! <= 31) || (a === 192 && b === 168) ||
    (a === 100 && b! >= 64 && b! <= 127) || (a === 192 && b === 0 && c === 0) ||
    (a === 192 && b === 0 && c === 2) || (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113) || (a === 198 && (b === 18 || b === 19)) ||
    a! >= 224; // multicast 224/4, reserved 240/4, broadcast
}

/** The text of a 4- or 16-byte address (IPv6 in its compressed form). */
export function ipFromBytes(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join(".");
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // Compress the longest run of two or more zero words.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && words[j] === "0") j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  if (best === -1) return words.join(":");
  return `${words.slice(0, best).join(":")}::${words.slice(best + bestLen).join(":")}`;
}

/**
 * True when `ip` is not a public address: loopback, private, link-local,
 * unspecified, multicast, broadcast, 0/8, CGNAT, 192.0.0/24, TEST-NETs,
 * benchmarking, reserved; IPv6 `::1`, `::`, multicast, fc00::/7, fe80::/10,
 * and IPv4-mapped addresses by their IPv4 part. Non-literals are `false`.
 */
export function isNonPublicIp(ip: string): boolean {
  const bytes = ipBytes(unscoped(ip));
  if (!bytes) return false;
  if (bytes.length === 4) return v4NonPublic(bytes);
  const v4 = mappedV4(bytes);
  if (v4) return v4NonPublic(v4);
  const zero = bytes.subarray(0, 15).every((b) => b === 0);
  if (zero && (bytes[15] === 0 || bytes[15] === 1)) return true;
  return bytes[0] === 0xff || (bytes[0]! & 0xfe) === 0xfc ||
    (bytes[0] === 0xfe && (bytes[1]! & 0xc0) === 0x80);
}

/** A host for a URL or an authority: IPv6 in brackets. */
export function bracketHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** `host:port`, IPv6 in brackets. */
export function formatHostPort(host: string, port: number): string {
  return `${bracketHost(host)}:${port}`;
}

/** A socket address as `host:port` (IPv6 in brackets). */
export function addrText(addr: Deno.Addr): string {
  const a = addr as Deno.NetAddr;
  return formatHostPort(a.hostname, a.port);
}
