// Managed constraints (network-proxy.md §2.3 and the runtime/state group of
// §6): validation, live edits, requirements applied to a configuration, the
// managed-allowlist-only mode, file reloads and the command line.

import {
  allowedDomains,
  defaultNetworkProxyConfig,
  deniedDomains,
  type NetworkProxyConfig,
} from "../../src/proxy/config.ts";
import {
  applyNetworkRequirements,
  NetworkConstraintError,
  type NetworkProxyConstraints,
  parseNetworkRequirements,
  patternCovers,
  validatePolicyAgainstConstraints,
} from "../../src/proxy/constraints.ts";
import { requiredConfigSource } from "../../src/proxy/config_file.ts";
import { type ConfigSource, NetworkProxyState } from "../../src/proxy/state.ts";
import { curl, httpOrigin } from "../helpers/proxy.ts";
import { jsonLines } from "../helpers/wire_client.ts";
import { assert, assertEquals, assertStringIncludes, assertThrows } from "../helpers/assert.ts";
import { createLogger } from "../../src/log/logger.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

const cfg = (over: Partial<NetworkProxyConfig> = {}): NetworkProxyConfig => ({
  ...defaultNetworkProxyConfig(),
  enabled: true,
  ...over,
});
const allow = (...hosts: string[]) => Object.fromEntries(hosts.map((h) => [h, "allow" as const]));
const resolver = (host: string) =>
  host.endsWith(".test") ? Promise.resolve(["93.184.216.34"]) : Promise.reject(new Error("nx"));

function violates(config: NetworkProxyConfig, constraints: NetworkProxyConstraints): string {
  try {
    validatePolicyAgainstConstraints(config, constraints);
    return "";
  } catch (error) {
    assert(error instanceof NetworkConstraintError, String(error));
    return error.message;
  }
}

Deno.test("constraints: the boolean maxima and the mode rank", () => {
  assertEquals(
    violates(cfg(), { enabled: false }),
    "invalid value for network.enabled: true (allowed false (disabled by managed config))",
  );
  assertEquals(violates(cfg({ enabled: false }), { enabled: false }), "");
  assertEquals(
    violates(cfg({ allow_local_binding: true }), { allow_local_binding: false }),
    "invalid value for network.allow_local_binding: true (allowed false (disabled by managed config))",
  );
  assertEquals(violates(cfg({ allow_local_binding: true }), { allow_local_binding: true }), "");
  assert(violates(cfg({ allow_upstream_proxy: true }), { allow_upstream_proxy: false }));
  assert(
    violates(cfg({ dangerously_allow_non_loopback_proxy: true }), {
      dangerously_allow_non_loopback_proxy: false,
    }),
  );
  assertEquals(
    violates(cfg({ mode: "full" }), { mode: "limited" }),
    "invalid value for network.mode: full (allowed limited or more restrictive)",
  );
  assertEquals(violates(cfg({ mode: "limited" }), { mode: "limited" }), "");
  assertEquals(violates(cfg({ mode: "limited" }), { mode: "full" }), "");
});

Deno.test("constraints: allow-all unix sockets needs the managed opt-in", () => {
  const all = cfg({ dangerously_allow_all_unix_sockets: true });
  // Without a managed opt-in (explicitly false).
  assert(violates(all, { dangerously_allow_all_unix_sockets: false }));
  // When the unix-socket allowlist is managed and the flag is not.
  assert(violates(all, { allow_unix_sockets: ["/tmp/managed.sock"] }));
  // With the opt-in, even with a managed list.
  assertEquals(
    violates(all, {
      dangerously_allow_all_unix_sockets: true,
      allow_unix_sockets: ["/tmp/managed.sock"],
    }),
    "",
  );
  // Unmanaged.
  assertEquals(violates(all, {}), "");
  // Managed socket list: user allow entries must be a subset (case-insensitive).
  const sockets = { allow_unix_sockets: ["/tmp/Managed.sock"] };
  assertEquals(violates(cfg({ unix_sockets: { "/tmp/managed.SOCK": "allow" } }), sockets), "");
  assert(violates(cfg({ unix_sockets: { "/tmp/other.sock": "allow" } }), sockets));
  assertEquals(violates(cfg({ unix_sockets: { "/tmp/other.sock": "deny" } }), sockets), "");
});

