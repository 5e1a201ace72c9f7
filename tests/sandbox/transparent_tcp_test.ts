// Transparent TCP capture (process/start.networkProxy.proxy.transparentTcp,
// the server's --linux-sandbox-transparent-tcp): a sandboxed program's raw
// TCP — bash's /dev/tcp, which knows nothing of proxy variables — goes
// through the launched proxy's policy as socks5_tcp, side by side with the
// reference: an allowed host connects, a denied one (IPv4 or IPv6) is reset,
// UDP and loopback are as before, and the program holds no capability.

import { assert, assertEquals } from "../helpers/assert.ts";
import { launchedProxy, runWithProxy } from "../helpers/proxy.ts";
import { oursServer, READ_ONLY, referenceServer, sandboxContext } from "../helpers/sandbox.ts";
import { scratchRoot } from "../helpers/reference.ts";
import type { Msg } from "../helpers/wire_client.ts";
import { tcpCaptureSupport } from "../../src/sandbox/mod.ts";

const PROXY = launchedProxy();

/** A non-loopback IPv4 address of this machine (a host the sandbox cannot reach itself), or null. */
function hostAddress(): string | null {
  return Deno.networkInterfaces().find((i) => i.family === "IPv4" && !i.address.startsWith("127."))
    ?.address ?? null;
}

/** Opens `host:port` with bash, sends a request line, prints what comes back. */
const dial = (host: string, port: number, label: string) =>
  `bash -c 'exec 3<>/dev/tcp/${host}/${port} && ` +
  `printf "GET /${label} HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3'; echo ${label}=$?`;

/**
 * A refused connection is reset once the proxy has said no: bash usually
 * has its connection by then (and cat reads the reset), but a program not
 * yet scheduled again sees the reset as connect's own error, and one
 * scheduled between the two sees it as printf's write error. One text for
 * all three.
 */
function resets(text: string): string {
  return text.replace(
    /bash: connect: Connection reset by peer\nbash: line 1: \/dev\/tcp\/[^\n]*: Connection reset by peer\n/g,
    "cat: -: Connection reset by peer\n",
  ).replace(
    /bash: line 1: printf: write error: Connection reset by peer\n/g,
    "cat: -: Connection reset by peer\n",
  );
}

