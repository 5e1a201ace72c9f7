// Egress control through SOCKS5, judged where it matters — at the
// upstream: limited mode without TLS interception (443 needs interception,
// every other port is refused before the host policy), a hooked host on a
// port other than 443, UDP in limited mode, hooks applied to a SOCKS5
// tunnel (not only HTTP CONNECT), and the audit events of SOCKS5 decisions.
// Origins and upstreams live on 127.0.0.7 so that port 443 there does not
// clash with the other suites' 127.0.0.1:443.

import { Buffer } from "node:buffer";
import dgram from "node:dgram";
import { SocksClient } from "socks";
import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  addr,
  canBind443,
  config,
  curl,
  fakeResolver,
  mitmProxy,
  recordingUpstream,
  socksUdpAssociation,
  startProxy,
  tlsOrigin,
} from "../helpers/proxy.ts";
import type { NetworkProxyConfig } from "../../src/proxy/config.ts";
import type { PolicyDecisionEvent } from "../../src/proxy/decision.ts";
import { socks5Connect, SocksRefusedError } from "../../src/socks5/wire.ts";
import { loadLibc } from "../../src/util/libc.ts";

// CA leases use flock through FFI; load libc once, outside any test.
loadLibc();

const HOST_IP = "127.0.0.7";
const NAMES = fakeResolver({
  "api.example.test": [HOST_IP],
  "plain.example.test": [HOST_IP],
  "denied.example.test": [HOST_IP],
});
const NOT_ALLOWED = 0x02;
const bind443 = canBind443(HOST_IP);

/** A proxy (TLS interception set up when the config asks) recording its audit events. */
async function auditedProxy(c: NetworkProxyConfig, originCaPem = "", env = {}) {
  const events: PolicyDecisionEvent[] = [];
  const m = await mitmProxy(c, originCaPem, env, {
    resolver: NAMES,
    audit: (e) => events.push(e),
  });
  return Object.assign(m, { events, socks: m.proxy.addresses.socks! });
}

/** The audit fields a test decides (no timestamps, no client port). */
function decided(e: PolicyDecisionEvent) {
  return [
    e["network.policy.scope"],
    e["network.policy.decision"],
    e["network.policy.source"],
    e["network.policy.reason"],
    e["network.transport.protocol"],
    e["server.address"],
    e["server.port"],
  ];
}

/**
 * Dials through the SOCKS5 listener; answers "ok" with the connection's
 * local address, or the proxy's reply code.
 */
async function socksDial(socks: Deno.NetAddr, host: string, port: number) {
  const conn = await Deno.connect({ hostname: socks.hostname, port: socks.port });
  const local = addr(conn.localAddr as Deno.NetAddr);
  try {
    await socks5Connect(conn, host, port);
    return { reply: 0, conn, local };
  } catch (error) {
    conn.close();
    if (error instanceof SocksRefusedError) return { reply: error.reply, conn: null, local };
    throw error;
  }
}