Deno.test("constraints: a managed allowlist covers, fixes or seeds the user's", () => {
  const managed = { allowed_domains: ["example.com"] };
  // Unspecified expansion: every user entry must be covered.
  assertEquals(violates(cfg({ domains: allow("example.com") }), managed), "");
  assertEquals(
    violates(cfg({ domains: allow("example.com", "evil.com") }), managed),
    'invalid value for network.allowed_domains: ["evil.com"] (allowed subset of managed allowed_domains)',
  );
  // Expansion enabled: anything may be added, the managed entries stay.
  const expand = { ...managed, allowlist_expansion_enabled: true };
  assertEquals(violates(cfg({ domains: allow("example.com", "new.com") }), expand), "");
  assert(violates(cfg({ domains: allow("new.com") }), expand).includes('missing ["example.com"]'));
  assertEquals(
    violates(cfg({ domains: { "new.com": "allow", "example.com": "deny" } }), expand),
    "",
    "a managed entry the user denies may be absent",
  );
  // Expansion disabled: exactly the managed list (minus denied).
  const fixed = { ...managed, allowlist_expansion_enabled: false };
  assertEquals(violates(cfg({ domains: allow("Example.COM.") }), fixed), "");
  assert(violates(cfg({ domains: allow("example.com", "new.com") }), fixed));
  assert(violates(cfg({ domains: null }), fixed));
  // Wildcards: narrowing is fine, widening is not.
  const sub = { allowed_domains: ["*.example.com"] };
  assertEquals(violates(cfg({ domains: allow("api.example.com") }), sub), "");
  assertEquals(violates(cfg({ domains: allow("*.api.example.com") }), sub), "");
  assert(violates(cfg({ domains: allow("**.example.com") }), sub));
  assert(violates(cfg({ domains: allow("example.com") }), sub), "the apex is not a subdomain");
  const apex = { allowed_domains: ["**.example.com"] };
  for (const p of ["example.com", "a.example.com", "*.example.com", "**.b.example.com"]) {
    assertEquals(violates(cfg({ domains: allow(p) }), apex), "", p);
  }
  assert(violates(cfg({ domains: allow("evilexample.com") }), apex));
  // A managed global wildcard is refused in every spelling.
  for (const g of ["*", "[*]", "**.[*]"]) {
    assert(
      violates(cfg({ domains: allow("example.com") }), { allowed_domains: [g] }).includes(
        "exact hosts or scoped wildcards",
      ),
      g,
    );
  }
  assert(patternCovers("*.example.com", "deep.api.example.com"));
  assert(!patternCovers("example.com", "api.example.com"));
});

Deno.test("constraints: a managed denylist must stay, exactly when fixed", () => {
  const managed = { denied_domains: ["evil.com"] };
  assertEquals(
    violates(cfg({ domains: null }), managed),
    'invalid value for network.denied_domains: [] (allowed every managed entry (missing ["evil.com"]))',
  );
  assertEquals(violates(cfg({ domains: { "EVIL.com": "deny", "bad.com": "deny" } }), managed), "");
  const fixed = { ...managed, denylist_expansion_enabled: false };
  assert(violates(cfg({ domains: { "evil.com": "deny", "bad.com": "deny" } }), fixed));
  assertEquals(violates(cfg({ domains: { "evil.com": "deny" } }), fixed), "");
});

Deno.test("constraints: live edits stay within them, with the reference's context", () => {
  const grow = new NetworkProxyState(cfg({ domains: allow("managed.example.com") }), {
    constraints: { allowed_domains: ["managed.example.com"], allowlist_expansion_enabled: true },
  });
  grow.addAllowedDomain("user.example.com");
  assertEquals(allowedDomains(grow.config), ["managed.example.com", "user.example.com"]);

  const fixed = new NetworkProxyState(cfg({ domains: allow("managed.example.com") }), {
    constraints: { allowed_domains: ["managed.example.com"], allowlist_expansion_enabled: false },
  });
  assertThrows(
    () => fixed.addAllowedDomain("user.example.com"),
    NetworkConstraintError,
    "network.allowed_domains constrained by managed config: invalid value for network.allowed_domains",
  );
  assertEquals(allowedDomains(fixed.config), ["managed.example.com"], "unchanged");

  const denyFixed = new NetworkProxyState(cfg({ domains: { "managed.example.com": "deny" } }), {
    constraints: { denied_domains: ["managed.example.com"], denylist_expansion_enabled: false },
  });
  assertThrows(
    () => denyFixed.addDeniedDomain("user.example.com"),
    NetworkConstraintError,
    "network.denied_domains constrained by managed config",
  );
  assertThrows(
    () => denyFixed.addAllowedDomain("managed.example.com"),
    NetworkConstraintError,
    // Moving a managed deny to the allow list would remove it from the deny list.
    "network.allowed_domains constrained by managed config",
  );

  const limited = new NetworkProxyState(cfg({ mode: "limited" }), {
    constraints: { mode: "limited" },
  });
  assertThrows(
    () => limited.setMode("full"),
    NetworkConstraintError,
    "network.mode constrained by managed config",
  );
  assertEquals(limited.config.mode, "limited");
  // The initial configuration is held to them too.
  assertThrows(
    () => new NetworkProxyState(cfg(), { constraints: { enabled: false } }),
    NetworkConstraintError,
  );
});

