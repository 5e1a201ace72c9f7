// Egress proxy policy core, ported by behaviour from the reference's config,
// policy, runtime/state, audit, responses and mitm_hook tests.

import {
  defaultNetworkProxyConfig,
  hostAndPortFromNetworkAddr,
  type NetworkProxyConfig,
  parseHostPort,
  parseNetworkProxyConfig,
  resolveBindAddr,
  resolveRuntimeAddresses,
  serializeNetworkProxyConfig,
} from "../../src/proxy/config.ts";
import { parseNetworkProxyConfigText } from "../../src/proxy/config_file.ts";
import { compileDomainPatterns } from "../../src/proxy/domain_pattern.ts";
import { isLoopbackHost, isNonPublicIp, normalizeHost } from "../../src/util/host.ts";
import { applyHookActions, compileMitmHooks } from "../../src/proxy/mitm_hooks.ts";
import { buildConfigState, hostBlocked, methodAllowed } from "../../src/proxy/policy.ts";
import { blockedJson, blockedMessage, proxyErrorHeader } from "../../src/proxy/responses.ts";
import { NetworkProxyState } from "../../src/proxy/state.ts";
import {
  ask,
  deny,
  POLICY_DECISION_EVENT,
  type PolicyDecisionEvent,
  violationLogLine,
} from "../../src/proxy/decision.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/assert.ts";

const cfg = (over: Partial<NetworkProxyConfig> = {}): NetworkProxyConfig => ({
  ...defaultNetworkProxyConfig(),
  enabled: true,
  ...over,
});
const fakeDns = (table: Record<string, string[]>) => (host: string) =>
  table[host] ? Promise.resolve(table[host]!) : Promise.reject(new Error("ENOTFOUND"));
const blocked = async (
  config: NetworkProxyConfig,
  host: string,
  dns: Record<string, string[]> = {},
) => {
  const v = await hostBlocked(buildConfigState(config), host, fakeDns(dns));
  return v.allowed ? "allowed" : v.reason;
};
const PUBLIC = {
  "example.com": ["93.184.216.34"],
  "api.example.com": ["93.184.216.35"],
  "evil.com": ["1.2.3.4"],
};

// --- config ---

Deno.test("config: defaults match the local-use baseline; missing fields take defaults", () => {
  const d = defaultNetworkProxyConfig();
  assertEquals(d.enabled, false);
  assertEquals(d.proxy_url, "http://127.0.0.1:3128");
  assertEquals(d.socks_url, "http://127.0.0.1:8081");
  assertEquals([d.enable_socks5, d.enable_socks5_udp, d.allow_upstream_proxy], [true, true, true]);
  assertEquals([d.mode, d.domains, d.unix_sockets, d.allow_local_binding, d.mitm], [
    "full",
    null,
    null,
    false,
    false,
  ]);
  assertEquals(parseNetworkProxyConfig({ enabled: true }), { ...d, enabled: true });
  assertThrows(
    () => parseNetworkProxyConfig({ enabeld: true }),
    Error,
    "unknown network proxy config key",
  );
  assertThrows(() => parseNetworkProxyConfig({ mode: "open" }), Error, "network.mode");
});

Deno.test("config: the effective domain map (deny > allow), serialised", () => {
  const c = cfg({ domains: { "Example.com.": "deny", "example.com": "allow", "a.test": "none" } });
  const json = serializeNetworkProxyConfig(c);
  assertEquals(json.domains, { "example.com": "deny", "a.test": "none" });
  const state = buildConfigState(c);
  assertEquals(state.allow.patterns, []);
});