Deno.test({
  name:
    "egress socks5, limited mode without interception: 443 is refused as mitm_required, other ports before the host policy; nothing reaches the upstream",
  ignore: !bind443,
  async fn() {
    await using tls = recordingUpstream(HOST_IP, 443);
    await using other = recordingUpstream(HOST_IP);
    await using m = await auditedProxy(config({
      mode: "limited",
      mitm: false,
      allow_local_binding: true,
      domains: { "**.example.test": "allow" },
    }));
    const at443 = await socksDial(m.socks, "api.example.test", 443);
    assertEquals(at443.reply, NOT_ALLOWED);
    assertEquals(m.events.map(decided), [
      ["domain", "allow", "baseline_policy", "allow", "socks5_tcp", "api.example.test", 443],
      ["non_domain", "deny", "mode_guard", "mitm_required", "socks5_tcp", "api.example.test", 443],
    ]);
    assertEquals(m.events[1]!["client.address"], at443.local);
    m.events.length = 0;
    const elsewhere = await socksDial(m.socks, "api.example.test", other.port);
    assertEquals(elsewhere.reply, NOT_ALLOWED);
    // The mode guard answers first: no host decision (and no DNS) for it.
    assertEquals(m.events.map(decided), [
      [
        "non_domain",
        "deny",
        "mode_guard",
        "method_not_allowed",
        "socks5_tcp",
        "api.example.test",
        other.port,
      ],
    ]);
    assertEquals(
      m.proxy.state.blockedSnapshot().map((b) => [b.protocol, b.reason, b.port, b.mode]),
      [
        ["socks5", "mitm_required", 443, "limited"],
        ["socks5", "method_not_allowed", other.port, "limited"],
      ],
    );
    assertEquals([tls.accepted, other.accepted], [0, 0]);
    // The same requests in full mode do reach them: the refusals above were the mode's.
    m.proxy.state.setMode("full");
    for (const port of [443, other.port]) {
      const open = await socksDial(m.socks, "api.example.test", port);
      assertEquals(open.reply, 0, `full mode, port ${port}`);
      await open.conn!.write(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
      const answer = new Uint8Array(64);
      assert((await open.conn!.read(answer)) !== null);
      open.conn!.close();
    }
    assertEquals([tls.accepted, other.accepted], [1, 1]);
  },
});

Deno.test("egress socks5: a hooked host on a port other than 443 is refused (mitm_required); an unhooked one on that port tunnels", async () => {
  await using upstream = recordingUpstream(HOST_IP);
  const origin = await tlsOrigin(["api.example.test"]);
  await origin.server.shutdown();
  await using m = await auditedProxy(
    config({
      mitm: true,
      allow_local_binding: true,
      domains: { "**.example.test": "allow" },
      mitm_hooks: [{
        host: "api.example.test",
        match: { methods: ["POST"], path_prefixes: ["/repos/"] },
        actions: {
          inject_request_headers: [{ name: "authorization", secret_env_var: "HOOK_TOKEN" }],
        },
      }],
    }),
    origin.caPem,
    { HOOK_TOKEN: "real-secret" },
  );
  const hooked = await socksDial(m.socks, "api.example.test", upstream.port);
  assertEquals(hooked.reply, NOT_ALLOWED);
  assertEquals(m.events.map(decided).at(-1), [
    "non_domain",
    "deny",
    "mode_guard",
    "mitm_required",
    "socks5_tcp",
    "api.example.test",
    upstream.port,
  ]);
  assertEquals(m.proxy.state.blockedSnapshot().at(-1)!.reason, "mitm_required");
  assertEquals(upstream.accepted, 0, "a hooked host is never reached without its hooks");
  const plain = await socksDial(m.socks, "plain.example.test", upstream.port);
  assertEquals(plain.reply, 0);
  await plain.conn!.write(new TextEncoder().encode("GET /p HTTP/1.1\r\nHost: plain\r\n\r\n"));
  const answer = new Uint8Array(64);
  const n = await plain.conn!.read(answer);
  assertStringIncludes(new TextDecoder().decode(answer.subarray(0, n ?? 0)), "200 OK");
  plain.conn!.close();
  assertEquals(upstream.accepted, 1);
  assertStringIncludes(upstream.received, "GET /p HTTP/1.1");
});

Deno.test({
  name:
    "egress socks5: hooks apply to a SOCKS5 tunnel — the secret injected on a match, a miss refused before the origin",
  ignore: !bind443,
  async fn() {
    const origin = await tlsOrigin(["api.example.test"], 443, HOST_IP);
    await using m = await auditedProxy(
      config({
        mitm: true,
        allow_local_binding: true,
        domains: { "**.example.test": "allow" },
        mitm_hooks: [{
          host: "api.example.test",
          match: { methods: ["POST"], path_prefixes: ["/repos/"] },
          actions: {
            strip_request_headers: ["authorization"],
            inject_request_headers: [{
              name: "authorization",
              secret_env_var: "HOOK_TOKEN",
              prefix: "Bearer ",
            }],
          },
        }],
      }),
      origin.caPem,
      { HOOK_TOKEN: "real-secret" },
    );
    const via = ["--cacert", m.proxy.trustBundlePath!, "--socks5-hostname", addr(m.socks)];
    try {
      const ok = await curl([
        ...via,
        "https://api.example.test/repos/x",
        "-H",
        "Authorization: Bearer dummy",
        "-d",
        "{}",
      ]);
      assertEquals([ok.status, ok.body], [200, "tls POST /repos/x {}"], ok.stderr);
      assertEquals(origin.seen.length, 1);
      assertEquals(origin.seen[0]!.headers.authorization, "Bearer real-secret");
      const miss = await curl([...via, "https://api.example.test/users"]);
      assertEquals(miss.status, 403, miss.stderr);
      assertStringIncludes(miss.head, "x-proxy-error: blocked-by-mitm-hook");
      assertEquals(origin.seen.length, 1, "the miss never reached the origin");
      const record = m.proxy.state.blockedSnapshot().at(-1)!;
      assertEquals([record.protocol, record.method, record.reason], [
        "https",
        "GET",
        "mitm_hook_denied",
      ]);
      // A client that does not trust the proxy's CA refuses the tunnel: it is intercepted.
      const untrusted = await curl([
        "--socks5-hostname",
        addr(m.socks),
        "https://api.example.test/repos/x",
      ]);
      assertEquals(untrusted.code, 60);
      assertEquals(origin.seen.length, 1);
    } finally {
      await origin.server.shutdown();
    }
  },
});

Deno.test("egress socks5 audit: an allowed and a denied connect, with the client's address and no method", async () => {
  await using upstream = recordingUpstream(HOST_IP);
  await using m = await auditedProxy(config({
    allow_local_binding: true,
    domains: { "**.example.test": "allow", "denied.example.test": "deny" },
  }));
  const allowed = await socksDial(m.socks, "api.example.test", upstream.port);
  assertEquals(allowed.reply, 0);
  allowed.conn!.close();
  const denied = await socksDial(m.socks, "denied.example.test", upstream.port);
  assertEquals(denied.reply, NOT_ALLOWED);
  assertEquals(m.events.map(decided), [
    [
      "domain",
      "allow",
      "baseline_policy",
      "allow",
      "socks5_tcp",
      "api.example.test",
      upstream.port,
    ],
    [
      "domain",
      "deny",
      "baseline_policy",
      "denied",
      "socks5_tcp",
      "denied.example.test",
      upstream.port,
    ],
  ]);
  assertEquals(m.events.map((e) => e["client.address"]), [allowed.local, denied.local]);
  assertEquals(m.events.map((e) => e["http.request.method"]), ["none", "none"]);
  assertEquals(m.events.map((e) => e["event.name"]), [
    "codex.network_proxy.policy_decision",
    "codex.network_proxy.policy_decision",
  ]);
  const record = m.proxy.state.blockedSnapshot().at(-1)!;
  assertEquals([record.protocol, record.host, record.reason, record.source], [
    "socks5",
    "denied.example.test",
    "denied",
    "baseline_policy",
  ]);
  assertEquals(upstream.accepted, 1, "only the allowed connect was dialled");
});

Deno.test({
  name:
    "egress socks5 UDP in limited mode: datagrams are dropped and audited as the mode's refusal; in full mode they pass",
  // The npm socks client leaves its handshake timers running.
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const target = dgram.createSocket("udp4");
  const got: string[] = [];
  target.on("message", (msg: Buffer) => got.push(msg.toString()));
  await new Promise<void>((r) => target.bind(0, HOST_IP, () => r()));
  const second = dgram.createSocket("udp4");
  second.on("message", (msg: Buffer) => got.push(msg.toString()));
  await new Promise<void>((r) => second.bind(0, HOST_IP, () => r()));
  const events: PolicyDecisionEvent[] = [];
  await using proxy = await startProxy(
    config({
      mode: "limited",
      allow_local_binding: true,
      enable_socks5_udp: true,
      domains: { "*": "allow" },
    }),
    { resolver: NAMES, audit: (e) => events.push(e) },
  );
  const { control, relayPort } = await socksUdpAssociation(proxy.addresses.socks!.port);
  const client = dgram.createSocket("udp4");
  await new Promise<void>((r) => client.bind(0, "127.0.0.1", () => r()));
  const send = (port: number, text: string) => {
    const packet = SocksClient.createUDPFrame({
      remoteHost: { host: HOST_IP, port },
      data: Buffer.from(text),
    });
    client.send(packet, relayPort, "127.0.0.1");
  };
  const until = async (done: () => boolean) => {
    for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  };
  const targetPort = target.address().port;
  try {
    send(targetPort, "limited");
    await until(() => events.length > 0);
    assertEquals(events.map(decided), [
      ["non_domain", "deny", "mode_guard", "method_not_allowed", "socks5_udp", HOST_IP, targetPort],
    ]);
    const record = proxy.state.blockedSnapshot().at(-1)!;
    assertEquals([record.protocol, record.reason, record.host, record.port], [
      "socks5-udp",
      "method_not_allowed",
      HOST_IP,
      targetPort,
    ]);
    // Full mode lets UDP through. Decisions are cached per destination for
    // a few seconds within an association, so the control goes elsewhere.
    proxy.state.setMode("full");
    send(second.address().port, "full");
    await until(() => got.includes("full"));
    assertEquals(got, ["full"], "the limited-mode datagram never arrived");
  } finally {
    control.destroy();
    client.close();
    target.close();
    second.close();
  }
});

Deno.test("egress socks5: a connect to a denied host with its payload in the same write reaches nothing (no optimistic dial)", async () => {
  await using upstream = recordingUpstream(HOST_IP);
  await using m = await auditedProxy(config({
    allow_local_binding: true,
    domains: { "**.example.test": "allow", "denied.example.test": "deny" },
  }));
  // Greeting, request and a payload in one write, as an optimistic client sends them.
  const conn = await Deno.connect({ hostname: m.socks.hostname, port: m.socks.port });
  const name = new TextEncoder().encode("denied.example.test");
  const port = upstream.port;
  await conn.write(
    new Uint8Array([
      5,
      1,
      0,
      5,
      1,
      0,
      3,
      name.length,
      ...name,
      port >> 8,
      port & 0xff,
      ...new TextEncoder().encode("GET /early HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]),
  );
  const answer = new Uint8Array(64);
  let got: number[] = [];
  while (got.length < 4) {
    const n = await conn.read(answer);
    if (n === null) break;
    got = [...got, ...answer.subarray(0, n)];
  }
  conn.close();
  assertEquals(got.slice(0, 4), [5, 0, 5, NOT_ALLOWED]);
  assertEquals([upstream.accepted, upstream.received], [0, ""]);
});
