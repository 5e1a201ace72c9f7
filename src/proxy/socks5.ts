/**
 * The SOCKS5 listener (RFC 1928, RFC 1929): no authentication or, when
 * configured, username/password; CONNECT to IPv4, IPv6 and domain targets
 * with the reference's order of checks; UDP ASSOCIATE (when enabled) with
 * every datagram inspected; BIND refused as unsupported. Refusals use the
 * standard reply codes: 0x02 for policy, 0x03/0x04 unreachable, 0x05
 * refused, 0x06 timed out, 0x07 unsupported command, 0x08 bad address type.
 *
 * Deliberate difference: a UDP datagram the policy refuses is dropped (and
 * recorded) instead of ending the whole association.
 *
 * @module
 */

import { sniffTls } from "./tls_sniff.ts";
import dgram from "node:dgram";
import { relay, writeAll } from "../util/conn_io.ts";
import { dialDirect, dialViaProxy, pickUpstream, PolicyDialError } from "./connector.ts";
import type { BlockReason, DecisionSource } from "./decision.ts";
import {
  addrText,
  isIpLiteral,
  isIPv4,
  isIPv6,
  isNonPublicIp,
  normalizeHost,
  unscoped,
} from "../util/host.ts";
import type { ListenerContext } from "./http_proxy.ts";
import { decodeSocksAddress, encodeSocksAddress, SocksReply } from "../socks5/wire.ts";

export { decodeSocksAddress, encodeSocksAddress, SocksReply };

/** Reads exact byte counts from a connection, keeping what was read past them. */
class ConnBuffer {
  #buffered = new Uint8Array(0);
  constructor(private readonly conn: Deno.Conn) {}