Deno.test("config: listener address parsing", () => {
  assertThrows(() => parseHostPort("", 3128), Error, "missing host in network proxy address");
  assertThrows(() => parseHostPort("   ", 3128), Error, "missing host");
  assertEquals(parseHostPort("127.0.0.1:8080", 3128), { host: "127.0.0.1", port: 8080 });
  assertEquals(parseHostPort("http://127.0.0.1:8080/some/path", 3128), {
    host: "127.0.0.1",
    port: 8080,
  });
  assertEquals(parseHostPort("http://user:pass@host.test:9000", 3128), {
    host: "host.test",
    port: 9000,
  });
  assertEquals(parseHostPort("http://[::1]:9999", 3128), { host: "::1", port: 9999 });
  assertEquals(parseHostPort("2001:db8::1", 3128), { host: "2001:db8::1", port: 3128 });
  assertEquals(parseHostPort("example.com:notaport", 3128), { host: "example.com", port: 3128 });
  assertEquals(hostAndPortFromNetworkAddr("", 80), "<missing>");
  assertEquals(hostAndPortFromNetworkAddr("[::1]:8080", 80), "[::1]:8080");
  assertEquals(resolveBindAddr("localhost:1", 0), { host: "127.0.0.1", port: 1 });
  assertEquals(resolveBindAddr("10.1.2.3:1", 0), { host: "10.1.2.3", port: 1 });
  assertEquals(resolveBindAddr("[::1]:1", 0), { host: "::1", port: 1 });
  assertEquals(resolveBindAddr("proxy.internal:1", 0), { host: "127.0.0.1", port: 1 });
});

Deno.test("config: binds are clamped to loopback unless dangerously allowed (and never with unix sockets)", () => {
  const open = cfg({
    proxy_url: "http://0.0.0.0:3128",
    dangerously_allow_non_loopback_proxy: true,
  });
  assertEquals(resolveRuntimeAddresses(open).http.host, "0.0.0.0");
  assertEquals(
    resolveRuntimeAddresses(cfg({ proxy_url: "http://0.0.0.0:3128" })).http.host,
    "127.0.0.1",
  );
  assertEquals(
    resolveRuntimeAddresses({ ...open, unix_sockets: { "/tmp/s.sock": "allow" } }).http.host,
    "127.0.0.1",
  );
  assertEquals(
    resolveRuntimeAddresses({ ...open, dangerously_allow_all_unix_sockets: true }).http.host,
    "127.0.0.1",
  );
  assertThrows(
    () => resolveRuntimeAddresses(cfg({ unix_sockets: { "rel.sock": "allow" } })),
    Error,
    "network.allow_unix_sockets[0]",
  );
  resolveRuntimeAddresses(cfg({ unix_sockets: { "/var/run/x.sock": "allow" } }));
});

Deno.test("config files: JSON, TOML, and a Codex permissions profile with hooks", async () => {
  assertEquals(
    (await parseNetworkProxyConfigText('{"enabled":true,"mode":"limited"}', "json")).mode,
    "limited",
  );
  const flat = await parseNetworkProxyConfigText(
    'enabled = true\n[domains]\n"example.com" = "allow"\n',
    "toml",
  );
  assertEquals(flat.domains, { "example.com": "allow" });
  Deno.env.set("PROXY_TEST_SECRET", "s3cret");
  try {
    const profile = await parseNetworkProxyConfigText(
      `default_permissions = "dev"
[permissions.dev.network]
enabled = true
mode = "full"
[permissions.dev.network.domains]
"api.github.com" = "allow"
[permissions.dev.network.mitm.hooks.gh]
host = "api.github.com"
methods = ["post"]
path_prefixes = ["/repos/"]
action = ["auth"]
[permissions.dev.network.mitm.actions.auth]
strip_request_headers = ["authorization"]
inject_request_headers = [{ name = "authorization", secret_env_var = "PROXY_TEST_SECRET", prefix = "Bearer " }]
`,
      "toml",
    );
    assertEquals(profile.mitm, true);
    assertEquals(profile.mitm_hooks[0]!.host, "api.github.com");
    buildConfigState(profile);
  } finally {
    Deno.env.delete("PROXY_TEST_SECRET");
  }
  await assertRejects(
    () =>
      parseNetworkProxyConfigText(
        `default_permissions = "p"\n[permissions.p.network.mitm.hooks.h]\nhost = "a.test"\naction = ["nope"]\n`,
        "toml",
      ),
    Error,
    "network.mitm.hooks.h.action references undefined action `nope`",
  );
});

