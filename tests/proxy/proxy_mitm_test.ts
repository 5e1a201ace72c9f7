// TLS interception end to end: curl through CONNECT (and SOCKS5 when port
// 443 can be bound) trusting the generated bundle, Deno fetch with the CA,
// limited-mode method clamp, hooks that inject credentials, host mismatch,
// and the CA files on disk (no private key, leases, pruning, bundles).

import { join } from "node:path";
import { createMitm } from "../../src/proxy/mitm/interceptor.ts";
import {
  isManagedTrustBundlePath,
  sha256Hex,
  writeAtomicCreateNewOrReuse,
} from "../../src/proxy/mitm/files.ts";
import { lockFile } from "../../src/util/file_lock.ts";
import { extractCertificates } from "../../src/proxy/mitm/trust.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { addr, canBind443, config, curl, mitmProxy, tlsOrigin } from "../helpers/proxy.ts";
import { loadLibc } from "../../src/util/libc.ts";

// CA leases use flock through FFI; load libc once, outside any test.
loadLibc();

Deno.test("mitm: limited mode intercepts CONNECT, allows GET, blocks POST; fetch trusts the CA", async () => {
  const origin = await tlsOrigin(["127.0.0.1"]);
  await using m = await mitmProxy(
    config({ mode: "limited", mitm: true, domains: { "127.0.0.1": "allow" } }),
    origin.caPem,
  );
  const p = `http://${addr(m.proxy.addresses.http)}`;
  const bundle = m.proxy.trustBundlePath!;
  try {
    const get = await curl([
      "--cacert",
      bundle,
      "-x",
      p,
      `https://127.0.0.1:${origin.port}/get?x=1`,
    ]);
    assertEquals(get.status, 200);
    assertEquals(get.body, "tls GET /get ");
    assertEquals(origin.seen[0]!.path, "/get?x=1");
    const post = await curl([
      "--cacert",
      bundle,
      "-x",
      p,
      `https://127.0.0.1:${origin.port}/post`,
      "-d",
      "x",
    ]);
    assertEquals(post.status, 403);
    assertStringIncludes(post.head, "x-proxy-error: blocked-by-method-policy");
    assertEquals(post.body, "Method not allowed in limited mode.");
    const record = m.proxy.state.blockedSnapshot().at(-1)!;
    assertEquals([record.protocol, record.method, record.reason, record.port], [
      "https",
      "POST",
      "method_not_allowed",
      origin.port,
    ]);
    assertEquals(origin.seen.length, 1);
    // Without the CA the client refuses our certificate: interception is real.
    const untrusted = await curl(["-x", p, `https://127.0.0.1:${origin.port}/get`]);
    assertEquals(untrusted.code, 60);
    const client = Deno.createHttpClient({
      proxy: { url: p },
      caCerts: [m.proxy.state.config.mitm ? await Deno.readTextFile(bundle) : ""],
    });
    const res = await fetch(`https://127.0.0.1:${origin.port}/fetch`, { client });
    assertEquals(await res.text(), "tls GET /fetch ");
    client.close();
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("mitm: hooks inject credentials on matching requests and refuse the rest; unhooked hosts stay opaque", async () => {
  const origin = await tlsOrigin(["api.example.test"]);
  const plain = await tlsOrigin(["plain.example.test"]);
  await using m = await mitmProxy(
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
  const p = `http://${addr(m.proxy.addresses.http)}`;
  const bundle = m.proxy.trustBundlePath!;
  try {
    const ok = await curl([
      "--cacert",
      bundle,
      "-x",
      p,
      `https://api.example.test:${origin.port}/repos/x`,
      "-H",
      "Authorization: Bearer dummy",
      "-d",
      "{}",
    ]);
    assertEquals(ok.status, 200);
    assertEquals(origin.seen[0]!.headers.authorization, "Bearer real-secret");
    assertEquals(origin.seen[0]!.headers.host, `api.example.test:${origin.port}`);
    const miss = await curl([
      "--cacert",
      bundle,
      "-x",
      p,
      `https://api.example.test:${origin.port}/users`,
    ]);
    assertEquals(miss.status, 403);
    assertStringIncludes(miss.head, "x-proxy-error: blocked-by-mitm-hook");
    assertEquals(miss.body, "HTTPS request denied by MITM hook policy.");
    // Not hooked: a plain tunnel, so the origin's own certificate is what the client sees.
    const opaque = await curl([
      "--cacert",
      join(m.home, "origin-ca.pem"),
      "-x",
      p,
      `https://plain.example.test:${plain.port}/`,
    ]);
    assertEquals(
      opaque.code,
      60,
      "the origin CA file here is the api origin's, not plain's: the leaf is plain's own",
    );
    await Deno.writeTextFile(join(m.home, "plain-ca.pem"), plain.caPem);
    const direct = await curl([
      "--cacert",
      join(m.home, "plain-ca.pem"),
      "-x",
      p,
      `https://plain.example.test:${plain.port}/`,
    ]);
    assertEquals(direct.status, 200);
  } finally {
    await origin.server.shutdown();
    await plain.server.shutdown();
  }
});

Deno.test("mitm: a request for another host inside the tunnel is a 400, not recorded", async () => {
  const origin = await tlsOrigin(["127.0.0.1"]);
  await using m = await mitmProxy(
    config({ mode: "limited", mitm: true, domains: { "127.0.0.1": "allow" } }),
    origin.caPem,
  );
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: m.proxy.addresses.http!.port });
    await conn.write(new TextEncoder().encode(`CONNECT 127.0.0.1:${origin.port} HTTP/1.1\r\n\r\n`));
    const buffer = new Uint8Array(1024);
    const n = await conn.read(buffer);
    assertStringIncludes(new TextDecoder().decode(buffer.subarray(0, n!)), "200");
    const tls = await Deno.startTls(conn, {
      hostname: "127.0.0.1",
      caCerts: [await Deno.readTextFile(m.proxy.trustBundlePath!)],
    });
    await tls.write(
      new TextEncoder().encode("GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"),
    );
    let text = "";
    for (;;) {
      const k = await tls.read(buffer);
      if (k === null) break;
      text += new TextDecoder().decode(buffer.subarray(0, k));
    }
    tls.close();
    assert(text.startsWith("HTTP/1.1 400"), text);
    assert(text.endsWith("host mismatch"), text);
    assertEquals(m.proxy.state.blockedTotal, 0);
    assertEquals(origin.seen.length, 0);
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test({
  name: "mitm: SOCKS5 to port 443 is intercepted in limited mode; other ports are refused",
  ignore: !canBind443(),
  async fn() {
    const origin = await tlsOrigin(["127.0.0.1"], 443);
    await using m = await mitmProxy(
      config({ mode: "limited", mitm: true, domains: { "127.0.0.1": "allow" } }),
      origin.caPem,
    );
    try {
      const s = addr(m.proxy.addresses.socks);
      const ok = await curl([
        "--cacert",
        m.proxy.trustBundlePath!,
        "--socks5-hostname",
        s,
        "https://127.0.0.1/socks",
      ]);
      assertEquals(ok.body, "tls GET /socks ");
      const other = await curl(["--socks5-hostname", s, "http://127.0.0.1:8080/"]);
      assertEquals(other.code, 97);
    } finally {
      await origin.server.shutdown();
    }
  },
});

Deno.test("mitm files: only the certificate, its lease and the bundle; no private key; bundle content", async () => {
  const origin = await tlsOrigin(["127.0.0.1"]);
  await origin.server.shutdown();
  await using m = await mitmProxy(config({ mode: "limited", mitm: true }), origin.caPem);
  const dir = join(m.home, "proxy");
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  const ca = names.find((n) => /^ca-[0-9a-f]{64}\.pem$/.test(n))!;
  const bundle = names.find((n) => /^ca-bundle-[0-9a-f]{64}\.pem$/.test(n))!;
  assertEquals(names.sort(), [`.${ca}.lock`, ".artifacts.lock", bundle, ca].sort());
  for (const n of names) {
    assert(!(await Deno.readTextFile(join(dir, n))).includes("PRIVATE KEY"), n);
  }
  const caPem = await Deno.readTextFile(join(dir, ca));
  assertEquals(ca, `ca-${await sha256Hex(caPem)}.pem`);
  const bundleText = await Deno.readTextFile(join(dir, bundle));
  assert(bundleText.endsWith(caPem), "the managed CA comes last");
  assertEquals(bundleText.split(caPem).length, 2, "once");
  assertStringIncludes(bundleText, origin.caPem.trim().split("\n")[1]!);
  assert(await isManagedTrustBundlePath(join(dir, bundle), m.home));
  assert(!(await isManagedTrustBundlePath(join(dir, ca), m.home)));
  assertEquals(join(dir, bundle), m.proxy.trustBundlePath);
});

Deno.test("mitm files: tampered bundles are not managed; symlinks are refused; unleased CAs are pruned", async () => {
  const home = await Deno.makeTempDir();
  const dir = join(home, "proxy");
  await Deno.mkdir(dir);
  try {
    const stale = `ca-${"a".repeat(64)}.pem`;
    const leased = `ca-${"b".repeat(64)}.pem`;
    await Deno.writeTextFile(
      join(dir, stale),
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    await Deno.writeTextFile(
      join(dir, leased),
      "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n",
    );
    await Deno.writeTextFile(
      join(dir, `ca-bundle-${"c".repeat(64)}.pem`),
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    await Deno.writeTextFile(join(dir, "unrelated.txt"), "keep me");
    const lease = await lockFile(join(dir, `.${leased}.lock`), false, true);
    const origin = await tlsOrigin(["127.0.0.1"]);
    await origin.server.shutdown();
    await using m = await mitmProxy(config({ mode: "limited", mitm: true }), origin.caPem);
    // mitmProxy uses its own home; run createMitm on ours directly.
    const mitm = await createMitm(m.proxy.state, {
      upstreams: { http: null, https: null, all: null },
      logger: (await import("../../src/log/logger.ts")).nullLogger,
    }, { home, env: () => undefined });
    const names: string[] = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert(!names.includes(stale), "an unleased CA is pruned");
    assert(names.includes(leased), "a leased CA survives");
    assert(names.includes("unrelated.txt"));
    assert(!names.includes(`ca-bundle-${"c".repeat(64)}.pem`), "a bundle of pruned CAs goes too");
    await mitm.close();
    lease?.release();

    const bundlePath = mitm.trustBundlePath;
    await Deno.writeTextFile(bundlePath, "tampered", { append: true });
    assert(!(await isManagedTrustBundlePath(bundlePath, home)));
    await Deno.symlink(join(dir, "unrelated.txt"), join(dir, "link.pem"));
    await assertRejects(
      () => writeAtomicCreateNewOrReuse(join(dir, "link.pem"), new TextEncoder().encode("keep me")),
      Error,
      "refusing to reuse symlink",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("trust: OpenSSL TRUSTED CERTIFICATE blocks become plain certificates; keys are dropped", async () => {
  const origin = await tlsOrigin(["127.0.0.1"]);
  await origin.server.shutdown();
  const der = Uint8Array.fromBase64(origin.caPem.replace(/-----[^-]+-----|\s+/g, ""));
  const trusted = new Uint8Array([...der, 0x30, 0x03, 0x06, 0x01, 0x00]);
  const text =
    `-----BEGIN TRUSTED CERTIFICATE-----\n${trusted.toBase64()}\n-----END TRUSTED CERTIFICATE-----\n` +
    "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
  const certs = extractCertificates(text);
  assertEquals(certs.length, 1);
  assertEquals(certs[0]!.replace(/\s+/g, ""), origin.caPem.replace(/\s+/g, ""));
});
