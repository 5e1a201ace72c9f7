// --tcp-upstream-proxy HOST:PORT: every SOCKS5 TCP connection of a launched
// proxy goes through that HTTP CONNECT proxy — when the policy allows
// upstreams, and never to a local target — side by side with the reference;
// a managed-network start with no proxy of its own is refused; bad values
// are refused with the reference's reasons.

import { assertEquals } from "../helpers/assert.ts";
import { launchedProxy, runWithProxy } from "../helpers/proxy.ts";
import { oursServer, referenceServer } from "../helpers/sandbox.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import type { Msg } from "../helpers/wire_client.ts";
import { relay } from "../../src/util/conn_io.ts";

const PROXY = launchedProxy({
  allowUpstreamProxy: true,
  domains: {
    "8.8.8.8": "allow",
    "203.0.113.7": "allow",
    "127.0.0.1": "allow",
    "192.168.7.7": "allow",
  },
});

/** A CONNECT proxy that records each request head and tunnels every one to `originPort`. */
function connectProxy(originPort: number) {
  const heads: string[] = [];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serving = (async () => {
    for await (const conn of listener) {
      (async () => {
        const buffer = new Uint8Array(4096);
        let head = "";
        while (!head.includes("\r\n\r\n")) {
          const n = await conn.read(buffer);
          if (n === null) return conn.close();
          head += new TextDecoder().decode(buffer.subarray(0, n));
        }
        heads.push(head);
        const origin = await Deno.connect({ hostname: "127.0.0.1", port: originPort });
        await conn.write(new TextEncoder().encode("HTTP/1.1 200 Connection established\r\n\r\n"));
        await relay(conn, origin);
      })().catch(() => {});
    }
  })();
  return {
    heads,
    port: (listener.addr as Deno.NetAddr).port,
    async close() {
      listener.close();
      await serving.catch(() => {});
    },
  };
}

const curlSocks = (url: string) =>
  `NO_PROXY= no_proxy= curl -sS -m 10 --socks5-hostname "\${ALL_PROXY#socks5h://}" ${url}; echo " rc=$?"`;

Deno.test("tcp upstream: SOCKS5 TCP goes through the mandatory CONNECT proxy, local targets and a policy without upstreams are refused, as the reference", async () => {
  const origin = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => new Response(`hello ${new URL(req.url).pathname}`),
  );
  const upstream = connectProxy(origin.addr.port);
  const flag = ["--tcp-upstream-proxy", `127.0.0.1:${upstream.port}`];
  const script = [
    // Public: through the upstream (which here tunnels everything to the origin).
    curlSocks("http://8.8.8.8/public"),
    // Documentation range, loopback, private: not public, refused.
    curlSocks("http://203.0.113.7/documentation"),
    curlSocks(`http://127.0.0.1:${origin.addr.port}/loopback`),
    curlSocks("http://192.168.7.7/private"),
  ].join("; ");
  const servers = [oursServer(flag), referenceServer(flag)].filter((s) => s !== null);
  const seen: Record<string, Msg> = {};
  try {
    for (const named of servers) {
      await using server = named.server;
      const c = server.client;
      await c.initialize();
      const allowed = await runWithProxy(c, script, { proxy: PROXY }, null);
      const forbidden = await runWithProxy(
        c,
        curlSocks("http://8.8.8.8/forbidden"),
        { proxy: { ...PROXY, allowUpstreamProxy: false } },
        null,
      );
      const noProxy = await c.call("process/start", {
        processId: "managed-without-proxy",
        argv: ["/bin/true"],
        cwd: "file:///tmp",
        env: {},
        tty: false,
        enforceManagedNetwork: true,
      });
      seen[named.name] = {
        stdout: [allowed.stdout, forbidden.stdout],
        stderr: [allowed.stderr, forbidden.stderr],
        decided: [...allowed.decisions, ...forbidden.decisions].map((d) => [d.host, d.decision]),
        heads: upstream.heads.splice(0),
        noProxy: noProxy.error,
      };
    }
  } finally {
    await upstream.close();
    await origin.shutdown();
  }
  const refused = (host: string) => `curl: (97) Can't complete SOCKS5 connection to ${host}. (5)\n`;
  assertEquals(seen.ours, {
    stdout: ["hello /public rc=0\n rc=97\n rc=97\n rc=97\n", " rc=97\n"],
    stderr: [
      refused("203.0.113.7") + refused("127.0.0.1") + refused("192.168.7.7"),
      refused("8.8.8.8"),
    ],
    decided: [
      ["8.8.8.8", "allow"],
      ["203.0.113.7", "allow"],
      ["127.0.0.1", "allow"],
      ["192.168.7.7", "allow"],
      ["8.8.8.8", "allow"],
    ],
    heads: ["CONNECT 8.8.8.8:80 HTTP/1.1\r\nhost: 8.8.8.8:80\r\n\r\n"],
    noProxy: {
      code: -32602,
      message: "a mandatory TCP upstream requires an executor-local managed proxy",
    },
  });
  if (seen.reference) assertEquals(seen.reference, seen.ours);
});

Deno.test("tcp upstream: a value that is not HOST:PORT is refused with the reference's reason", async () => {
  const values = ["nonsense", "127.0.0.1:0", "http://127.0.0.1:80", "proxy.example:99999", ":80"];
  const firstError = async (program: string, args: string[], env: Record<string, string>) => {
    const out = await new Deno.Command(program, {
      args,
      env,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    const line = new TextDecoder().decode(out.stderr).split("\n").find((l) => /^error:/i.test(l));
    return [out.code, line?.replace(/^error: /i, "").trimEnd()];
  };
  const ours = [];
  const reference = [];
  const bin = referenceBin();
  for (const value of values) {
    ours.push(
      await firstError(Deno.execPath(), [
        "run",
        "-A",
        new URL("../../mod.ts", import.meta.url).pathname,
        "serve",
        "--listen",
        "stdio",
        "--tcp-upstream-proxy",
        value,
      ], {}),
    );
    if (bin) {
      reference.push(
        await firstError(bin, ["exec-server", "--listen", "stdio", "--tcp-upstream-proxy", value], {
          CODEX_HOME: referenceHome(),
        }),
      );
    }
  }
  assertEquals(ours.map(([, line]) => line), [
    "invalid value 'nonsense' for '--tcp-upstream-proxy <HOST:PORT>': missing port",
    "invalid value '127.0.0.1:0' for '--tcp-upstream-proxy <HOST:PORT>': TCP upstream proxy port must be nonzero",
    "invalid value 'http://127.0.0.1:80' for '--tcp-upstream-proxy <HOST:PORT>': parse host from host-with-port",
    "invalid value 'proxy.example:99999' for '--tcp-upstream-proxy <HOST:PORT>': parse port as u16",
    "invalid value ':80' for '--tcp-upstream-proxy <HOST:PORT>': parse host from host-with-port",
  ]);
  assertEquals(ours.map(([code]) => code), values.map(() => 2));
  if (bin) assertEquals(reference, ours);
});