// --- policy ---

Deno.test("policy: methods by mode", () => {
  for (const m of ["GET", "POST", "CONNECT"]) assert(methodAllowed("full", m));
  for (const m of ["GET", "HEAD", "OPTIONS"]) assert(methodAllowed("limited", m));
  for (const m of ["POST", "PUT", "CONNECT", "get"]) assert(!methodAllowed("limited", m));
});

Deno.test("policy: host normalisation", () => {
  assertEquals(normalizeHost("  ExAmPlE.CoM  "), "example.com");
  assertEquals(normalizeHost("example.com:443"), "example.com");
  assertEquals(normalizeHost("example.com.:443"), "example.com");
  assertEquals(normalizeHost("example.com."), "example.com");
  assertEquals(normalizeHost("2001:db8::1"), "2001:db8::1");
  assertEquals(normalizeHost("[::1]:443"), "::1");
  assertEquals(normalizeHost("[::1]"), "::1");
  assertEquals(normalizeHost("[fe80::1%25lo0]"), "fe80::1%lo0");
  assertEquals(normalizeHost("fe80::1%lo0"), "fe80::1%lo0");
  assertEquals(normalizeHost("[fe80::1%lo0]:80"), "fe80::1%lo0");
});

Deno.test("policy: domain patterns", () => {
  const m = (patterns: string[], host: string) =>
    compileDomainPatterns(patterns, { allowGlobal: true }).matches(normalizeHost(host));
  assert(m(["Example.COM."], "example.com") && !m(["Example.COM."], "a.example.com"));
  assert(m(["*.Example.COM."], "a.example.com") && !m(["*.example.com"], "example.com"));
  assert(!m(["*.openai.com"], "evilopenai.com"));
  assert(m(["**.example.com"], "example.com") && m(["**.example.com"], "a.b.example.com"));
  const mid = ["region*.v2.argotunnel.com"];
  assert(m(mid, "region1.v2.argotunnel.com") && m(mid, "region.v2.argotunnel.com"));
  assert(!m(mid, "xregion1.v2.argotunnel.com") && !m(mid, "foo.region1.v2.argotunnel.com"));
  assert(m(["[::1]"], "::1"));
  assert(m(["[fe80::1%25lo0]"], "fe80::1%lo0") && !m(["[fe80::1%25lo0]"], "fe80::1%eth0"));
  assert(m(["EXAMPLE.com"], "ExAmple.COM"));
  assert(m(["*"], "localhost"));
  assertEquals(
    compileDomainPatterns(["a.com", "A.com.", "a.com"], { allowGlobal: true }).patterns,
    ["a.com"],
  );
  for (const g of ["*", "[*]", "**.[*]"]) {
    assertThrows(
      () => compileDomainPatterns([g], { allowGlobal: false }),
      Error,
      "unsupported global wildcard",
    );
    buildConfigState(cfg({ domains: { [g]: "allow" } }));
    assertThrows(
      () => buildConfigState(cfg({ domains: { [g]: "deny" } })),
      Error,
      "global wildcard",
    );
  }
  assertThrows(
    () => compileDomainPatterns(["["], { allowGlobal: true }),
    Error,
    "invalid domain pattern",
  );
});

Deno.test("policy: loopback and non-public addresses", () => {
  for (const h of ["localhost", "localhost.", "LOCALHOST", "127.0.0.1", "::1"]) {
    assert(isLoopbackHost(h), h);
  }
  for (const h of ["notlocalhost", "1.2.3.4"]) assert(!isLoopbackHost(h), h);
  const nonPublic = [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "0.1.2.3",
    "100.64.0.1",
    "192.0.0.8",
    "192.0.2.1",
    "198.51.100.1",
    "203.0.113.1",
    "198.18.0.1",
    "240.0.0.1",
    "::1",
    "::",
    "ff02::1",
    "fd00::1",
    "fe80::1",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
  ];
  for (const ip of nonPublic) assert(isNonPublicIp(ip), ip);
  for (const ip of ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "172.32.0.1"]) {
    assert(!isNonPublicIp(ip), ip);
  }
});

