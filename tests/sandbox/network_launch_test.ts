// process/start.networkProxy (networkProxyLaunch, networkProxyReviewDomains):
// a proxy per process, network/policyRequest put to the client and answered
// by this test as a harness would, network/policyDecision for every decision,
// the proxy gone when the process closes — side by side with the reference.

import { assert, assertEquals } from "../helpers/assert.ts";
import { httpOrigin, type ProxyRun, runWithProxy } from "../helpers/proxy.ts";
import {
  type NamedServer,
  oursServer,
  pathEntry,
  READ_ONLY,
  referenceServer,
  runSandboxed,
  sandboxContext,
} from "../helpers/sandbox.ts";
import { sandboxSupport, tcpCaptureSupport } from "../../src/sandbox/mod.ts";
import { eventually, type Msg } from "../helpers/wire_client.ts";
import { clientTargets, scratchRoot } from "../helpers/reference.ts";
import { connect } from "../../src/client/client.ts";
import { launchProcessProxy, MAX_OPEN_QUESTIONS } from "../../src/server/network_launch.ts";
import { nullLogger } from "../../src/log/logger.ts";
import type {
  NetworkPolicyDecisionNotification,
  NetworkPolicyRequestParams,
  RemoteNetworkProxyConfig,
} from "../../src/protocol/types.ts";

const PROXY: RemoteNetworkProxyConfig = {
  enabled: true,
  enableSocks5: true,
  enableSocks5Udp: false,
  allowUpstreamProxy: false,
  dangerouslyAllowAllUnixSockets: false,
  mode: "limited",
  allowLocalBinding: true,
};

let processes = 0;

const curl = (url: string) =>
  `curl -sS -m 10 --noproxy '' -x "$HTTP_PROXY" -o /dev/null -w '%{http_code}\\n' ${url}`;

function decision(over: Msg): Msg {
  return {
    processId: over.processId,
    scope: "domain",
    protocol: "http",
    host: "localhost",
    method: "GET",
    policyOverride: false,
    ...over,
  };
}

async function scenarios(named: NamedServer, originPort: number) {
  await using server = named.server;
  const c = server.client;
  await c.initialize();
  const url = `http://localhost:${originPort}/x`;
  const port = originPort;
  const out: Record<string, ProxyRun> = {};
  // Not on the allow list: the client decides.
  out.allowed = await runWithProxy(c, curl(url), {
    policyDecisionTimeoutMs: 10_000,
    proxy: PROXY,
  }, { result: { decision: { type: "allow" } } });
  out.denied = await runWithProxy(c, curl(url), {
    policyDecisionTimeoutMs: 10_000,
    proxy: PROXY,
  }, { result: { decision: { type: "deny", reason: "not today" } } });
  out.asked = await runWithProxy(c, curl(url), {
    policyDecisionTimeoutMs: 10_000,
    proxy: PROXY,
  }, { result: { decision: { type: "ask", reason: "later" } } });
  out.errorAnswer = await runWithProxy(c, curl(url), {
    policyDecisionTimeoutMs: 10_000,
    proxy: PROXY,
  }, { error: { code: -32000, message: "harness gone" } });
  out.malformed = await runWithProxy(c, curl(url), {
    policyDecisionTimeoutMs: 10_000,
    proxy: PROXY,
  }, { result: { decision: "allow" } });
  // Allowed, but a review domain: still asked.
  out.reviewed = await runWithProxy(c, curl(url), {
    policyDecisionTimeoutMs: 10_000,
    proxy: { ...PROXY, domains: { localhost: "allow" }, reviewDomains: ["localhost"] },
  }, { result: { decision: { type: "deny", reason: "reviewed" } } });
  // No decision timeout: nobody is asked; the allow list decides.
  out.baseline = await runWithProxy(c, `${curl(url)}; ${curl(`http://nope.test:${port}/`)}`, {
    proxy: { ...PROXY, domains: { localhost: "allow" } },
  }, null);
  return out;
}

