// Shared fixtures for the egress proxy tests: a local HTTP origin that
// echoes what it saw, a TLS origin with its own CA, a proxy with a fake
// resolver, curl, and a process run with a launched proxy.

import { join } from "node:path";
import { SocksClient } from "socks";
import { defaultNetworkProxyConfig, type NetworkProxyConfig } from "../../src/proxy/config.ts";
import { NetworkProxy, type NetworkProxyOptions } from "../../src/proxy/network_proxy.ts";
import { generateMitmCa } from "../../src/proxy/mitm/x509.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { assert } from "./assert.ts";
import type { Msg, WireClient } from "./wire_client.ts";

export interface Seen {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** An origin answering `echo <method> <path>` and recording requests. */
export function httpOrigin(handler?: (req: Request) => Response | Promise<Response>) {
  const seen: Seen[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    const body = await req.text();
    seen.push({
      method: req.method,
      path: url.pathname + url.search,
      headers: Object.fromEntries(req.headers),
      body,
    });
    if (handler) return await handler(req);
    return new Response(`echo ${req.method} ${url.pathname} ${body}`);
  });
  return { server, seen, port: server.addr.port, url: `http://127.0.0.1:${server.addr.port}` };
}

/** A TLS origin whose certificate (for `names`) comes from its own CA. */
export async function tlsOrigin(names: string[], port = 0, hostname = "127.0.0.1") {
  const ca = await generateMitmCa();
  const leaf = await ca.mintLeaf(names[0]!);
  const seen: Seen[] = [];
  const server = Deno.serve({
    hostname,
    port,
    cert: leaf.certPem,
    key: leaf.keyPem,
    onListen() {},
  }, async (req) => {
    const url = new URL(req.url);
    const body = await req.text();
    seen.push({
      method: req.method,
      path: url.pathname + url.search,
      headers: Object.fromEntries(req.headers),
      body,
    });
    return new Response(`tls ${req.method} ${url.pathname} ${body}`);
  });
  return { server, seen, caPem: ca.certPem, port: server.addr.port };
}

export const config = (over: Partial<NetworkProxyConfig> = {}): NetworkProxyConfig => ({
  ...defaultNetworkProxyConfig(),
  enabled: true,
  ...over,
});

/** Names → addresses; anything else fails to resolve. */
export function fakeResolver(table: Record<string, string[]>) {
  return (
    host: string,
  ) => (table[host]
    ? Promise.resolve(table[host]!)
    : Promise.reject(new Error(`ENOTFOUND ${host}`)));
}

export async function startProxy(c: NetworkProxyConfig, options: NetworkProxyOptions = {}) {
  return await NetworkProxy.start(c, { logger: nullLogger, env: () => undefined, ...options });
}

/**
 * A proxy with TLS interception in a fresh home that trusts `originCaPem`
 * for upstreams (`SSL_CERT_FILE`); `extraEnv` is its environment, and
 * `options` override the rest (the default resolver maps `api.example.test`
 * and `plain.example.test` to 127.0.0.1).
 */
export async function mitmProxy(
  c: NetworkProxyConfig,
  originCaPem: string,
  extraEnv: Record<string, string> = {},
  options: NetworkProxyOptions = {},
) {
  const home = await Deno.makeTempDir();
  await Deno.writeTextFile(join(home, "origin-ca.pem"), originCaPem);
  const vars: Record<string, string> = { SSL_CERT_FILE: join(home, "origin-ca.pem"), ...extraEnv };
  const env = (n: string) => vars[n];
  const proxy = await startProxy(c, {
    env,
    resolver: fakeResolver({
      "api.example.test": ["127.0.0.1"],
      "plain.example.test": ["127.0.0.1"],
    }),
    mitm: { home, env },
    ...options,
  });
  return {
    proxy,
    home,
    async [Symbol.asyncDispose]() {
      await proxy.shutdown();
      await Deno.remove(home, { recursive: true });
    },
  };
}

/** Whether this process may listen on `hostname`:443 (root, or a low unprivileged port start). */
export function canBind443(hostname = "127.0.0.1"): boolean {
  try {
    Deno.listen({ hostname, port: 443 }).close();
    return true;
  } catch {
    return false;
  }
}

export function addr(a: Deno.NetAddr | null): string {
  if (!a) throw new Error("listener missing");
  return `${a.hostname}:${a.port}`;
}