// --- host decisions ---

Deno.test("host policy: deny wins; allow list required; wildcards", async () => {
  const c = cfg({
    domains: { "example.com": "allow", "*.example.com": "allow", "api.example.com": "deny" },
  });
  assertEquals(await blocked(c, "api.example.com", PUBLIC), "denied");
  assertEquals(await blocked(c, "example.com", PUBLIC), "allowed");
  assertEquals(await blocked(c, "evil.com", PUBLIC), "not_allowed");
  assertEquals(await blocked(c, "8.8.8.8"), "not_allowed");
  assertEquals(await blocked(c, ""), "not_allowed");
  const global = cfg({ domains: { "*": "allow", "evil.com": "deny" } });
  assertEquals(await blocked(global, "example.com", PUBLIC), "allowed");
  assertEquals(await blocked(global, "evil.com", PUBLIC), "denied");
  assertEquals(
    await blocked(cfg({ domains: { "*.example.com": "allow" } }), "example.com", PUBLIC),
    "not_allowed",
  );
});

Deno.test("host policy: local targets need allow_local_binding or an exact allow entry", async () => {
  assertEquals(await blocked(cfg({ domains: { "*": "allow" } }), "127.0.0.1"), "not_allowed_local");
  assertEquals(await blocked(cfg({ domains: { "*": "allow" } }), "localhost"), "not_allowed_local");
  assertEquals(await blocked(cfg(), "127.0.0.1"), "not_allowed_local");
  assertEquals(await blocked(cfg({ domains: { "localhost": "allow" } }), "localhost"), "allowed");
  assertEquals(await blocked(cfg({ domains: { "10.0.0.5": "allow" } }), "10.0.0.5"), "allowed");
  assertEquals(await blocked(cfg({ domains: { "fe80::1": "allow" } }), "fe80::1%lo0"), "allowed");
  assertEquals(await blocked(cfg(), "fe80::1%lo0"), "not_allowed_local");
  assertEquals(
    await blocked(cfg({ domains: { "[fe80::1%25eth0]": "allow" } }), "fe80::1%eth1"),
    "not_allowed_local",
  );
  assertEquals(
    await blocked(cfg({ domains: { "[fe80::1%25eth0]": "allow" } }), "fe80::1%eth0"),
    "allowed",
  );
  for (const spelling of ["fd00::1", "[fd00::1]", "[fd00::1]:443"]) {
    assertEquals(
      await blocked(cfg({ domains: { "fd00::1": "deny" }, allow_local_binding: true }), spelling),
      "denied",
    );
  }
  assertEquals(
    await blocked(cfg({ domains: { "*": "allow" }, allow_local_binding: true }), "127.0.0.1"),
    "allowed",
  );
});

Deno.test("host policy: names are resolved and fail closed", async () => {
  const c = cfg({ domains: { "**.test": "allow", "*.invalid": "allow" } });
  assertEquals(
    await blocked(c, "private.test", { "private.test": ["10.0.0.8"] }),
    "not_allowed_local",
  );
  assertEquals(
    await blocked(c, "mixed.test", { "mixed.test": ["8.8.8.8", "127.0.0.1"] }),
    "not_allowed_local",
  );
  assertEquals(await blocked(c, "public.test", { "public.test": ["8.8.8.8"] }), "allowed");
  assertEquals(await blocked(c, "host.invalid"), "not_allowed_local");
  const slow = () => new Promise<string[]>(() => {});
  const started = Date.now();
  const v = await hostBlocked(buildConfigState(c), "slow.test", slow);
  assertEquals(v, { allowed: false, reason: "not_allowed_local" });
  assert(Date.now() - started < 3000);
});

// --- state, decider, audit, blocked ring ---