Deno.test("network launch: policy requests answered by the harness, decisions reported, as the reference", async () => {
  const origin = httpOrigin();
  try {
    const servers = [oursServer(), referenceServer()].filter((s): s is NamedServer => !!s);
    const results: Record<string, Record<string, ProxyRun>> = {};
    for (const s of servers) results[s.name] = await scenarios(s, origin.port);
    const ours = results.ours!;
    const port = origin.port;
    const request = (processId: string) => ({
      processId,
      request: { protocol: "http", host: "localhost", port },
    });
    const pid = (run: ProxyRun) => run.asked[0]?.processId ?? run.decisions[0]?.processId;

    assertEquals(ours.allowed!.asked, [request(pid(ours.allowed!))]);
    assertEquals(ours.allowed!.stdout, "200\n");
    assertEquals(ours.allowed!.decisions, [
      decision({
        processId: pid(ours.allowed!),
        port,
        decision: "allow",
        source: "decider",
        reason: "not_allowed",
        policyOverride: true,
      }),
    ]);
    assertEquals(ours.denied!.stdout, "403\n");
    assertEquals(ours.denied!.decisions, [
      decision({
        processId: pid(ours.denied!),
        port,
        decision: "deny",
        source: "decider",
        reason: "not today",
      }),
    ]);
    assertEquals(ours.asked!.decisions[0]!.decision, "ask");
    assertEquals(ours.asked!.stdout, "403\n");
    for (const run of [ours.errorAnswer!, ours.malformed!]) {
      assertEquals(run.stdout, "403\n");
      assertEquals(run.decisions.map((d) => [d.decision, d.source, d.reason]), [
        ["deny", "decider", "not_allowed"],
      ]);
    }
    assertEquals(ours.reviewed!.asked.length, 1, "a review domain is asked about");
    assertEquals(ours.reviewed!.stdout, "403\n");
    assertEquals(ours.reviewed!.decisions[0]!.reason, "reviewed");
    assertEquals(ours.baseline!.asked, []);
    assertEquals(ours.baseline!.decisions.map((d) => [d.host, d.decision, d.source, d.reason]), [
      ["localhost", "allow", "baseline_policy", "allow"],
      ["nope.test", "deny", "baseline_policy", "not_allowed"],
    ]);
    assertEquals(ours.baseline!.stdout, "200\n403\n");
    // Only allowed requests reached the origin.
    assertEquals(origin.seen.length, 2 * servers.length);

    const reference = results.reference;
    if (reference) {
      // Same questions, decisions and child-visible outcomes (process ids aside).
      const shape = (run: ProxyRun) => ({
        asked: run.asked.map(({ processId: _, ...r }) => r),
        decisions: run.decisions.map(({ processId: _, ...d }) => d),
        stdout: run.stdout,
      });
      for (const name of Object.keys(ours)) {
        assertEquals(shape(ours[name]!), shape(reference[name]!), name);
      }
    }
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("network launch: a silent client is denied at the timeout; the proxy ends with its process", async () => {
  const origin = httpOrigin();
  try {
    await using server = oursServer().server;
    const c = server.client;
    await c.initialize();
    const run = await runWithProxy(c, curl(`http://localhost:${origin.port}/`), {
      policyDecisionTimeoutMs: 300,
      proxy: PROXY,
    }, null);
    assertEquals(run.asked.length, 1);
    assertEquals(run.stdout, "403\n");
    assertEquals(run.decisions.map((d) => [d.decision, d.source, d.reason]), [
      ["deny", "decider", "not_allowed"],
    ]);
    // The proxy's own 403 (curl giving up after its 10 s would print 000):
    // the policy timeout decided.
    assertEquals(origin.seen.length, 0);
    // process/closed came: the proxy's port no longer accepts.
    const refused = await eventually(async () => {
      try {
        (await Deno.connect({ hostname: "127.0.0.1", port: run.port })).close();
        return false; // shutdown is asynchronous
      } catch {
        return true;
      }
    }, 30_000);
    assert(refused, `proxy port ${run.port} still open after the process closed`);
  } finally {
    await origin.server.shutdown();
  }
});

Deno.test("network launch: bad launch configs get the reference's errors", async () => {
  const bad: Array<[Msg, string]> = [
    [{}, "missing field `proxy`"],
    [{ proxy: { enabled: true } }, "missing field `enableSocks5`"],
    [{ proxy: { ...PROXY, mode: "open" } }, "unknown variant `open`, expected `limited` or `full`"],
    [{ proxy: { ...PROXY, mode: {} } }, "invalid value: map, expected map with a single key"],
    [{ proxy: { ...PROXY, mode: { full: {} } } }, "invalid type: map, expected unit"],
    [
      { proxy: { ...PROXY, domains: { "x.test": "maybe" } } },
      "unknown variant `maybe`, expected one of `none`, `allow`, `deny`",
    ],
    [
      { proxy: { ...PROXY, domains: { "": "allow" } } },
      "invalid network proxy config: domain pattern is empty",
    ],
    [
      { proxy: { ...PROXY, domains: { "a b": "allow" } } },
      "invalid network proxy config: unsupported domain pattern syntax: a b",
    ],
    [{ proxy: { ...PROXY, reviewDomains: [5] } }, "invalid type: number, expected a string"],
    [
      { proxy: { ...PROXY, unixSockets: { "/s": 1 } } },
      "invalid type: integer `1`, expected string or map",
    ],
    [
      { proxy: { ...PROXY, enabled: false } },
      "invalid network proxy config: executor-local network proxy launch requires an enabled proxy",
    ],
    [
      { policyDecisionTimeoutMs: 0, proxy: PROXY },
      "network policy decision callback timeout must be nonzero",
    ],
    [{ policyDecisionTimeoutMs: "1", proxy: PROXY }, 'invalid type: string "1", expected u64'],
  ];
  const servers = [oursServer(), referenceServer()].filter((s): s is NamedServer => !!s);
  for (const named of servers) {
    await using server = named.server;
    const c = server.client;
    await c.initialize();
    for (const [networkProxy, message] of bad) {
      const r = await c.call("process/start", {
        processId: `bad${++processes}`,
        argv: ["true"],
        cwd: "file:///tmp",
        env: {},
        tty: false,
        networkProxy,
      });
      assertEquals(
        r.error,
        { code: -32602, message },
        `${named.name}: ${JSON.stringify(networkProxy)}`,
      );
    }
    const caps = (await c.call("environment/info", {})).result.capabilities;
    assertEquals(
      [caps.networkProxyLaunch, caps.networkProxyReviewDomains],
      [true, true],
      named.name,
    );
  }
});

for (const [name, options] of clientTargets()) {
  Deno.test(`network launch (client library, ${name}): onNetworkPolicyRequest decides, onNetworkPolicyDecision hears`, async () => {
    const origin = httpOrigin();
    const asked: NetworkPolicyRequestParams[] = [];
    const heard: NetworkPolicyDecisionNotification[] = [];
    try {
      await using client = await connect({
        ...options,
        onNetworkPolicyRequest: (q) => {
          asked.push(q);
          return q.request.port === origin.port
            ? { type: "allow" }
            : { type: "deny", reason: "wrong port" };
        },
        onNetworkPolicyDecision: (d) => void heard.push(d),
      });
      const out = await client.command("/bin/sh", {
        args: [
          "-c",
          `${curl(`http://localhost:${origin.port}/`)}; ${curl("http://localhost:9/")}`,
        ],
        networkProxy: { policyDecisionTimeoutMs: 10_000, proxy: PROXY },
      }).output();
      assertEquals(new TextDecoder().decode(out.stdout), "200\n403\n");
      assertEquals(asked.map((q) => q.request.port), [origin.port, 9]);
      assert(await eventually(() => heard.length === 2), `${heard.length} decisions heard`);
      assertEquals(heard.map((d) => [d.port, d.decision, d.reason]), [
        [origin.port, "allow", "not_allowed"],
        [9, "deny", "wrong port"],
      ]);
      assertEquals(origin.seen.length, 1);
    } finally {
      await origin.server.shutdown();
    }
  });
}

Deno.test({
  name:
    "network launch in a restricted sandbox: enforceManagedNetwork routes to the proxy and nowhere else, as the reference",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const origin = httpOrigin();
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "routed-" });
    try {
      const proxy = { ...PROXY, domains: { localhost: "allow" as const } };
      const script = [
        curl(`http://localhost:${origin.port}/via-proxy`),
        `curl -sS -m 3 -o /dev/null http://127.0.0.1:${origin.port}/direct 2>/dev/null; echo direct=$?`,
        `touch ${ws}/../escape 2>/dev/null; echo write=$?`,
        `echo "proxy=\${DENO_DIR:-unset}"`,
      ].join("; ");
      const servers = [oursServer(), referenceServer()].filter((s): s is NamedServer => !!s);
      const outcomes: Record<string, string[]> = {};
      for (const named of servers) {
        await using server = named.server;
        const c = server.client;
        await c.initialize();
        const sandbox = sandboxContext(ws, READ_ONLY);
        const routed = await runSandboxed(c, ws, script, sandbox, {
          enforceManagedNetwork: true,
          networkProxy: { proxy },
        });
        const unrouted = await runSandboxed(
          c,
          ws,
          curl(`http://localhost:${origin.port}/`),
          sandbox,
          {
            networkProxy: { proxy },
          },
        );
        // A policy that enables the network is still held to the proxy.
        const enabled = await runSandboxed(
          c,
          ws,
          script,
          sandboxContext(ws, READ_ONLY, "enabled"),
          {
            enforceManagedNetwork: true,
            networkProxy: { proxy },
          },
        );
        // A handled signal is the program's to answer, bridge or not.
        const started = await c.call("process/start", {
          processId: `trap${++processes}`,
          argv: [
            "/bin/sh",
            "-c",
            "trap 'echo int; exit 3' INT; echo ready; while :; do sleep 0.05; done",
          ],
          cwd: `file://${ws}`,
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
          sandbox,
          enforceManagedNetwork: true,
          networkProxy: { proxy },
        });
        const id = started.result.processId;
        // Its trap is set once it says so — not at its first output, which
        // may be a loaded machine's "Blocking waiting for file lock" from the
        // bridge (still starting, its own handlers not yet installed).
        await c.notification(
          "process/output",
          (p) =>
            p.processId === id && p.stream === "stdout" &&
            new TextDecoder().decode(Uint8Array.fromBase64(p.chunk)).includes("ready"),
        );
        await c.call("process/signal", { processId: id, signal: "interrupt" });
        const exited = await c.notification("process/exited", (p) => p.processId === id);
        outcomes[named.name] = [
          routed.stdout,
          `exit=${routed.exitCode}`,
          unrouted.stdout,
          enabled.stdout,
          `signalled=${exited.params.exitCode}`,
        ];
      }
      assertEquals(outcomes.ours, [
        "200\ndirect=7\nwrite=1\nproxy=unset\n",
        "exit=0",
        "000\n",
        "200\ndirect=7\nwrite=1\nproxy=unset\n",
        "signalled=3",
      ]);
      // The reference signals its sandbox helper, which dies (130) without
      // the program's trap running; ours delivers to the program, bridged or not.
      if (outcomes.reference) {
        assertEquals(outcomes.ours!.slice(0, 4), outcomes.reference.slice(0, 4));
      }
      assertEquals(
        origin.seen.map((s) => s.path),
        servers.flatMap(() => ["/via-proxy", "/via-proxy"]),
      );
    } finally {
      await origin.server.shutdown();
      await Deno.remove(ws, { recursive: true });
    }
  },
});

