// Child environments wired to the proxy, the serve integration
// (enforceManagedNetwork), and the `proxy` command (addresses, live reload,
// the JSON-lines decider).

import { connect } from "../../src/client/client.ts";
import { inProcessTransport } from "../../src/client/in_process.ts";
import { nullLogger } from "../../src/log/logger.ts";
import {
  ALL_PROXY_ENV_KEYS,
  applyProxyEnv,
  CUSTOM_CA_ENV_KEYS,
  DEFAULT_NO_PROXY,
  hasProxyUrlEnvVars,
  HTTP_PROXY_ENV_KEYS,
  NO_PROXY_ENV_KEYS,
  PROXY_ENV_KEYS,
  proxyUrlEnvValue,
  stripManagedProxyEnv,
  WS_PROXY_ENV_KEYS,
} from "../../src/proxy/env.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { config, curl, httpOrigin, startProxy } from "../helpers/proxy.ts";
import { CLI, jsonLines, text } from "../helpers/wire_client.ts";

const http = { transport: "tcp" as const, hostname: "127.0.0.1", port: 3128 };
const socks = { transport: "tcp" as const, hostname: "127.0.0.1", port: 8081 };

Deno.test("env: every tool's proxy variables, markers and NO_PROXY", () => {
  const env = applyProxyEnv({ HTTP_PROXY: "http://stale:1", KEEP: "1" }, {
    http,
    socks,
    allowLocalBinding: false,
    trustBundlePath: null,
    os: "linux",
  });
  for (const k of [...HTTP_PROXY_ENV_KEYS, ...WS_PROXY_ENV_KEYS]) {
    assertEquals(env[k], "http://127.0.0.1:3128", k);
  }
  for (const k of ALL_PROXY_ENV_KEYS) assertEquals(env[k], "socks5h://127.0.0.1:8081", k);
  // Without local binding nothing bypasses the proxy (the reference's rule).
  for (const k of NO_PROXY_ENV_KEYS) assertEquals(env[k], "", k);
  assert(!("YARN_NO_PROXY" in env), "the reference does not write YARN_NO_PROXY");
  const local = applyProxyEnv({}, { http, socks, allowLocalBinding: true, trustBundlePath: null });
  for (const k of NO_PROXY_ENV_KEYS) assertEquals(local[k], DEFAULT_NO_PROXY, k);
  assertEquals(local.CODEX_NETWORK_ALLOW_LOCAL_BINDING, "1");
  assert(!DEFAULT_NO_PROXY.includes("169.254"));
  assertEquals(env.CODEX_NETWORK_PROXY_ACTIVE, "1");
  assertEquals(env.CODEX_NETWORK_ALLOW_LOCAL_BINDING, "0");
  assertEquals(env.NODE_USE_ENV_PROXY, "1");
  assertEquals(env.ELECTRON_GET_USE_PROXY, "true");
  assertEquals(env.KEEP, "1");
  assert(!("GIT_SSH_COMMAND" in env), "GIT_SSH_COMMAND is macOS-only");
  const written = Object.keys(env).filter((k) => k !== "KEEP");
  for (const k of written) assert(PROXY_ENV_KEYS.includes(k), `unexpected key ${k}`);
  const noSocks = applyProxyEnv({}, {
    http,
    socks: null,
    allowLocalBinding: true,
    trustBundlePath: null,
  });
  for (const k of ALL_PROXY_ENV_KEYS) assertEquals(noSocks[k], "http://127.0.0.1:3128");
  assertEquals(noSocks.CODEX_NETWORK_ALLOW_LOCAL_BINDING, "1");
  const v6 = applyProxyEnv({}, {
    http: { ...http, hostname: "::1" },
    socks: null,
    allowLocalBinding: false,
    trustBundlePath: null,
  });
  assertEquals(v6.HTTPS_PROXY, "http://[::1]:3128");
});

Deno.test("env: CA variables point at the bundle unless a command set its own", () => {
  const bundle = "/home/u/.codex/proxy/ca-bundle-x.pem";
  const env = applyProxyEnv(
    {
      REQUESTS_CA_BUNDLE: "/custom/ca.pem",
      SSL_CERT_FILE: "/startup/ca.pem",
      NODE_EXTRA_CA_CERTS: "",
    },
    {
      http,
      socks,
      allowLocalBinding: false,
      trustBundlePath: bundle,
      startupEnv: (n) => (n === "SSL_CERT_FILE" ? "/startup/ca.pem" : undefined),
    },
  );
  assertEquals(env.REQUESTS_CA_BUNDLE, "/custom/ca.pem");
  for (const k of CUSTOM_CA_ENV_KEYS.filter((k) => k !== "REQUESTS_CA_BUNDLE")) {
    assertEquals(env[k], bundle, k);
  }
  const stripped = stripManagedProxyEnv(env, (p) => p === bundle);
  assertEquals(Object.keys(stripped).sort(), ["REQUESTS_CA_BUNDLE"]);
});