Deno.test("requirements: override the configuration, merge domains, imply constraints", () => {
  const user = cfg({
    allow_local_binding: true,
    domains: { "api.example.com": "allow", "blocked.example.com": "deny" },
  });
  const managed = applyNetworkRequirements(user, {
    http_port: 4128,
    socks_port: 4180,
    allow_local_binding: false,
    domains: { "*.example.com": "allow", "blocked.example.com": "allow", "evil.com": "deny" },
  });
  assertEquals(managed.config.proxy_url, "http://127.0.0.1:4128");
  assertEquals(managed.config.socks_url, "http://127.0.0.1:4180");
  assertEquals(managed.config.allow_local_binding, false);
  assertEquals(allowedDomains(managed.config), ["api.example.com", "*.example.com"]);
  assertEquals(
    deniedDomains(managed.config),
    ["blocked.example.com", "evil.com"],
    "a managed allow never erases the user's deny of the same pattern",
  );
  assertEquals(managed.constraints.allowed_domains, ["*.example.com", "blocked.example.com"]);
  assertEquals(managed.constraints.denied_domains, ["evil.com"]);
  assertEquals(managed.constraints.allowlist_expansion_enabled, undefined);
  assertEquals(managed.managedAllowedDomainsOnly, false);
  // A user entry outside the managed allowlist is refused at once.
  assertThrows(
    () =>
      applyNetworkRequirements(cfg({ domains: allow("other.org") }), {
        domains: { "*.example.com": "allow" },
      }),
    NetworkConstraintError,
    'network.allowed_domains: ["other.org"]',
  );
  // …unless the profile may expand it.
  const expanding = applyNetworkRequirements(
    cfg({ domains: allow("other.org") }),
    { domains: { "*.example.com": "allow" } },
    { allowlistExpansion: true },
  );
  assertEquals(expanding.constraints.allowlist_expansion_enabled, true);
  // Managed-only: the user's allow entries are dropped, the list is fixed.
  const only = applyNetworkRequirements(cfg({ domains: allow("other.org") }), {
    domains: { "api.example.com": "allow" },
    managed_allowed_domains_only: true,
  });
  assertEquals(allowedDomains(only.config), ["api.example.com"]);
  assertEquals(only.constraints.allowlist_expansion_enabled, false);
  assert(only.managedAllowedDomainsOnly);
  // …also when the requirements list no domains at all: nothing is allowed.
  const none = applyNetworkRequirements(cfg({ domains: allow("other.org") }), {
    managed_allowed_domains_only: true,
  });
  assertEquals(allowedDomains(none.config), null);
  assertEquals(none.constraints.allowed_domains, []);
  // Parsing is strict.
  assertThrows(() => parseNetworkRequirements({ http_port: 0 }), Error, "port number");
  assertThrows(() => parseNetworkRequirements({ domains: { a: "none" } }), Error, '"allow" or');
  assertThrows(() => parseNetworkRequirements({ admin_url: "x" }), Error, "unknown network");
  assertEquals(parseNetworkRequirements({ enabled: true, mode: "limited" }).mode, "limited");
});

Deno.test("requirements: managed-only allowlists deny misses without asking the decider", async () => {
  let asked = 0;
  const only = applyNetworkRequirements(cfg(), {
    domains: { "api.example.test": "allow" },
    managed_allowed_domains_only: true,
  });
  const state = new NetworkProxyState(only.config, {
    constraints: only.constraints,
    managedAllowedDomainsOnly: true,
    decider: () => (asked++, { allow: true }),
    resolver,
    audit: () => {},
  });
  assertEquals(
    await state.evaluateHostPolicy({ protocol: "http", host: "api.example.test", port: 80 }),
    { allow: true },
  );
  const miss = await state.evaluateHostPolicy({
    protocol: "http",
    host: "b.example.test",
    port: 80,
  });
  assertEquals(miss, {
    allow: false,
    reason: "not_allowed",
    source: "baseline_policy",
    decision: "deny",
  });
  assertEquals(asked, 0);
  // Without the mode, the same miss goes to the decider.
  const open = new NetworkProxyState(cfg({ domains: allow("api.example.test") }), {
    decider: () => (asked++, { allow: true }),
    resolver,
    audit: () => {},
  });
  await open.evaluateHostPolicy({ protocol: "http", host: "b.example.test", port: 80 });
  assertEquals(asked, 1);
});

