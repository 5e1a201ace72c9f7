// Custom credential providers (networkProxy.proxy.credentialProviders,
// Codex 0.171): which providers mask their variables and which are ignored,
// the stand-ins' shape, and the decoding errors — side by side with the
// reference. What goes on the wire is in credential_masking_test.ts.

import { assert, assertEquals, assertMatch } from "../helpers/assert.ts";
import { INHERIT_ALL, type Msg, readProcessOutput } from "../helpers/wire_client.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { launchedProxy } from "../helpers/proxy.ts";
import { oursServer, referenceServer } from "../helpers/sandbox.ts";

const REAL = {
  MY_TOKEN: "myt_abcdefghijklmnopqrst",
  GH_TOKEN: "ghp_realGH000000000000000000000000000000000",
  PREFIX_FROM_ENV: "https://api.example.com/v2/",
};
const PREFIX = ["https://api.example.com/v1/"];
const VALID = { env: ["MY_TOKEN"], patterns: ["myt_[a-z]{20}"], url_prefixes: PREFIX };

/** Provider sets, and whether MY_TOKEN ends up masked. */
const CASES: Array<[string, Msg, boolean]> = [
  ["valid", { my: VALID }, true],
  ["several patterns, the matching one", {
    my: { ...VALID, patterns: ["zz_\\d+", "myt_[a-z]{20}"] },
  }, true],
  ["unbounded repetition", { my: { ...VALID, patterns: ["myt_[a-z]+"] } }, true],
  ["prefix from the environment", {
    my: { ...VALID, url_prefixes: undefined, url_prefix_from_env: "PREFIX_FROM_ENV" },
  }, true],
  ["prefix from an unset variable", {
    my: { ...VALID, url_prefixes: undefined, url_prefix_from_env: "UNSET_PREFIX" },
  }, false],
  ["no prefix", { my: { ...VALID, url_prefixes: undefined } }, false],
  ["a plain-HTTP prefix", { my: { ...VALID, url_prefixes: ["http://api.example.com/"] } }, false],
  ["no scheme: https", { my: { ...VALID, url_prefixes: ["api.example.com/v1/"] } }, true],
  ["not a URL", { my: { ...VALID, url_prefixes: ["https://"] } }, false],
  ["no pattern", { my: { ...VALID, patterns: [] } }, false],
  ["a pattern that does not compile", { my: { ...VALID, patterns: ["(["] } }, false],
  ["a pattern matching the empty value", { my: { ...VALID, patterns: ["x*"] } }, false],
  ["a value the pattern does not match", { my: { ...VALID, patterns: ["zzz_[a-z]{20}"] } }, false],
  [
    "a variable the broker masks itself",
    { my: { ...VALID, env: ["MY_TOKEN", "GH_TOKEN"] } },
    false,
  ],
  ["header auth without a header", { my: { ...VALID, auth: ["header"] } }, false],
  ["header auth with one", { my: { ...VALID, auth: ["header"], header: "X-Key" } }, true],
];

const proxy = (credentialProviders: unknown) =>
  launchedProxy({ credentialMasking: true, credentialProviders });

async function observe(kind: "ours" | "reference") {
  // A home of its own for ours too: masking mints its CA there.
  const env = { ...REAL, CODEX_HOME: referenceHome() };
  await using s = (kind === "ours" ? oursServer([], env) : referenceServer([], env)!).server;
  const c = s.client;
  await c.initialize();
  const info = await c.call("environment/info", {});
  const masked: Array<[string, string]> = [];
  let n = 0;
  for (const [name, providers] of CASES) {
    const processId = `p${++n}`;
    const started = await c.call("process/start", {
      processId,
      argv: ["bash", "-c", 'echo "$MY_TOKEN"'],
      cwd: "file:///tmp",
      env: {},
      envPolicy: INHERIT_ALL,
      tty: false,
      networkProxy: { proxy: proxy(providers) },
    });
    assert(!started.error, `${name}: ${JSON.stringify(started.error)}`);
    masked.push([name, (await readProcessOutput(c, processId)).trim()]);
  }
  const errors = [];
  for (
    const providers of [
      { my: { ...VALID, bogus: 1 } },
      { my: { ...VALID, env: "MY_TOKEN" } },
      { my: { ...VALID, auth: ["nope"] } },
      { my: { ...VALID, header: 5 } },
      { my: 5 },
      [],
    ]
  ) {
    const answer = await c.call("process/start", {
      processId: `e${++n}`,
      argv: ["bash", "-c", "true"],
      cwd: "file:///tmp",
      env: {},
      tty: false,
      networkProxy: { proxy: proxy(providers) },
    });
    errors.push(answer.error);
  }
  return { capability: info.result.capabilities.credentialMaskingCustomProviders, masked, errors };
}

Deno.test("credential providers: which mask and which are ignored, the stand-ins, the decoding errors — as the reference", async () => {
  const ours = await observe("ours");
  const reference = referenceBin() ? await observe("reference") : null;
  assertEquals(ours.capability, true);
  for (const [i, [name, value]] of ours.masked.entries()) {
    const expected = CASES[i]![2];
    if (!expected) {
      assertEquals(value, REAL.MY_TOKEN, `${name}: left as it is`);
      continue;
    }
    assert(value !== REAL.MY_TOKEN, `${name}: masked`);
    assertMatch(value, name === "unbounded repetition" ? /^myt_[a-z]+$/ : /^myt_[a-z]{20}$/, name);
  }
  assertEquals(ours.errors, [
    {
      code: -32602,
      message:
        "unknown field `bogus`, expected one of `env`, `patterns`, `url_prefixes`, `url_prefix_from_env`, `auth`, `header`, `prefix`",
    },
    { code: -32602, message: 'invalid type: string "MY_TOKEN", expected a sequence' },
    {
      code: -32602,
      message: "unknown variant `nope`, expected one of `bearer`, `token`, `basic`, `header`",
    },
    { code: -32602, message: "invalid type: integer `5`, expected a string" },
    {
      code: -32602,
      message: "invalid type: integer `5`, expected struct CredentialProviderConfig",
    },
    { code: -32602, message: "invalid type: sequence, expected a map" },
  ]);
  if (reference) {
    // Stand-ins are random: compare which values were masked.
    const shape = (r: typeof ours) => ({
      ...r,
      masked: r.masked.map(([name, value]) => [name, value === REAL.MY_TOKEN ? "real" : "masked"]),
    });
    assertEquals(shape(ours), shape(reference));
  }
});