Deno.test("env: git over SOCKS on macOS keeps foreign GIT_SSH_COMMAND values", () => {
  const mac = (existing?: string) =>
    applyProxyEnv(existing === undefined ? {} : { GIT_SSH_COMMAND: existing }, {
      http,
      socks,
      allowLocalBinding: false,
      trustBundlePath: null,
      os: "darwin",
    }).GIT_SSH_COMMAND;
  assertEquals(
    mac(),
    "CODEX_PROXY_GIT_SSH_COMMAND=1 ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:8081 %h %p'",
  );
  assertEquals(mac("ssh -i key"), "ssh -i key");
  assertEquals(
    mac("ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:1 %h %p'"),
    "ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:1 %h %p'",
  );
  assertEquals(
    mac("CODEX_PROXY_GIT_SSH_COMMAND=1 ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:1 %h %p'"),
    "CODEX_PROXY_GIT_SSH_COMMAND=1 ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:8081 %h %p'",
  );
});

Deno.test("env: proxy URL lookups honour lower-case aliases", () => {
  assertEquals(proxyUrlEnvValue({ https_proxy: "http://a" }, "HTTPS_PROXY"), "http://a");
  assert(hasProxyUrlEnvVars({ all_proxy: "socks5://x" }));
  assert(hasProxyUrlEnvVars({ wss_proxy: "http://x" }));
  assert(!hasProxyUrlEnvVars({ HTTP_PROXY: "  " }));
});

Deno.test("serve integration: processes asking for managed networking get the proxy environment", async () => {
  const origin = httpOrigin();
  await using proxy = await startProxy(config({ domains: { "127.0.0.1": "allow" } }));
  const server = new ExecServer({ logger: nullLogger, managedNetwork: proxy });
  const client = await connect({
    transport: inProcessTransport((c) => server.serve(c, "terminate")),
  });
  try {
    assertEquals(client.capabilities.managedNetworkProxy, true);
    const run = async (enforce: boolean) => {
      const result = await client.request("process/start", {
        processId: `p-${enforce}`,
        argv: [
          "/bin/sh",
          "-c",
          `echo "$HTTP_PROXY|$CODEX_NETWORK_PROXY_ACTIVE"; curl -s ${origin.url}/from-child`,
        ],
        cwd: "file:///tmp",
        env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
        tty: false,
        enforceManagedNetwork: enforce,
      });
      let out = "";
      let after = 0;
      for (;;) {
        const r = await client.request(
          "process/read",
          { processId: result.processId, afterSeq: after, waitMs: 2000 },
        );
        for (const c of r.chunks) out += text(Uint8Array.fromBase64(c.chunk));
        after = r.nextSeq - 1;
        if (r.closed) return out;
      }
    };
    const managed = await run(true);
    assertStringIncludes(managed, `http://127.0.0.1:${proxy.addresses.http!.port}|1`);
    assertStringIncludes(managed, "echo GET /from-child");
    assertEquals(origin.seen.length, 1, "the child's request went through the proxy");
    const unmanaged = await run(false);
    assert(unmanaged.startsWith("|"), unmanaged);
  } finally {
    await client.close();
    await server.close();
    await origin.server.shutdown();
  }
});

Deno.test("proxy command: prints its addresses, reloads its file, asks the JSON-lines decider", async () => {
  const origin = httpOrigin();
  const dir = await Deno.makeTempDir();
  const file = `${dir}/proxy.toml`;
  await Deno.writeTextFile(
    file,
    `enabled = true\nallow_local_binding = true\n[domains]\n"127.0.0.1" = "allow"\n`,
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "proxy",
      "--config",
      file,
      "--ephemeral",
      "--home",
      dir,
      "--prompt",
      "--log-level",
      "error",
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const lines = jsonLines(child.stdout);
  const nextLine = () => lines.next();
  const writer = child.stdin.getWriter();
  try {
    const listening = await nextLine();
    assertEquals(listening.type, "listening");
    const p = `http://${listening.http}`;
    assertEquals((await curl(["-x", p, `${origin.url}/one`])).status, 200);
    // An unlisted host goes to the prompt; answering allow lets it through.
    const asking = curl(["-x", p, `http://localhost:${origin.port}/asked`]);
    const question = await nextLine();
    assertEquals([question.type, question.host, question.protocol], [
      "decision_request",
      "localhost",
      "http",
    ]);
    await writer.write(
      new TextEncoder().encode(JSON.stringify({ id: question.id, decision: "allow" }) + "\n"),
    );
    assertEquals((await asking).status, 200);
    // Live reload: deny the origin.
    await new Promise((r) => setTimeout(r, 1100));
    await Deno.writeTextFile(
      file,
      `enabled = true\nallow_local_binding = true\n[domains]\n"127.0.0.1" = "deny"\n`,
    );
    let status = 0;
    for (let i = 0; i < 40 && status !== 403; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await curl(["-x", p, `${origin.url}/two`])).status;
    }
    assertEquals(status, 403);
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await writer.close().catch(() => {});
    await lines.cancel();
    await origin.server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});
