// An attacker's suite against the egress proxy: request smuggling through
// framing tricks (plain, in limited mode, inside TLS interception), SOCKS5
// UDP to a name on the deny list, and the families that already held
// (loopback spellings, denied-host spellings, limited-mode methods). A raw
// recording upstream judges what got through: byte for byte.

import { Buffer } from "node:buffer";
import dgram from "node:dgram";
import { SocksClient } from "socks";
import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  config,
  fakeResolver,
  raw,
  recordingUpstream,
  socksUdpAssociation,
  startProxy,
} from "../helpers/proxy.ts";
import { loadLibc } from "../../src/util/libc.ts";
import { generateMitmCa } from "../../src/proxy/mitm/x509.ts";

loadLibc();

/** Requests whose framing a second parser could read another way. */
function smugglers(host: string): Array<[string, string]> {
  const inner = `POST /smuggled HTTP/1.1\r\nHost: denied.test:1\r\nContent-Length: 0\r\n\r\n`;
  const cl = (extra: string) =>
    `GET http://${host}/a HTTP/1.1\r\nHost: ${host}\r\n${extra}Content-Length: ${inner.length}\r\n\r\n${inner}`;
  return [
    ["Connection names Content-Length", cl("Connection: content-length\r\n")],
    [
      "Content-Length with Transfer-Encoding",
      `POST http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 4\r\n` +
      `Transfer-Encoding: chunked\r\n\r\n${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`,
    ],
    [
      "two different Content-Length",
      `POST http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 0\r\n` +
      `Content-Length: ${inner.length}\r\n\r\n${inner}`,
    ],
    ["a Content-Length list", cl(`Content-Length: 0, ${inner.length}\r\n`)],
    [
      "Transfer-Encoding other than chunked",
      `POST http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n${inner}`,
    ],
    [
      "Transfer-Encoding twice",
      `POST http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n` +
      `Transfer-Encoding: identity\r\n\r\n0\r\n\r\n${inner}`,
    ],
    [
      "an obs-fold line",
      `GET http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nX-A: 1\r\n Content-Length: ${inner.length}\r\n\r\n${inner}`,
    ],
    [
      "whitespace before the colon",
      `GET http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nContent-Length : ${inner.length}\r\n\r\n${inner}`,
    ],
    [
      "a bare LF inside the head",
      `GET http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nX-A: 1\nContent-Length: ${inner.length}\r\n\r\n${inner}`,
    ],
    [
      "a chunk size with trailing junk",
      `POST http://${host}/a HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `0x${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`,
    ],
  ];
}

Deno.test("security proxy: ambiguous request framing is refused with 400 before any upstream byte", async () => {
  await using upstream = recordingUpstream();
  const host = `allowed.test:${upstream.port}`;
  await using proxy = await startProxy(
    config({
      allow_local_binding: true,
      domains: { "allowed.test": "allow", "denied.test": "deny" },
    }),
    { resolver: fakeResolver({ "allowed.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"] }) },
  );
  const port = proxy.addresses.http!.port;
  for (const [name, bytes] of smugglers(host)) {
    const answer = await raw(port, bytes);
    // The chunk-size case reads a body the head allowed: the head is fine
    // and forwarding starts, but the bad chunk line ends it; nothing of the
    // inner request may reach the upstream either way.
    if (name !== "a chunk size with trailing junk") {
      assert(answer.startsWith("HTTP/1.1 400"), `${name}: ${answer}`);
    }
    assert(!upstream.received.includes("/smuggled"), `${name}: ${upstream.received}`);
    assert(!upstream.received.includes("denied.test"), `${name}: ${upstream.received}`);
  }
  // The body is re-framed by us: one Content-Length, ours.
  const fine = await raw(
    port,
    `POST http://${host}/ok HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 3\r\n` +
      `Content-Length: 3\r\nConnection: close\r\n\r\nabc`,
  );
  assert(fine.startsWith("HTTP/1.1 200"), fine);
  const forwarded = upstream.received.slice(upstream.received.indexOf("POST /ok"));
  assertEquals(forwarded.match(/content-length/gi)?.length, 1, forwarded);
  assertStringIncludes(forwarded, "content-length: 3\r\n");
  assert(forwarded.endsWith("\r\n\r\nabc"), forwarded);
});

Deno.test("security proxy: a POST cannot ride a GET's body past limited mode", async () => {
  await using upstream = recordingUpstream();
  const host = `127.0.0.1:${upstream.port}`;
  await using proxy = await startProxy(
    config({ mode: "limited", allow_local_binding: true, domains: { "127.0.0.1": "allow" } }),
  );
  const port = proxy.addresses.http!.port;
  for (const [name, bytes] of smugglers(host)) {
    await raw(port, bytes, /^HTTP\/1\.1 \d{3}[^]*?\r\n\r\n/);
    assert(!upstream.received.includes("POST"), `${name}: ${upstream.received}`);
  }
  const post = await raw(
    port,
    `POST http://${host}/x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
  );
  assert(post.startsWith("HTTP/1.1 403"), post);
});

Deno.test("security proxy: the same framing tricks inside TLS interception", async () => {
  const originCa = await generateMitmCa();
  const leaf = await originCa.mintLeaf("127.0.0.1");
  const seen: string[] = [];
  const origin = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: leaf.certPem,
    key: leaf.keyPem,
    onListen() {},
  }, (req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return new Response("ok");
  });
  const home = await Deno.makeTempDir();
  await Deno.writeTextFile(`${home}/origin-ca.pem`, originCa.certPem);
  const vars: Record<string, string> = { SSL_CERT_FILE: `${home}/origin-ca.pem` };
  const env = (n: string) => vars[n];
  const proxy = await startProxy(
    config({ mode: "limited", mitm: true, domains: { "127.0.0.1": "allow" } }),
    { env, mitm: { home, env } },
  );
  try {
    const bundle = await Deno.readTextFile(proxy.trustBundlePath!);
    const host = `127.0.0.1:${origin.addr.port}`;
    for (const [name, bytes] of smugglers(host)) {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.addresses.http!.port });
      await conn.write(
        new TextEncoder().encode(`CONNECT ${host} HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
      );
      const buffer = new Uint8Array(4096);
      let head = "";
      while (!head.includes("\r\n\r\n")) {
        const n = await conn.read(buffer);
        if (n === null) break;
        head += new TextDecoder().decode(buffer.subarray(0, n));
      }
      assert(head.startsWith("HTTP/1.1 200"), head);
      const tls = await Deno.startTls(conn, { hostname: "127.0.0.1", caCerts: [bundle] });
      // Inside the tunnel requests are origin-form.
      await tls.write(new TextEncoder().encode(bytes.replace(`http://${host}`, "")));
      let answer = "";
      try {
        for (;;) {
          const n = await tls.read(buffer);
          if (n === null) break;
          answer += new TextDecoder().decode(buffer.subarray(0, n));
          if (answer.includes("\r\n\r\n")) break;
        }
      } catch { /* closed */ }
      tls.close();
      if (name !== "a chunk size with trailing junk") {
        assert(
          answer.startsWith("HTTP/1.1 400") || answer.startsWith("HTTP/1.1 403"),
          `${name}: ${answer}`,
        );
      }
    }
    assert(!seen.some((s) => s.startsWith("POST")), seen.join());
  } finally {
    await proxy.shutdown();
    await origin.shutdown();
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test({
  name: "security proxy: SOCKS5 UDP to a denied name is dropped whatever it resolves to",
  // The npm socks client leaves its handshake timers running.
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const target = dgram.createSocket("udp4");
  const got: string[] = [];
  target.on("message", (m: Buffer) => got.push(m.toString()));
  await new Promise<void>((r) => target.bind(0, "127.0.0.1", () => r()));
  const targetPort = target.address().port;
  await using proxy = await startProxy(
    config({
      allow_local_binding: true,
      enable_socks5_udp: true,
      domains: { "*": "allow", "denied.test": "deny" },
    }),
    { resolver: fakeResolver({ "denied.test": ["127.0.0.1"], "fine.test": ["127.0.0.1"] }) },
  );
  const { control, relayPort } = await socksUdpAssociation(proxy.addresses.socks!.port);
  const client = dgram.createSocket("udp4");
  await new Promise<void>((r) => client.bind(0, "127.0.0.1", () => r()));
  const send = (host: string, text: string) => {
    const packet = SocksClient.createUDPFrame({
      remoteHost: { host, port: targetPort },
      data: Buffer.from(text),
    });
    client.send(packet, relayPort, "127.0.0.1");
  };
  try {
    for (const name of ["denied.test", "DENIED.TEST.", "Denied.Test"]) send(name, `via ${name}`);
    send("fine.test", "allowed");
    // The allowed datagram arrives; by then the denied ones were decided.
    for (let i = 0; i < 200 && !got.includes("allowed"); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assertEquals(got, ["allowed"]);
    const blocked = proxy.state.blockedSnapshot().map((b) => `${b.host}:${b.reason}`);
    assert(blocked.includes("denied.test:denied"), blocked.join());
  } finally {
    control.destroy();
    client.close();
    target.close();
  }
});

Deno.test("security proxy: held families — loopback spellings, denied-host spellings, limited methods", async () => {
  await using upstream = recordingUpstream();
  await using proxy = await startProxy(
    config({ domains: { "**.example.test": "allow", "secret.example.test": "deny" } }),
    {
      resolver: fakeResolver({
        "a.example.test": ["127.0.0.1"],
        "secret.example.test": ["93.184.216.34"],
      }),
    },
  );
  const port = proxy.addresses.http!.port;
  const status = async (target: string) => {
    const answer = await raw(
      port,
      `GET http://${target}/ HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`,
    );
    return Number(answer.slice(9, 12));
  };
  const refused = (code: number) => code === 400 || code === 403;
  // Loopback and private targets in every spelling: refused (not allowed, not local).
  for (
    const target of [
      `127.0.0.1:${upstream.port}`,
      `127.1:${upstream.port}`,
      `2130706433:${upstream.port}`,
      `0x7f000001:${upstream.port}`,
      `[::1]:${upstream.port}`,
      `[::ffff:127.0.0.1]:${upstream.port}`,
      `localhost:${upstream.port}`,
      `a.example.test:${upstream.port}`, // allowed name, loopback address (rebinding)
    ]
  ) {
    const code = await status(target);
    assert(refused(code), `${target}: ${code}`);
  }
  // A denied name in other spellings.
  for (const target of ["secret.example.test", "SECRET.example.TEST", "secret.example.test."]) {
    assertEquals(await status(target), 403, target);
  }
  assertEquals(upstream.received, "");
});