function stateWith(
  config: NetworkProxyConfig,
  options: ConstructorParameters<typeof NetworkProxyState>[1] = {},
) {
  const events: PolicyDecisionEvent[] = [];
  const state = new NetworkProxyState(config, {
    resolver: fakeDns(PUBLIC),
    audit: (e) => events.push(e),
    ...options,
  });
  return { state, events };
}

Deno.test("state: live domain edits move entries between lists; fixed keys refuse to change", () => {
  const { state } = stateWith(cfg({ domains: { "Example.com": "deny" } }));
  state.addAllowedDomain("EXAMPLE.com");
  assertEquals(serializeNetworkProxyConfig(state.config).domains, { "example.com": "allow" });
  state.addDeniedDomain("example.com");
  assertEquals(serializeNetworkProxyConfig(state.config).domains, { "example.com": "deny" });
  state.setMode("limited");
  assertEquals(state.config.mode, "limited");
  for (
    const key of [
      "enabled",
      "proxy_url",
      "socks_url",
      "enable_socks5",
      "enable_socks5_udp",
    ] as const
  ) {
    const changed = {
      ...state.config,
      [key]: typeof state.config[key] === "boolean" ? !state.config[key] : "http://127.0.0.1:1",
    };
    assertThrows(
      () => state.replaceConfig(changed),
      Error,
      `cannot update network.${key} on a running proxy`,
    );
  }
  const { state: wide } = stateWith(cfg({ domains: { "*": "allow" } }));
  wide.addDeniedDomain("8.8.8.8");
});

Deno.test("state: decider overrides only not_allowed; audit events carry every field", async () => {
  let calls = 0;
  const { state, events } = stateWith(
    cfg({ domains: { "example.com": "allow", "evil.com": "deny" } }),
    {
      decider: () => (calls++, { allow: true }),
      auditMetadata: {
        conversationId: "c1",
        appVersion: "1.0",
        authMode: "key",
        originator: "o",
        userAccountId: "u",
        userEmail: "e@x",
        terminalType: "t",
        model: "m",
        slug: "s",
      },
    },
  );
  assertEquals(
    await state.evaluateHostPolicy({ protocol: "http", host: "api.example.com", port: 80 }),
    { allow: true },
  );
  assertEquals(calls, 1);
  const e = events.at(-1)!;
  assertEquals(e["event.name"], POLICY_DECISION_EVENT);
  assertEquals(e["network.policy.override"], true);
  assertEquals(e["network.policy.reason"], "not_allowed");
  assertEquals(e["network.policy.source"], "decider");
  assertEquals(e["http.request.method"], "none");
  assertEquals(e["client.address"], "unknown");
  assertEquals(e["conversation.id"], "c1");
  assertEquals(e["slug"], "s");
  assert(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(e["event.timestamp"] as string));
  const d = await state.evaluateHostPolicy({
    protocol: "http",
    host: "evil.com",
    port: 80,
    method: "GET",
    clientAddr: "127.0.0.1:5",
  });
  assertEquals(d, { allow: false, reason: "denied", source: "baseline_policy", decision: "deny" });
  assertEquals(calls, 1);
  assertEquals(events.at(-1)!["http.request.method"], "GET");
  assertEquals(events.at(-1)!["client.address"], "127.0.0.1:5");
  await state.evaluateHostPolicy({ protocol: "http", host: "127.0.0.1", port: 80 });
  assertEquals(calls, 1, "not_allowed_local is never offered to the decider");
  assert(
    !events.some((x) =>
      JSON.stringify(x).includes("domain_policy_decision") ||
      JSON.stringify(x).includes("block_decision")
    ),
  );
  const baseline = await state.evaluateHostPolicy({
    protocol: "socks5_tcp",
    host: "example.com",
    port: 443,
    executionId: "x1",
  });
  assertEquals(baseline, { allow: true });
  assertEquals(events.at(-1)!["execution.id"], "x1");
  assertEquals(events.at(-1)!["network.policy.reason"], "allow");
});

