// The egress proxy's listeners driven by real clients: curl (-x, -p CONNECT,
// --socks5-hostname), the npm `socks` client (CONNECT, reply codes, auth,
// UDP ASSOCIATE) and Deno's fetch through Deno.createHttpClient({ proxy }).

import { Buffer } from "node:buffer";
import dgram from "node:dgram";
import { SocksClient } from "socks";
import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  addr,
  config,
  curl,
  fakeResolver,
  httpOrigin,
  raw,
  socksUdpAssociation,
  startProxy,
} from "../helpers/proxy.ts";

const LOCAL = { "127.0.0.1": "allow" as const };
// The npm socks client leaves its handshake timers running (30 s) after it
// is done; our side is still checked: the proxy is disposed in each test.
const SOCKS_CLIENT = { sanitizeOps: false, sanitizeResources: false };

Deno.test("http proxy: absolute-form requests are forwarded with hop-by-hop headers removed", async () => {
  const origin = httpOrigin();
  await using proxy = await startProxy(config({ domains: LOCAL }));
  try {
    const r = await curl([
      "-x",
      `http://${addr(proxy.addresses.http)}`,
      `${origin.url}/a?q=1`,
      "-d",
      "payload",
      "-H",
      "Connection: X-Secret",
      "-H",
      "X-Secret: 1",
      "-H",
      "X-Forwarded-For: 1.2.3.4",
      "-H",
      "Proxy-Authorization: Basic Zm9vOmJhcg==",
      "-H",
      "Keep-Alive: 5",
    ]);
    assertEquals(r.status, 200);
    assertEquals(r.body, "echo POST /a payload");
    const h = origin.seen[0]!.headers;
    assertEquals(origin.seen[0]!.path, "/a?q=1");
    assertEquals(h["x-forwarded-for"], "1.2.3.4");
    assertEquals(h["host"], `127.0.0.1:${origin.port}`);
    for (const gone of ["x-secret", "proxy-authorization", "keep-alive", "proxy-connection"]) {
      assert(!(gone in h), gone);
    }
    assert(!("via" in h));
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("http proxy: keep-alive, origin-form with Host, chunked bodies both ways, HEAD", async () => {
  const origin = httpOrigin((req) => {
    if (new URL(req.url).pathname === "/stream") {
      return new Response(
        new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode("part1,"));
            await new Promise((r) => setTimeout(r, 20));
            c.enqueue(new TextEncoder().encode("part2"));
            c.close();
          },
        }),
      );
    }
    return new Response("ok", { headers: { "x-origin": "1" } });
  });
  await using proxy = await startProxy(config({ domains: LOCAL }));
  try {
    const port = proxy.addresses.http!.port;
    const text = await raw(
      port,
      `GET ${origin.url}/one HTTP/1.1\r\nHost: 127.0.0.1:${origin.port}\r\n\r\n` +
        `POST /two HTTP/1.1\r\nHost: 127.0.0.1:${origin.port}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n` +
        `GET ${origin.url}/stream HTTP/1.1\r\nHost: 127.0.0.1:${origin.port}\r\n\r\n` +
        `HEAD ${origin.url}/h HTTP/1.1\r\nHost: 127.0.0.1:${origin.port}\r\nConnection: close\r\n\r\n`,
    );
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1]);
    assertEquals(statuses, ["200", "200", "200", "200"]);
    assertEquals(origin.seen.map((s) => `${s.method} ${s.path} ${s.body}`), [
      "GET /one ",
      "POST /two abcde",
      "GET /stream ",
      "HEAD /h ",
    ]);
    assertStringIncludes(
      text,
      "transfer-encoding: chunked\r\n\r\n6\r\npart1,\r\n5\r\npart2\r\n0\r\n\r\n",
    );
    assert(
      text.trimEnd().endsWith("connection: close"),
      "the HEAD response has no body and closes",
    );
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("http proxy: refusals — allow list, deny list, limited methods, bad requests, upstream down", async () => {
  const origin = httpOrigin();
  await using proxy = await startProxy(
    config({ domains: { ...LOCAL, "blocked.test": "deny", "**.test": "allow" } }),
    {
      resolver: fakeResolver({
        "blocked.test": ["93.184.216.34"],
        "other.example": ["93.184.216.35"],
      }),
    },
  );
  const p = `http://${addr(proxy.addresses.http)}`;
  try {
    const notAllowed = await curl(["-x", p, "http://other.example/x"]);
    assertEquals(notAllowed.status, 403);
    assertStringIncludes(notAllowed.head, "x-proxy-error: blocked-by-allowlist");
    assertStringIncludes(notAllowed.head, "content-type: application/json");
    assertEquals(JSON.parse(notAllowed.body), {
      status: "blocked",
      host: "other.example",
      reason: "not_allowed",
      decision: "deny",
      source: "baseline_policy",
      protocol: "http",
      port: 80,
      message: "Domain not in allowlist.",
    });
    const denied = await curl(["-x", p, "http://blocked.test/"]);
    assertStringIncludes(denied.head, "x-proxy-error: blocked-by-denylist");
    const local = await curl(["-x", p, "http://10.1.2.3/"]);
    assertEquals(JSON.parse(local.body).reason, "not_allowed_local");
    const mismatch = await raw(
      proxy.addresses.http!.port,
      `GET ${origin.url}/ HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n`,
    );
    assert(mismatch.startsWith("HTTP/1.1 400"), mismatch);
    assertStringIncludes(mismatch, "Host header does not match request target");
    const missing = await raw(
      proxy.addresses.http!.port,
      `GET /x HTTP/1.1\r\nConnection: close\r\n\r\n`,
    );
    assertStringIncludes(missing, "missing host");
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const deadPort = (closed.addr as Deno.NetAddr).port;
    closed.close();
    const down = await curl(["-x", p, `http://127.0.0.1:${deadPort}/`]);
    assertEquals(down.status, 502);
    assertEquals(down.body, "upstream failure");
    const reasons = proxy.state.blockedSnapshot().map((b) => `${b.host}:${b.reason}:${b.protocol}`);
    assertEquals(reasons, [
      "other.example:not_allowed:http",
      "blocked.test:denied:http",
      "10.1.2.3:not_allowed_local:http",
    ]);

    proxy.state.setMode("limited");
    const post = await curl(["-x", p, `${origin.url}/`, "-d", "x"]);
    assertEquals(post.status, 403);
    assertStringIncludes(post.head, "x-proxy-error: blocked-by-method-policy");
    assertEquals(JSON.parse(post.body).source, "mode_guard");
    assertEquals((await curl(["-x", p, `${origin.url}/`])).status, 200);
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("http proxy: CONNECT tunnels — allowed, refused, unreachable, limited without interception", async () => {
  const origin = httpOrigin();
  await using proxy = await startProxy(config({ domains: LOCAL }));
  const p = `http://${addr(proxy.addresses.http)}`;
  try {
    const tunnel = await curl(["-p", "-x", p, `${origin.url}/tunnel`]);
    assertEquals(tunnel.status, 200);
    assertEquals(tunnel.body, "echo GET /tunnel ");
    const refused = await raw(
      proxy.addresses.http!.port,
      "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n",
    );
    assert(refused.startsWith("HTTP/1.1 403"), refused);
    assertStringIncludes(refused, "x-proxy-error: blocked-by-allowlist");
    assertStringIncludes(refused, "content-type: text/plain");
    assert(refused.endsWith("Sandbox policy blocks local/private network addresses."), refused);
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const deadPort = (closed.addr as Deno.NetAddr).port;
    closed.close();
    const dead = await raw(
      proxy.addresses.http!.port,
      `CONNECT 127.0.0.1:${deadPort} HTTP/1.1\r\n\r\n`,
    );
    assert(dead.startsWith("HTTP/1.1 502"), dead);
    const bad = await raw(proxy.addresses.http!.port, "CONNECT nohostport HTTP/1.1\r\n\r\n");
    assertStringIncludes(bad, "missing authority");
    proxy.state.setMode("limited");
    const limited = await raw(
      proxy.addresses.http!.port,
      `CONNECT 127.0.0.1:${origin.port} HTTP/1.1\r\n\r\n`,
    );
    assert(limited.startsWith("HTTP/1.1 403"), limited);
    assertStringIncludes(limited, "x-proxy-error: blocked-by-mitm-required");
    assert(limited.endsWith("MITM required for limited HTTPS."));
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("http proxy: a name that resolves public for policy but private at dial time is refused (DNS rebinding)", async () => {
  const origin = httpOrigin();
  let calls = 0;
  await using proxy = await startProxy(config({ domains: { "rebind.test": "allow" } }), {
    resolver: () => Promise.resolve(++calls === 1 ? ["93.184.216.34"] : ["127.0.0.1"]),
  });
  try {
    const r = await curl([
      "-x",
      `http://${addr(proxy.addresses.http)}`,
      `http://rebind.test:${origin.port}/`,
    ]);
    assertEquals(r.status, 403);
    assertEquals(JSON.parse(r.body).reason, "not_allowed_local");
    assertEquals(origin.seen.length, 0);
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("http proxy: Deno fetch through createHttpClient({ proxy }), with a decider allowing an unlisted name", async () => {
  const origin = httpOrigin();
  const asked: string[] = [];
  await using proxy = await startProxy(config({ allow_local_binding: true }), {
    resolver: fakeResolver({ "svc.internal": ["127.0.0.1"] }),
    decider: (req) => {
      asked.push(`${req.protocol} ${req.host}:${req.port} ${req.method}`);
      return { allow: true };
    },
  });
  const client = Deno.createHttpClient({ proxy: { url: `http://${addr(proxy.addresses.http)}` } });
  try {
    const res = await fetch(`http://svc.internal:${origin.port}/via-fetch`, { client });
    assertEquals(await res.text(), "echo GET /via-fetch ");
    assertEquals(asked, [`http svc.internal:${origin.port} GET`]);
  } finally {
    client.close();
    await origin.server.shutdown();
  }
});

Deno.test("socks5: curl --socks5-hostname and refusals with reply 0x02", async () => {
  const origin = httpOrigin();
  await using proxy = await startProxy(config({ domains: { ...LOCAL, "localhost": "allow" } }));
  const s = addr(proxy.addresses.socks);
  try {
    assertEquals(
      (await curl(["--socks5-hostname", s, `http://localhost:${origin.port}/named`])).body,
      "echo GET /named ",
    );
    assertEquals((await curl(["--socks5", s, `${origin.url}/ip`])).body, "echo GET /ip ");
    const refused = await curl(["--socks5-hostname", s, "http://example.org/"]);
    assertEquals(refused.code, 97);
    assertStringIncludes(refused.stderr, "(2)");
    assertEquals(proxy.state.blockedSnapshot().at(-1)!.protocol, "socks5");
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test({
  name: "socks5: the npm socks client — IPv4, IPv6 and domain targets, reply codes, BIND",
  ...SOCKS_CLIENT,
}, async () => {
  const origin = httpOrigin();
  const v6 = (() => {
    try {
      return Deno.serve({ hostname: "::1", port: 0, onListen() {} }, () => new Response("v6"));
    } catch {
      return null;
    }
  })();
  await using proxy = await startProxy(
    config({ allow_local_binding: true, domains: { "*": "allow", "denied.test": "deny" } }),
    {
      resolver: fakeResolver({ "origin.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"] }),
    },
  );
  const sp = { host: "127.0.0.1", port: proxy.addresses.socks!.port, type: 5 as const };
  const get = async (host: string, port: number) => {
    const { socket } = await SocksClient.createConnection({
      proxy: sp,
      command: "connect",
      destination: { host, port },
    });
    socket.write(`GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n`);
    let text = "";
    for await (const chunk of socket) text += new TextDecoder().decode(chunk as Uint8Array);
    return text;
  };
  const replyCode = async (host: string, port: number, command: "connect" | "bind" = "connect") => {
    try {
      const { socket } = await SocksClient.createConnection({
        proxy: sp,
        command,
        destination: { host, port },
        timeout: 5000,
      });
      socket.destroy();
      return "ok";
    } catch (error) {
      return (error as Error).message;
    }
  };
  try {
    assertStringIncludes(await get("127.0.0.1", origin.port), "echo GET /x");
    assertStringIncludes(await get("origin.test", origin.port), "echo GET /x");
    if (v6) assertStringIncludes(await get("::1", v6.addr.port), "v6");
    assertStringIncludes(
      await replyCode("denied.test", origin.port),
      "NotAllowed",
    );
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const dead = (closed.addr as Deno.NetAddr).port;
    closed.close();
    assertStringIncludes(await replyCode("127.0.0.1", dead), "ConnectionRefused");
    // BIND (0x02) and an unknown address type (0x09) over a raw socket.
    const rawReply = async (request: number[]) => {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: sp.port });
      await conn.write(new Uint8Array([5, 1, 0, ...request]));
      const buffer = new Uint8Array(64);
      let got: number[] = [];
      while (got.length < 4) {
        const n = await conn.read(buffer);
        if (n === null) break;
        got = [...got, ...buffer.subarray(0, n)];
      }
      conn.close();
      return got.slice(2, 4);
    };
    assertEquals(await rawReply([5, 2, 0, 1, 127, 0, 0, 1, 0, 80]), [5, 0x07]);
    assertEquals(await rawReply([5, 1, 0, 9, 0, 0]), [5, 0x08]);
  } finally {
    await origin.server.shutdown();
    await v6?.shutdown();
  }
});

Deno.test({ name: "socks5: username/password authentication", ...SOCKS_CLIENT }, async () => {
  const origin = httpOrigin();
  await using proxy = await startProxy(
    config({ domains: LOCAL, socks5_auth: { username: "agent", password: "s3cret" } }),
  );
  const base = { host: "127.0.0.1", port: proxy.addresses.socks!.port, type: 5 as const };
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: { ...base, userId: "agent", password: "s3cret" },
      command: "connect",
      destination: { host: "127.0.0.1", port: origin.port },
    });
    socket.destroy();
    let failure = "";
    try {
      await SocksClient.createConnection({
        proxy: { ...base, userId: "agent", password: "wrong" },
        command: "connect",
        destination: { host: "127.0.0.1", port: origin.port },
      });
    } catch (error) {
      failure = (error as Error).message;
    }
    assertStringIncludes(failure, "Authentication");
    const noAuth = await curl(["--socks5", addr(proxy.addresses.socks), `${origin.url}/`]);
    assert(noAuth.code !== 0, "a client without credentials is refused");
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test({
  name: "socks5: UDP ASSOCIATE relays allowed datagrams and drops refused ones",
  ...SOCKS_CLIENT,
}, async () => {
  const echo = dgram.createSocket("udp4");
  await new Promise<void>((r) => echo.bind(0, "127.0.0.1", () => r()));
  echo.on(
    "message",
    (msg, from) =>
      echo.send(
        new Uint8Array([...new TextEncoder().encode("echo:"), ...msg]),
        from.port,
        from.address,
      ),
  );
  const echoPort = echo.address().port;
  await using proxy = await startProxy(config({ domains: { "127.0.0.1": "allow" } }));
  const client = dgram.createSocket("udp4");
  await new Promise<void>((r) => client.bind(0, "127.0.0.1", () => r()));
  try {
    const { control: socket, relayPort } = await socksUdpAssociation(proxy.addresses.socks!.port);
    const replies: string[] = [];
    client.on("message", (msg) => {
      const frame = SocksClient.parseUDPFrame(
        msg as unknown as Parameters<typeof SocksClient.parseUDPFrame>[0],
      );
      replies.push(new TextDecoder().decode(frame.data));
    });
    const send = (host: string, port: number, text: string) =>
      client.send(
        SocksClient.createUDPFrame({
          remoteHost: { host, port },
          data: Buffer.from(text),
        }),
        relayPort,
        "127.0.0.1",
      );
    send("127.0.0.1", echoPort, "one");
    for (let i = 0; i < 100 && replies.length < 1; i++) await new Promise((r) => setTimeout(r, 20));
    assertEquals(replies, ["echo:one"]);
    send("10.9.9.9", 9, "refused");
    for (let i = 0; i < 50 && proxy.state.blockedTotal < 1; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assertEquals(proxy.state.blockedSnapshot().at(-1)!.protocol, "socks5-udp");
    send("127.0.0.1", echoPort, "two");
    for (let i = 0; i < 100 && replies.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    assertEquals(replies, ["echo:one", "echo:two"], "the association survives a refused datagram");
    socket.destroy();
  } finally {
    client.close();
    echo.close();
  }
});

Deno.test("http proxy: a pooled upstream connection the origin closed is retried on a fresh one", async () => {
  // An origin that answers one request per connection, then closes it
  // without saying so (no `connection: close`).
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let served = 0;
  const serving = (async () => {
    for await (const conn of listener) {
      const buffer = new Uint8Array(4096);
      await conn.read(buffer);
      served++;
      await conn.write(new TextEncoder().encode(`HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok`));
      await new Promise((r) => setTimeout(r, 20));
      conn.close();
    }
  })();
  await using proxy = await startProxy(config({ domains: LOCAL }));
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 50)); // let the origin close the pooled connection
      const r = await curl([
        "-x",
        `http://${addr(proxy.addresses.http)}`,
        `http://127.0.0.1:${port}/${i}`,
      ]);
      assertEquals([r.status, r.body], [200, "ok"]);
    }
    assertEquals(served, 3);
  } finally {
    listener.close();
    await serving.catch(() => {});
  }
});

/** The fd of this process's TCP listener on `port` (from /proc). */
function listenerFd(port: number): number {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const line = Deno.readTextFileSync("/proc/self/net/tcp").split("\n")
    .find((l) => l.includes(`:${hex} `) && l.trim().split(/\s+/)[3] === "0A");
  assert(line, `no listener on ${port}`);
  const inode = line.trim().split(/\s+/)[9];
  for (const e of Deno.readDirSync("/proc/self/fd")) {
    try {
      if (Deno.readLinkSync(`/proc/self/fd/${e.name}`) === `socket:[${inode}]`) {
        return Number(e.name);
      }
    } catch { /* gone */ }
  }
  throw new Error(`no fd for inode ${inode}`);
}

Deno.test("proxy: a listener that dies is reported by wait(), not a debug line; accepting never spins", async () => {
  const lib = Deno.dlopen("libc.so.6", { shutdown: { parameters: ["i32", "i32"], result: "i32" } });
  try {
    const proxy = await startProxy(config());
    const port = proxy.addresses.http!.port;
    let settled = false;
    const waited = proxy.wait().finally(() => settled = true);
    // Accept now fails for good (EINVAL) behind the proxy's back.
    assertEquals(lib.symbols.shutdown(listenerFd(port), 2), 0);
    const error = await waited.then(() => null, (e: Error) => e);
    assert(error, "wait() resolved");
    assertStringIncludes(
      error.message,
      `the HTTP proxy listener on 127.0.0.1:${port} died: Invalid argument`,
    );
    await proxy.shutdown();
    // A healthy proxy's wait() resolves at shutdown.
    const healthy = await startProxy(config());
    const done = healthy.wait();
    await healthy.shutdown();
    await done;
    assert(settled);
  } finally {
    lib.close();
  }
});

Deno.test("proxy listeners: unmanaged binds the configured ports; managed replaces them with fresh loopback ports; no SOCKS listener when SOCKS is off", async () => {
  // Two ports nothing listens on now.
  const free = () => {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    return port;
  };
  const httpPort = free();
  const socksPort = free();
  const configured = config({
    proxy_url: `http://127.0.0.1:${httpPort}`,
    socks_url: `http://127.0.0.1:${socksPort}`,
    enable_socks5: true,
    domains: LOCAL,
  });
  {
    await using unmanaged = await startProxy(configured, { managed: false });
    assertEquals(
      [unmanaged.addresses.http?.port, unmanaged.addresses.socks?.port],
      [httpPort, socksPort],
    );
    // The configured port is the one that answers.
    const origin = httpOrigin();
    try {
      const r = await curl([
        "-x",
        `http://127.0.0.1:${httpPort}`,
        `http://127.0.0.1:${origin.port}/x`,
      ]);
      assertEquals([r.code, r.status], [0, 200], r.stderr);
    } finally {
      await origin.server.shutdown();
    }
  }
  {
    // Managed: configured ports this test holds open the whole time — a
    // proxy that tried to bind them would fail to start (and no other
    // test can take them meanwhile, as it could a port merely left free).
    const held = [0, 0].map(() => Deno.listen({ hostname: "127.0.0.1", port: 0 }));
    try {
      const [heldHttp, heldSocks] = held.map((l) => (l.addr as Deno.NetAddr).port);
      await using managed = await startProxy({
        ...configured,
        proxy_url: `http://127.0.0.1:${heldHttp}`,
        socks_url: `http://127.0.0.1:${heldSocks}`,
      });
      const { http, socks } = managed.addresses;
      assert(http !== null && socks !== null);
      assert(http.port !== heldHttp && socks.port !== heldSocks, `${http.port} ${socks.port}`);
      assertEquals([http.hostname, socks.hostname], ["127.0.0.1", "127.0.0.1"]);
    } finally {
      for (const l of held) l.close();
    }
  }
  for (const managed of [true, false]) {
    await using off = await startProxy({ ...configured, enable_socks5: false }, { managed });
    assertEquals(off.addresses.socks, null);
    assert(off.addresses.http !== null);
    // Nothing took the SOCKS port.
    Deno.listen({ hostname: "127.0.0.1", port: socksPort }).close();
    const env = off.applyToEnv({});
    assert(!Object.values(env).some((v) => v.startsWith("socks")), JSON.stringify(env));
  }
});