  async exact(n: number): Promise<Uint8Array> {
    while (this.#buffered.length < n) {
      const chunk = new Uint8Array(Math.max(512, n));
      const read = await this.conn.read(chunk);
      if (read === null) throw new Error("client closed during the SOCKS5 handshake");
      const joined = new Uint8Array(this.#buffered.length + read);
      joined.set(this.#buffered);
      joined.set(chunk.subarray(0, read), this.#buffered.length);
      this.#buffered = joined;
    }
    const out = this.#buffered.slice(0, n);
    this.#buffered = this.#buffered.subarray(n);
    return out;
  }

  rest(): Uint8Array | null {
    return this.#buffered.length ? this.#buffered : null;
  }
}

function reply(code: number, host = "0.0.0.0", port = 0): Uint8Array {
  return new Uint8Array([0x05, code, 0x00, ...encodeSocksAddress(host, port)]);
}

function errorReply(error: unknown): number {
  if (error instanceof PolicyDialError) return SocksReply.notAllowed;
  const e = error as Error & { code?: string };
  if (e instanceof Deno.errors.ConnectionRefused) return SocksReply.connectionRefused;
  if (e instanceof Deno.errors.TimedOut || e.name === "TimeoutError" || e.name === "AbortError") {
    return SocksReply.ttlExpired;
  }
  const text = `${e.message}`.toLowerCase();
  if (text.includes("network is unreachable")) return SocksReply.networkUnreachable;
  if (
    text.includes("no route") || text.includes("host is unreachable") ||
    text.includes("enotfound") || text.includes("failed to lookup")
  ) {
    return SocksReply.hostUnreachable;
  }
  if (text.includes("refused")) return SocksReply.connectionRefused;
  return SocksReply.generalFailure;
}

/** Serves one SOCKS5 client connection. */
export async function handleSocks5Connection(ctx: ListenerContext, conn: Deno.Conn): Promise<void> {
  const client = addrText(conn.remoteAddr);
  const input = new ConnBuffer(conn);
  const { state } = ctx;
  let keepOpen = false;
  try {
    const [version, nmethods] = await input.exact(2);
    if (version !== 0x05) return;
    const methods = await input.exact(nmethods!);
    const auth = state.config.socks5_auth;
    const wanted = auth ? 0x02 : 0x00;
    if (!methods.includes(wanted)) {
      await writeAll(conn, new Uint8Array([0x05, 0xff]));
      return;
    }
    await writeAll(conn, new Uint8Array([0x05, wanted]));
    if (auth) {
      const [, ulen] = await input.exact(2);
      const user = new TextDecoder().decode(await input.exact(ulen!));
      const [plen] = await input.exact(1);
      const pass = new TextDecoder().decode(await input.exact(plen!));
      const ok = user === auth.username && pass === auth.password;
      await writeAll(conn, new Uint8Array([0x01, ok ? 0x00 : 0x01]));
      if (!ok) return;
    }
    const [, cmd, , atyp] = await input.exact(4);
    let header: Uint8Array;
    if (atyp === 0x01) header = await input.exact(4 + 2);
    else if (atyp === 0x04) header = await input.exact(16 + 2);
    else if (atyp === 0x03) {
      const [len] = await input.exact(1);
      header = new Uint8Array([len!, ...(await input.exact(len! + 2))]);
    } else {
      await writeAll(conn, reply(SocksReply.addressTypeNotSupported));
      return;
    }
    const target = decodeSocksAddress(new Uint8Array([atyp!, ...header]), 0)!;
    if (cmd === 0x01) {
      keepOpen = true;
      await connect(ctx, conn, input, target.host, target.port, client);
    } else if (cmd === 0x03 && state.config.enable_socks5_udp) {
      await udpAssociate(ctx, conn, client);
    } else {
      await writeAll(conn, reply(SocksReply.commandNotSupported));
    }
  } catch (error) {
    ctx.logger.debug("proxy.socks5_failed", { client, error: (error as Error).message });
  } finally {
    if (!keepOpen) {
      try {
        conn.close();
      } catch { /* closed */ }
    }
  }
}

async function connect(
  ctx: ListenerContext,
  conn: Deno.Conn,
  input: ConnBuffer,
  rawHost: string,
  port: number,
  client: string,
): Promise<void> {
  const { state } = ctx;
  const host = normalizeHost(rawHost);
  const refuse = async (
    reason: BlockReason | string,
    source: DecisionSource,
    decision: "deny" | "ask",
    scope: "domain" | "non_domain",
  ) => {
    if (scope === "non_domain") {
      state.audit({
        scope,
        decision: "deny",
        source,
        reason,
        protocol: "socks5_tcp",
        host,
        port,
        client,
      });
    }
    await state.recordBlocked({
      host,
      reason,
      client,
      method: null,
      protocol: "socks5",
      decision,
      source,
      port,
    });
    await writeAll(conn, reply(SocksReply.notAllowed));
    conn.close();
  };
  if (host === "") {
    await writeAll(conn, reply(SocksReply.connectionRefused));
    return conn.close();
  }
  const config = state.config;
  if (!config.enabled) return await refuse("proxy_disabled", "proxy_state", "deny", "non_domain");
  if (config.mode === "limited" && port !== 443) {
    return await refuse("method_not_allowed", "mode_guard", "deny", "non_domain");
  }
  const decision = await state.evaluateHostPolicy({
    protocol: "socks5_tcp",
    host,
    port,
    clientAddr: client,
  });
  if (!decision.allow) {
    return await refuse(decision.reason, decision.source, decision.decision, "domain");
  }
  const hooked = state.current.hooks.has(host);
  const intercept = config.mode === "limited" || hooked;
  if (intercept && (port !== 443 || !config.mitm || !ctx.mitm)) {
    return await refuse("mitm_required", "mode_guard", "deny", "non_domain");
  }
  if (intercept) {
    await writeAll(conn, reply(SocksReply.succeeded));
    return await ctx.mitm!.intercept(conn, input.rest(), host, port, client);
  }
  const brokered = state.broker?.binds(host) && ctx.mitm;
  let toUpstream: Uint8Array | null | Promise<Uint8Array | null> = input.rest();
  if (brokered) {
    // A masked credential's host: TLS is intercepted (its stand-ins are
    // replaced there), anything else relayed as is.
    await writeAll(conn, reply(SocksReply.succeeded));
    const sniffed = await sniffTls(conn, input.rest());
    if (sniffed.tls) {
      return await ctx.mitm!.intercept(conn, sniffed.first as Uint8Array, host, port, client);
    }
    toUpstream = sniffed.first;
  }
  let upstream: Deno.Conn;
  let upstreamLeftover: Uint8Array | null = null;
  const mandatory = ctx.upstreams.tcp ?? null;
  if (mandatory && (!config.allow_upstream_proxy || isLocalTarget(host))) {
    // The only way out is the mandatory upstream: a policy that forbids
    // upstreams, or a local target (which an upstream cannot reach), ends here.
    ctx.logger.debug("proxy.socks5_upstream_required", { host, port });
    if (brokered) return conn.close();
    await writeAll(conn, reply(SocksReply.connectionRefused));
    return conn.close();
  }
  try {
    const proxy = mandatory ??
      (config.allow_upstream_proxy ? pickUpstream(ctx.upstreams, true) : null);
    if (proxy) {
      ({ conn: upstream, leftover: upstreamLeftover } = await dialViaProxy(proxy, rawHost, port));
    } else upstream = await dialDirect(state, rawHost, port);
  } catch (error) {
    ctx.state.metrics?.upstreamError("socks5_tcp");
    ctx.logger.debug("proxy.socks5_connect_failed", {
      host,
      port,
      error: (error as Error).message,
    });
    if (brokered) return conn.close(); // already answered
    if (error instanceof PolicyDialError) {
      return await refuse("not_allowed_local", "baseline_policy", "deny", "domain");
    }
    await writeAll(conn, reply(errorReply(error)));
    return conn.close();
  }
  if (!brokered) {
    const local = upstream.localAddr as Deno.NetAddr;
    await writeAll(conn, reply(SocksReply.succeeded, local.hostname, local.port));
  }
  if (upstreamLeftover?.length) await writeAll(conn, upstreamLeftover);
  await relay(conn, upstream, { toUpstream });
}

/** `localhost` or a loopback, private or link-local literal. */
function isLocalTarget(host: string): boolean {
  return host === "localhost" || (isIpLiteral(host) && isNonPublicIp(unscoped(host)));
}

async function udpAssociate(ctx: ListenerContext, conn: Deno.Conn, client: string): Promise<void> {
  const { state } = ctx;
  const local = conn.localAddr as Deno.NetAddr;
  const peerIp = (conn.remoteAddr as Deno.NetAddr).hostname;
  const v6 = local.hostname.includes(":");
  const socket = dgram.createSocket(v6 ? "udp6" : "udp4");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(0, local.hostname, () => resolve());
  });
  const relayAddr = socket.address();
  let clientPort: number | null = null;
  const decisions = new Map<string, { allow: boolean; at: number }>();
  const allowed = async (ip: string, port: number): Promise<boolean> => {
    const key = `${ip}|${port}`;
    const cached = decisions.get(key);
    if (cached && Date.now() - cached.at < 5000) return cached.allow;
    const config = state.config;
    let allow: boolean;
    if (!config.enabled || config.mode === "limited") {
      const reason = !config.enabled ? "proxy_disabled" : "method_not_allowed";
      const source = !config.enabled ? "proxy_state" as const : "mode_guard" as const;
      state.audit({
        scope: "non_domain",
        decision: "deny",
        source,
        reason,
        protocol: "socks5_udp",
        host: ip,
        port,
        client,
      });
      await state.recordBlocked({
        host: ip,
        reason,
        client,
        method: null,
        protocol: "socks5-udp",
        decision: "deny",
        source,
        port,
      });
      allow = false;
    } else {
      const d = await state.evaluateHostPolicy({
        protocol: "socks5_udp",
        host: normalizeHost(ip),
        port,
        clientAddr: client,
      });
      if (!d.allow) {
        await state.recordBlocked({
          host: ip,
          reason: d.reason,
          client,
          method: null,
          protocol: "socks5-udp",
          decision: d.decision,
          source: d.source,
          port,
        });
      }
      allow = d.allow;
    }
    decisions.set(key, { allow, at: Date.now() });
    return allow;
  };
  socket.on("message", async (msg: Uint8Array, from: { address: string; port: number }) => {
    try {
      if (from.address === peerIp && (clientPort === null || from.port === clientPort)) {
        // Client → target: RSV RSV FRAG ADDR PORT DATA.
        if (msg.length < 4 || msg[2] !== 0) return; // fragments are not supported
        const dst = decodeSocksAddress(msg, 3);
        if (!dst) return;
        clientPort ??= from.port;
        let ip = dst.host;
        if (!isIpLiteral(ip)) {
          // The name's policy first (a deny entry by name must hold whatever
          // it resolves to), then the address it resolves to, as for TCP.
          if (!(await allowed(normalizeHost(ip), dst.port))) return;
          const resolved = await state.resolver(normalizeHost(ip)).catch(() => []);
          const pick = resolved.find((a) => (v6 ? true : isIPv4(a)));
          if (!pick) return;
          ip = pick;
        }
        if (!(await allowed(normalizeHost(ip), dst.port))) return;
        socket.send(msg.subarray(dst.end), dst.port, ip);
      } else if (clientPort !== null) {
        // Target → client: inspected too, then wrapped.
        if (!(await allowed(normalizeHost(from.address), from.port))) return;
        const addr = encodeSocksAddress(from.address, from.port);
        const out = new Uint8Array(3 + addr.length + msg.length);
        out.set(addr, 3);
        out.set(msg, 3 + addr.length);
        socket.send(out, clientPort, peerIp);
      }
    } catch (error) {
      ctx.logger.debug("proxy.socks5_udp_failed", { client, error: (error as Error).message });
    }
  });
  const boundHost = relayAddr.address;
  await writeAll(
    conn,
    reply(
      SocksReply.succeeded,
      isIPv6(boundHost) || isIPv4(boundHost) ? boundHost : "0.0.0.0",
      relayAddr.port,
    ),
  );
  // The association lives as long as the control connection.
  const sink = new Uint8Array(512);
  try {
    while ((await conn.read(sink)) !== null) { /* ignore */ }
  } catch { /* closed */ }
  socket.close();
}