Deno.test("state: ask decisions keep the decider as source", async () => {
  const { state, events } = stateWith(cfg(), { decider: () => ask("not_allowed") });
  const d = await state.evaluateHostPolicy({
    protocol: "https_connect",
    host: "example.com",
    port: 443,
    method: "CONNECT",
  });
  assertEquals(d, { allow: false, reason: "not_allowed", source: "decider", decision: "ask" });
  assertEquals(events.at(-1)!["network.policy.decision"], "ask");
  assertEquals(events.at(-1)!["network.policy.override"], false);
  assertEquals(deny(""), {
    allow: false,
    reason: "policy_denied",
    source: "decider",
    decision: "deny",
  });
});

Deno.test("state: the blocked ring keeps 200, snapshots do not consume, logs a violation line", async () => {
  const seen: string[] = [];
  const { state } = stateWith(cfg(), { observer: (r) => void seen.push(r.host) });
  for (let i = 0; i < 205; i++) {
    await state.recordBlocked({
      host: `h${i}.test`,
      reason: "not_allowed",
      client: null,
      method: "GET",
      protocol: "http",
      decision: "deny",
      source: "baseline_policy",
      port: 80,
    });
  }
  assertEquals(state.blockedTotal, 205);
  const snap = state.blockedSnapshot();
  assertEquals(snap.length, 200);
  assertEquals(snap[0]!.host, "h5.test");
  assertEquals(state.drainBlocked().length, 200);
  assertEquals(state.drainBlocked().length, 0);
  assertEquals(seen.length, 205);
  const line = violationLogLine({
    host: "a.test",
    reason: "denied",
    client: null,
    method: null,
    mode: "full",
    protocol: "http",
    timestamp: 1,
  });
  assertEquals(
    line,
    'CODEX_NETWORK_POLICY_VIOLATION {"host":"a.test","reason":"denied","client":null,"method":null,"mode":"full","protocol":"http","timestamp":1}',
  );
});

Deno.test("responses: x-proxy-error values, messages and the JSON body", () => {
  assertEquals(blockedMessage("not_allowed"), "Domain not in allowlist.");
  assertEquals(proxyErrorHeader("not_allowed_local"), "blocked-by-allowlist");
  assertEquals(proxyErrorHeader("denied"), "blocked-by-denylist");
  assertEquals(proxyErrorHeader("method_not_allowed"), "blocked-by-method-policy");
  assertEquals(proxyErrorHeader("mitm_hook_denied"), "blocked-by-mitm-hook");
  assertEquals(proxyErrorHeader("mitm_required"), "blocked-by-mitm-required");
  assertEquals(proxyErrorHeader("other"), "blocked-by-policy");
  assertEquals(
    JSON.parse(
      blockedJson({
        host: "a.test",
        reason: "denied",
        decision: "deny",
        source: "baseline_policy",
        protocol: "http",
        port: 80,
      }),
    ),
    {
      status: "blocked",
      host: "a.test",
      reason: "denied",
      decision: "deny",
      source: "baseline_policy",
      protocol: "http",
      port: 80,
      message: "Domain denied by the sandbox policy.",
    },
  );
});

// --- hooks ---

const hook = (over: Record<string, unknown> = {}) => ({
  host: "api.github.com",
  match: { methods: ["POST"], path_prefixes: ["/repos/"] },
  actions: { strip_request_headers: ["authorization"] },
  ...over,
});
const req = (method: string, path: string, query = "", headers: Array<[string, string]> = []) => ({
  method,
  path,
  query,
  headers,
});

