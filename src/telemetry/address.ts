/**
 * The address of a metrics listener (`--metrics-listen`), parsed strictly:
 * `PORT` (loopback), `IP:PORT` or `[IPv6]:PORT`, `localhost` as 127.0.0.1
 * — no other names (a bind address never waits on DNS). Kept apart from
 * the listener so that parsing a command line loads no metrics SDK.
 *
 * @module
 */

/** 4 for a dotted-quad IPv4 literal, 6 for an IPv6 literal, else 0 (no node:net at start-up). */
function isIP(text: string): 0 | 4 | 6 {
  const quad = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (quad) return quad.slice(1).every((o) => Number(o) <= 255 && !/^0\d/.test(o)) ? 4 : 0;
  if (!text.includes(":") || /[^0-9a-fA-F:.]/.test(text)) return 0;
  try {
    new URL(`http://[${text}]/`);
    return 6;
  } catch {
    return 0;
  }
}

/** Where the metrics listener binds. */
export interface MetricsAddress {
  /** An IP literal. */
  readonly hostname: string;
  /** 0 for any free port. */
  readonly port: number;
}

/** Parses a `--metrics-listen` value; throws with the reason when it is not one. */
export function parseMetricsAddress(value: string): MetricsAddress {
  const text = value.trim();
  const fail = (why: string): never => {
    throw new Error(`invalid --metrics-listen ${JSON.stringify(value)}: ${why}`);
  };
  const portOf = (p: string) => {
    if (!/^\d{1,5}$/.test(p) || Number(p) > 65535) fail("the port must be 0-65535");
    return Number(p);
  };
  if (/^\d+$/.test(text)) return { hostname: "127.0.0.1", port: portOf(text) };
  const v6 = /^\[([^\]]+)\]:(.*)$/.exec(text);
  if (v6) {
    if (isIP(v6[1]!) !== 6) fail("not an IPv6 address");
    return { hostname: v6[1]!, port: portOf(v6[2]!) };
  }
  const colon = text.lastIndexOf(":");
  if (colon <= 0) fail("expected HOST:PORT or PORT");
  const host = text.slice(0, colon);
  const port = portOf(text.slice(colon + 1));
  if (host === "localhost") return { hostname: "127.0.0.1", port };
  if (isIP(host) !== 4) fail("the host must be an IP address or localhost (IPv6 in brackets)");
  return { hostname: host, port };
}

/** The scrape URL of a listener at `addr`. */
export function metricsUrl(addr: Deno.NetAddr): string {
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  return `http://${host}:${addr.port}/metrics`;
}