Deno.test("requirements: reloads are re-managed, and a reload beyond them is refused", () => {
  const requirements = parseNetworkRequirements({
    domains: { "evil.test": "deny", "*.ok.test": "allow" },
    mode: "limited",
  });
  let next: NetworkProxyConfig | null = null;
  const file: ConfigSource = {
    label: "test",
    maybeReload: () => {
      const c = next;
      next = null;
      return c;
    },
  };
  const managed = applyNetworkRequirements(cfg({ domains: allow("a.ok.test") }), requirements);
  const logs: string[] = [];
  const state = new NetworkProxyState(managed.config, {
    constraints: managed.constraints,
    source: requiredConfigSource(file, requirements),
    logger: createLogger({ level: "error", write: (line) => logs.push(line) }),
  });
  assertEquals(state.config.mode, "limited");
  // The user's file drops the managed deny and asks for full mode: the deny
  // is merged back in and the mode forced down to the managed one.
  next = cfg({ domains: allow("a.ok.test", "b.ok.test"), mode: "full" });
  assertEquals(deniedDomains(state.config), ["evil.test"]);
  assertEquals(allowedDomains(state.config), ["a.ok.test", "b.ok.test", "*.ok.test"]);
  assertEquals(state.config.mode, "limited");
  // A file allowing a host outside the managed list is refused; the last
  // good configuration stays.
  next = cfg({ domains: allow("other.test") });
  assertEquals(allowedDomains(state.config), ["a.ok.test", "b.ok.test", "*.ok.test"]);
  assertEquals(logs.length, 1);
  assert(logs[0]!.includes("proxy.config_reload_failed") && logs[0]!.includes("other.test"));
});

Deno.test("proxy command: --requirements overrides the file and enforces its deny list", async () => {
  const origin = httpOrigin();
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(
    `${dir}/proxy.toml`,
    `enabled = true\nallow_local_binding = true\n[domains]\n"127.0.0.1" = "allow"\n"localhost" = "allow"\n`,
  );
  await Deno.writeTextFile(
    `${dir}/requirements.toml`,
    `[network]\nallow_local_binding = true\nmode = "limited"\n[network.domains]\n"localhost" = "deny"\n`,
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "proxy",
      "--config",
      `${dir}/proxy.toml`,
      "--requirements",
      `${dir}/requirements.toml`,
      "--ephemeral",
      "--home",
      dir,
      "--log-level",
      "error",
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const lines = jsonLines(child.stdout);
  try {
    const listening = await lines.next();
    const p = `http://${listening.http}`;
    assertEquals((await curl(["-x", p, `${origin.url}/ok`])).status, 200);
    const denied = await curl(["-x", p, `http://localhost:${origin.port}/no`]);
    assertEquals(denied.status, 403, "the managed deny list applies");
    const post = await curl(["-x", p, "-X", "POST", `${origin.url}/post`]);
    assertEquals(post.status, 403, "the managed limited mode applies");
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await lines.cancel();
    await origin.server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
  // A configuration beyond the requirements does not start.
  const d = await Deno.makeTempDir();
  await Deno.writeTextFile(
    `${d}/p.json`,
    JSON.stringify({ enabled: true, domains: allow("x.org") }),
  );
  await Deno.writeTextFile(
    `${d}/r.json`,
    JSON.stringify({ domains: { "*.example.com": "allow" } }),
  );
  const bad = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "proxy", "--config", `${d}/p.json`, "--requirements", `${d}/r.json`],
    stdout: "null",
    stderr: "piped",
  }).output();
  await Deno.remove(d, { recursive: true });
  assert(!bad.success);
  assertStringIncludes(
    new TextDecoder().decode(bad.stderr),
    'invalid value for network.allowed_domains: ["x.org"] (allowed subset of managed allowed_domains)',
  );
});

Deno.test("proxy log: every event is a stable dotted name; free text goes into message", async () => {
  const logs: string[] = [];
  const state = new NetworkProxyState(cfg({ domains: allow("a.test") }), {
    logger: createLogger({ level: "debug", write: (line) => logs.push(line) }),
  });
  state.addAllowedDomain("b.test");
  state.addDeniedDomain("c.test");
  await state.recordBlocked({
    host: "c.test",
    reason: "denied",
    protocol: "http",
    port: 80,
    client: "127.0.0.1",
    method: "GET",
  });
  const records = logs.map((l) => JSON.parse(l) as Record<string, unknown>);
  assert(records.length >= 3, logs.join("\n"));
  for (const r of records) {
    assert(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/.test(String(r.event)), `free-text event: ${r.event}`);
  }
  const added = records.find((r) => r.event === "proxy.config_entry_added");
  assertEquals([added?.list, added?.entry], ["allowlist", "b.test"]);
  assertStringIncludes(String(added?.message), "config entry added to allowlist: b.test");
  const blocked = records.find((r) => r.event === "proxy.request_blocked");
  assertEquals(blocked?.host, "c.test");
});