Deno.test("hooks: validation", () => {
  assertThrows(
    () => compileMitmHooks([hook()], false),
    Error,
    "network.mitm_hooks requires network.mitm = true",
  );
  compileMitmHooks([hook()], true);
  assertThrows(
    () =>
      compileMitmHooks(
        [hook({ match: { methods: ["GET"], path_prefixes: ["/"], body: {} } })],
        true,
      ),
    Error,
    "match.body is reserved for a future release",
  );
  const inject = (h: Record<string, unknown>) =>
    hook({ actions: { inject_request_headers: [{ name: "authorization", ...h }] } });
  assertThrows(
    () => compileMitmHooks([inject({ secret_file: "rel/secret" })], true),
    Error,
    "secret_file must be an absolute path",
  );
  assertThrows(
    () => compileMitmHooks([inject({ secret_file: "/a", secret_env_var: "B" })], true),
    Error,
    "expected exactly one of secret_env_var or secret_file",
  );
  assertThrows(
    () => compileMitmHooks([inject({ secret_env_var: "NOPE" })], true, () => undefined),
    Error,
    "missing required environment variable NOPE",
  );
  assertThrows(
    () =>
      compileMitmHooks([hook({ match: { methods: ["GET"], path_prefixes: ["pattern:["] } })], true),
    Error,
    "invalid pattern",
  );
  assertThrows(() => compileMitmHooks([hook({ host: "*.github.com" })], true), Error, "exact host");
});

Deno.test("hooks: secrets from env and file; header actions", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/tok`, "  filetoken\n");
    const hooks = compileMitmHooks(
      [
        hook({
          actions: {
            inject_request_headers: [{
              name: "Authorization",
              secret_env_var: "T",
              prefix: "Bearer ",
            }],
          },
        }),
        hook({
          host: "b.test",
          actions: { inject_request_headers: [{ name: "x-key", secret_file: `${dir}/tok` }] },
        }),
      ],
      true,
      (n) => (n === "T" ? "envtoken" : undefined),
    );
    const a = hooks.evaluate("api.github.com", req("POST", "/repos/x"));
    assert(a.kind === "matched");
    assertEquals(
      applyHookActions([["Authorization", "Bearer dummy"], ["Accept", "*/*"]], a.actions),
      [["Accept", "*/*"], ["authorization", "Bearer envtoken"]],
    );
    const b = hooks.evaluate("b.test", req("POST", "/repos/"));
    assert(b.kind === "matched");
    assertEquals(b.actions.inject, [["x-key", "filetoken"]]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("hooks: matching rules", () => {
  const hooks = compileMitmHooks([
    hook({
      match: {
        methods: ["post"],
        path_prefixes: ["/repos/"],
        query: { scope: ["a:*", "pattern:b:*"] },
        headers: { "X-Mode": ["on"] },
      },
    }),
    hook({ match: { methods: ["GET"], path_prefixes: ["pattern:/users/*/keys", "/literal*"] } }),
    hook({
      match: { methods: ["PUT"], path_prefixes: ["/"], headers: { "x-v": ["literal:pattern:*"] } },
    }),
  ], true);
  const h = [["x-mode", "on"]] as Array<[string, string]>;
  assertEquals(
    hooks.evaluate("api.github.com", req("POST", "/repos/1", "scope=b%3Ax", h)).kind,
    "matched",
  );
  assertEquals(
    hooks.evaluate("api.github.com", req("POST", "/repos/1", "scope=a:*", h)).kind,
    "matched",
  );
  assertEquals(
    hooks.evaluate("api.github.com", req("POST", "/repos/1", "scope=a:x", h)).kind,
    "no_match",
  );
  assertEquals(
    hooks.evaluate("api.github.com", req("POST", "/repos/1", "scope=b:x")).kind,
    "no_match",
  );
  assertEquals(hooks.evaluate("api.github.com", req("GET", "/users/me/keys")).kind, "matched");
  assertEquals(hooks.evaluate("api.github.com", req("GET", "/users/me/x/keys")).kind, "no_match");
  assertEquals(hooks.evaluate("api.github.com", req("GET", "/literal*x")).kind, "matched");
  assertEquals(hooks.evaluate("api.github.com", req("GET", "/literalx")).kind, "no_match");
  assertEquals(
    hooks.evaluate("api.github.com", req("PUT", "/", "", [["x-v", "pattern:*"]])).kind,
    "matched",
  );
  assertEquals(
    hooks.evaluate("api.github.com", req("PUT", "/", "", [["x-v", "anything"]])).kind,
    "no_match",
  );
  assertEquals(hooks.evaluate("other.test", req("GET", "/")).kind, "no_hooks");
});