/** Runs curl; returns status line code (or 0), headers text, body text, exit code. */
export async function curl(args: string[]) {
  const out = await new Deno.Command("curl", {
    args: ["-s", "-S", "-i", "--max-time", "10", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  // With -p (CONNECT) curl prints the proxy's response first.
  const parts = text.split(/\r?\n\r?\n/);
  let i = 0;
  while (
    i < parts.length - 1 &&
    /^HTTP\/1\.[01] 200 (OK|Connection established)\s*(\r?\ncontent-length: 0)?$/i.test(
      parts[i]!.trim(),
    ) && /^HTTP/.test(parts[i + 1] ?? "")
  ) i++;
  const head = parts[i] ?? "";
  const body = parts.slice(i + 1).join("\n\n");
  const status = Number(/^HTTP\/\S+ (\d+)/.exec(head)?.[1] ?? 0);
  return {
    status,
    head: head.toLowerCase(),
    body,
    code: out.code,
    stderr: new TextDecoder().decode(out.stderr),
  };
}

/** Sends raw bytes to `port` and reads until the server closes (or `until` appears). */
export async function raw(
  port: number,
  data: string,
  until?: RegExp,
  hostname = "127.0.0.1",
): Promise<string> {
  const conn = await Deno.connect({ hostname, port });
  await conn.write(new TextEncoder().encode(data));
  let text = "";
  const buffer = new Uint8Array(65536);
  try {
    for (;;) {
      if (until?.test(text)) break;
      const n = await conn.read(buffer);
      if (n === null) break;
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
  } finally {
    conn.close();
  }
  return text;
}

/**
 * A raw HTTP/1.1 upstream recording every byte and counting connections;
 * answers each request head with `ok`.
 */
export function recordingUpstream(hostname = "127.0.0.1", port = 0) {
  const listener = Deno.listen({ hostname, port });
  let received = "";
  let accepted = 0;
  const conns = new Set<Deno.Conn>();
  const serving = (async () => {
    for await (const conn of listener) {
      accepted++;
      conns.add(conn);
      (async () => {
        const buffer = new Uint8Array(65536);
        try {
          for (;;) {
            const n = await conn.read(buffer);
            if (n === null) break;
            const text = new TextDecoder().decode(buffer.subarray(0, n));
            received += text;
            for (const _ of text.matchAll(/\r\n\r\n/g)) {
              await conn.write(
                new TextEncoder().encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
              );
            }
          }
        } catch { /* closed */ }
        conns.delete(conn);
        try {
          conn.close();
        } catch { /* closed */ }
      })();
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    url: `http://${hostname}:${(listener.addr as Deno.NetAddr).port}`,
    get received() {
      return received;
    },
    /** Connections accepted so far. */
    get accepted() {
      return accepted;
    },
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await serving;
    },
  };
}

/** What {@linkcode runWithProxy} saw. */
export interface ProxyRun {
  /** `network/policyRequest` params, in order. */
  asked: Msg[];
  /** `network/policyDecision` params without the timestamp and client port. */
  decisions: Msg[];
  stdout: string;
  stderr: string;
  /** The proxy's HTTP port, as the child saw it. */
  port: number;
}

let proxyRuns = 0;

/**
 * Runs `script` with a launched proxy (`networkProxy`; `extra` adds to the
 * start, e.g. a sandbox); answers each policy request with `answer` (a
 * JSON-RPC answer body, or null to stay silent).
 */
export async function runWithProxy(
  c: WireClient,
  script: string,
  networkProxy: Msg,
  answer: Msg | null,
  extra: Msg = {},
): Promise<ProxyRun> {
  const processId = `np${++proxyRuns}`;
  const started = await c.call("process/start", {
    processId,
    argv: ["/bin/sh", "-c", `echo "port=\${HTTP_PROXY##*:}"; ${script}`],
    cwd: "file:///tmp",
    env: { PATH: "/usr/local/bin:/usr/bin:/bin" },
    tty: false,
    networkProxy,
    ...extra,
  });
  if (started.error) throw new Error(JSON.stringify(started.error));
  const run: ProxyRun = { asked: [], decisions: [], stdout: "", stderr: "", port: 0 };
  const dec = new TextDecoder();
  for (;;) {
    const m = await c.take((m) =>
      m.params?.processId === processId &&
      ["network/policyRequest", "network/policyDecision", "process/output", "process/closed"]
        .includes(m.method)
    );
    if (m.method === "network/policyRequest") {
      run.asked.push(m.params);
      if (answer) await c.send({ jsonrpc: "2.0", id: m.id, ...answer });
    } else if (m.method === "network/policyDecision") {
      const { timestamp, client, ...rest } = m.params;
      assert(!Number.isNaN(Date.parse(timestamp)), timestamp);
      assert(/^127\.0\.0\.1:\d+$/.test(client), client);
      run.decisions.push(rest);
    } else if (m.method === "process/output") {
      const text = dec.decode(Uint8Array.fromBase64(m.params.chunk));
      if (m.params.stream === "stderr") run.stderr += text;
      else run.stdout += text;
    } else break;
  }
  run.port = Number(/port=(\d+)/.exec(run.stdout)?.[1]);
  run.stdout = run.stdout.replace(/port=\d+\n/, "");
  return run;
}

/** A `process/start.networkProxy.proxy` (a launched proxy: full mode, SOCKS5 on) with `over`. */
export function launchedProxy(over: Msg = {}): Msg {
  return {
    enabled: true,
    enableSocks5: true,
    enableSocks5Udp: false,
    allowUpstreamProxy: false,
    dangerouslyAllowAllUnixSockets: false,
    mode: "full",
    allowLocalBinding: true,
    ...over,
  };
}

/**
 * A SOCKS5 UDP ASSOCIATE through the proxy's listener on `socksPort`
 * (npm `socks`): the control connection (the association lives as long as
 * it) and the relay's UDP port to send frames to.
 */
export async function socksUdpAssociation(
  socksPort: number,
): Promise<{ control: { destroy(): void }; relayPort: number }> {
  const associate = new SocksClient({
    proxy: { host: "127.0.0.1", port: socksPort, type: 5 },
    command: "associate",
    destination: { host: "0.0.0.0", port: 0 },
  });
  const { socket, remoteHost } = await new Promise<
    { socket: { destroy(): void }; remoteHost?: { port: number } }
  >((resolve, reject) => {
    associate.on("established", (info) => resolve(info as never));
    associate.on("error", reject);
    associate.connect();
  });
  return { control: socket, relayPort: remoteHost!.port };
}