Deno.test({
  name: "network launch in a sandbox that hides paths: routing is refused clearly, nothing runs",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "routed-" });
    try {
      await Deno.mkdir(`${ws}/hidden`);
      await using server = oursServer().server;
      const c = server.client;
      await c.initialize();
      const sandbox = sandboxContext(ws, [...READ_ONLY, pathEntry(`${ws}/hidden`, "none")]);
      const r = await c.call("process/start", {
        processId: "hides",
        argv: ["/bin/sh", "-c", `touch ${ws}/ran`],
        cwd: `file://${ws}`,
        env: {},
        tty: false,
        sandbox,
        enforceManagedNetwork: true,
        networkProxy: { proxy: PROXY },
      });
      assertEquals(r.error, {
        code: -32603,
        message:
          "sandbox requested but unavailable: routing a sandbox's network to the managed proxy needs a policy that can read everything",
        data: { kind: "sandboxUnavailable" },
      });
      assert(!(await exists(`${ws}/ran`)));
      // Enforced with no proxy to reach: refused, not run with the policy's network.
      const none = await c.call("process/start", {
        processId: "no-proxy",
        argv: ["/bin/sh", "-c", `touch ${ws}/ran`],
        cwd: `file://${ws}`,
        env: {},
        tty: false,
        sandbox: sandboxContext(ws, READ_ONLY, "enabled"),
        enforceManagedNetwork: true,
      });
      assertEquals(none.error, {
        code: -32603,
        message:
          "sandbox requested but unavailable: enforceManagedNetwork needs a managed network proxy (send networkProxy, or start the server with --network-proxy)",
        data: { kind: "sandboxUnavailable" },
      });
      assert(!(await exists(`${ws}/ran`)));
      // Without enforceManagedNetwork nothing is routed: the same policy runs.
      const plain = await runSandboxed(c, ws, "echo ok", sandbox, {
        networkProxy: { proxy: PROXY },
      });
      assertEquals(plain.stdout, "ok\n");
    } finally {
      await Deno.remove(ws, { recursive: true });
    }
  },
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("network launch: at most 64 open policy questions per proxy; more are denied at once", async () => {
  const open: Array<(answer: unknown) => void> = [];
  const notified: Msg[] = [];
  const proxy = await launchProcessProxy(
    { policyDecisionTimeoutMs: 60_000, proxy: PROXY },
    "p",
    {
      request: () => new Promise((resolve) => open.push(resolve)),
      notify: (_method, params) => void notified.push(params as Msg),
    },
    nullLogger,
  );
  const conns: Deno.Conn[] = [];
  try {
    const port = proxy.addresses.http!.port;
    for (let i = 0; i < 70; i++) {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      conns.push(conn);
      await conn.write(
        new TextEncoder().encode(`GET http://q${i}.test:1/ HTTP/1.1\r\nHost: q${i}.test:1\r\n\r\n`),
      );
    }
    assert(
      await eventually(() => open.length === MAX_OPEN_QUESTIONS && notified.length === 6),
      `${open.length} questions open, ${notified.length} decided`,
    );
    assert(notified.every((d) => d.decision === "deny" && d.source === "decider"));
    for (const answer of open) answer({ decision: { type: "deny", reason: "later" } });
    assert(await eventually(() => notified.length === 70), `${notified.length} decided`);
  } finally {
    for (const conn of conns) conn.close();
    await proxy.shutdown();
  }
});