Deno.test({
  name:
    "transparent TCP: a program that ignores proxy variables goes through the policy — allowed connects, denied is reset, UDP dropped — as the reference",
  ignore: !tcpCaptureSupport().available,
  fn: async () => {
    const host = hostAddress();
    if (!host) console.warn("note: no non-loopback IPv4 address here: the allowed case is skipped");
    const origin = Deno.serve(
      { hostname: "0.0.0.0", port: 0, onListen() {} },
      (req) =>
        new Response(`hello ${new URL(req.url).pathname}\n`, {
          headers: { date: "-", "content-type": "text/plain" },
        }),
    );
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "ttcp-run-" });
    const port = origin.addr.port;
    const script = [
      host ? dial(host, port, "allowed") : "",
      dial("203.0.113.7", 80, "denied"),
      dial("2001:db8::9", 80, "denied6"),
      `bash -c 'echo x > /dev/udp/203.0.113.7/53'; echo udp=$?`,
      // The sandbox's own loopback is its own (nothing listens there).
      `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' 2>/dev/null; echo loopback=$?`,
      `grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status`,
    ].filter(Boolean).join("; ");
    try {
      const runs: Record<string, Msg> = {};
      for (const named of [oursServer(), referenceServer()]) {
        if (!named) continue;
        await using server = named.server;
        const c = server.client;
        await c.initialize();
        const run = await runWithProxy(
          c,
          script,
          {
            policyDecisionTimeoutMs: 10_000,
            proxy: {
              ...PROXY,
              transparentTcp: true,
              domains: host ? { [host]: "allow" } : {},
            },
          },
          { result: { decision: { type: "deny", reason: "not here" } } },
          {
            sandbox: sandboxContext(ws, READ_ONLY),
            enforceManagedNetwork: true,
            cwd: `file://${ws}`,
          },
        );
        runs[named.name] = {
          stdout: run.stdout.replace(/^date: .*\r\n/m, ""),
          stderr: resets(run.stderr),
          asked: run.asked.map((a) => a.request),
          decisions: run.decisions.map((d) => [d.protocol, d.host, d.port, d.decision, d.reason]),
        };
      }
      const ours = runs.ours!;
      const lines = (ours.stdout as string).split("\n");
      const all = JSON.stringify(ours);
      if (host) {
        assert((ours.stdout as string).includes(`hello /allowed\n`), all);
        assert(lines.includes("allowed=0"), all);
      }
      // A denied connection is reset once the proxy refuses.
      for (const label of ["denied", "denied6"]) assert(lines.includes(`${label}=1`), all);
      assertEquals(ours.stderr, "cat: -: Connection reset by peer\n".repeat(2));
      assert(lines.includes("udp=0") && lines.includes("loopback=1"), all);
      for (const cap of ["CapEff", "CapPrm", "CapBnd", "CapAmb"]) {
        assert(lines.includes(`${cap}:\t0000000000000000`), `${cap}: ${all}`);
      }
      assertEquals(ours.asked, [
        { protocol: "socks5_tcp", host: "203.0.113.7", port: 80 },
        { protocol: "socks5_tcp", host: "2001:db8::9", port: 80 },
      ]);
      assertEquals(ours.decisions, [
        ...(host ? [["socks5_tcp", host, port, "allow", "allow"]] : []),
        ["socks5_tcp", "203.0.113.7", 80, "deny", "not here"],
        ["socks5_tcp", "2001:db8::9", 80, "deny", "not here"],
      ]);
      if (runs.reference) assertEquals(runs.reference, ours);
    } finally {
      await origin.shutdown();
      await Deno.remove(ws, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "transparent TCP: --linux-sandbox-transparent-tcp captures every routed sandbox (transparentTcp:false too), and only those",
  ignore: !tcpCaptureSupport().available,
  fn: async () => {
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "ttcp-flag-" });
    // cat waits for the proxy's answer (a reset), which comes after the ask.
    const script = `bash -c 'exec 3<>/dev/tcp/203.0.113.7/80 && cat <&3' 2>&1; echo rc=$?`;
    const flag = ["--linux-sandbox-transparent-tcp"];
    try {
      const outcomes: Record<string, string[]> = {};
      for (const named of [oursServer(flag), referenceServer(flag)]) {
        if (!named) continue;
        await using server = named.server;
        const c = server.client;
        await c.initialize();
        const sandbox = sandboxContext(ws, READ_ONLY);
        const deny = { result: { decision: { type: "deny", reason: "no" } } };
        const routed = (proxy: Msg, enforce: boolean) =>
          runWithProxy(c, script, { policyDecisionTimeoutMs: 10_000, proxy }, deny, {
            sandbox,
            enforceManagedNetwork: enforce,
            cwd: `file://${ws}`,
          });
        // bash reads ~/.bashrc when its stdin is a socket (its remote-shell
        // guess): whatever that prints on this machine is not the subject.
        const shape = (run: { stdout: string; asked: Msg[] }) =>
          `${
            resets(run.stdout.replace(/^.*\.bashrc: .*\n/gm, "")).trim()
          } asked=${run.asked.length}`;
        outcomes[named.name] = [
          shape(await routed(PROXY, true)),
          shape(await routed({ ...PROXY, transparentTcp: false }, true)),
          // Not routed (no enforceManagedNetwork): the sandbox's own restricted network.
          shape(await routed(PROXY, false)),
        ];
      }
      assertEquals(outcomes.ours, [
        "cat: -: Connection reset by peer\nrc=1 asked=1",
        "cat: -: Connection reset by peer\nrc=1 asked=1",
        "bash: socket: Operation not permitted\nbash: line 1: /dev/tcp/203.0.113.7/80: Operation not permitted\nrc=1 asked=0",
      ]);
      if (outcomes.reference) assertEquals(outcomes.reference, outcomes.ours);
    } finally {
      await Deno.remove(ws, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "transparent TCP: a capture that needs a SOCKS5 listener the proxy does not have is refused at start (the reference's sandbox panics)",
  ignore: !tcpCaptureSupport().available,
  fn: async () => {
    const ws = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "ttcp-nosocks-" });
    try {
      await using server = oursServer(["--linux-sandbox-transparent-tcp"]).server;
      const c = server.client;
      await c.initialize();
      const answer = await c.call("process/start", {
        processId: "nosocks",
        argv: ["/bin/sh", "-c", `touch ${ws}/ran`],
        cwd: `file://${ws}`,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox: sandboxContext(ws, READ_ONLY),
        enforceManagedNetwork: true,
        networkProxy: { proxy: { ...PROXY, enableSocks5: false } },
      });
      assertEquals(answer.error, {
        code: -32602,
        message:
          "invalid network proxy config: transparent_tcp requires an enabled managed SOCKS5 proxy",
      });
      assert(!(await Deno.stat(`${ws}/ran`).then(() => true, () => false)), "nothing ran");
    } finally {
      await Deno.remove(ws, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "managed network with a policy that disables the sandbox: the network is still confined (enforced: unreachable, as the reference; captured: through the policy, where the reference's helper panics)",
  ignore: !tcpCaptureSupport().available,
  fn: async () => {
    const disabled = {
      permissions: { type: "disabled" },
      cwd: "file:///tmp",
      workspaceRoots: [],
      windowsSandboxLevel: "disabled",
      windowsSandboxProxySettingsMode: "reconcile",
      useLegacyLandlock: false,
    };
    const script = `grep CapEff /proc/self/status; ` +
      `bash -c 'exec 3<>/dev/tcp/203.0.113.7/80 && cat <&3' 2>&1; echo rc=$?`;
    const deny = { result: { decision: { type: "deny", reason: "no" } } };
    const enforced: Record<string, string> = {};
    for (const named of [oursServer(), referenceServer()]) {
      if (!named) continue;
      await using server = named.server;
      const c = server.client;
      await c.initialize();
      const run = await runWithProxy(c, script, { proxy: PROXY }, deny, {
        sandbox: disabled,
        enforceManagedNetwork: true,
      });
      enforced[named.name] = run.stdout;
      if (named.name === "ours") {
        const captured = await runWithProxy(
          c,
          script,
          { policyDecisionTimeoutMs: 10_000, proxy: { ...PROXY, transparentTcp: true } },
          deny,
          { sandbox: disabled },
        );
        assertEquals(
          resets(captured.stdout),
          "CapEff:\t0000000000000000\ncat: -: Connection reset by peer\nrc=1\n",
        );
        assertEquals(captured.asked.map((a) => a.request.host), ["203.0.113.7"]);
      }
    }
    assertEquals(
      enforced.ours,
      "CapEff:\t0000000000000000\nbash: connect: Network is unreachable\n" +
        "bash: line 1: /dev/tcp/203.0.113.7/80: Network is unreachable\nrc=1\n",
    );
    if (enforced.reference) assertEquals(enforced.reference, enforced.ours);
  },
});