Deno.test({
  name: "network launch: transparentTcp is validated as the reference validates it",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "ttcp-" });
    try {
      const servers = [oursServer(), referenceServer()].filter((s): s is NamedServer => !!s);
      const answers: Record<string, unknown[]> = {};
      for (const named of servers) {
        await using server = named.server;
        const c = server.client;
        await c.initialize();
        const start = async (extra: Msg) =>
          (await c.call("process/start", {
            processId: `ttcp${++processes}`,
            argv: ["/bin/sh", "-c", `touch ${ws}/ran-${named.name}`],
            cwd: `file://${ws}`,
            env: { PATH: "/usr/bin:/bin" },
            tty: false,
            ...extra,
          })).error ?? null;
        const sandbox = sandboxContext(ws, READ_ONLY, "enabled");
        answers[named.name] = [
          await start({ networkProxy: { proxy: { ...PROXY, transparentTcp: true } } }),
          await start({
            sandbox,
            enforceManagedNetwork: true,
            networkProxy: { proxy: { ...PROXY, enableSocks5: false, transparentTcp: true } },
          }),
          await start({
            sandbox,
            enforceManagedNetwork: true,
            networkProxy: { proxy: { ...PROXY, transparentTcp: "yes" } },
          }),
        ];
        if (named.name === "ours") {
          const info = await c.call("environment/info", {});
          assertEquals(
            info.result.capabilities.networkProxyTransparentTcp,
            tcpCaptureSupport().available,
          );
        }
      }
      assertEquals(answers.ours, [
        { code: -32602, message: "transparent TCP requires a managed Linux sandbox" },
        {
          code: -32602,
          message:
            "invalid network proxy config: transparent_tcp requires an enabled managed SOCKS5 proxy",
        },
        { code: -32602, message: 'invalid type: string "yes", expected a boolean' },
      ]);
      if (answers.reference) assertEquals(answers.reference, answers.ours);
    } finally {
      await Deno.remove(ws, { recursive: true });
    }
  },
});
