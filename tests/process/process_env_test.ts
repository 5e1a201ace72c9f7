import { assert, assertEquals } from "../helpers/assert.ts";
import {
  collectProcess,
  spawnStdioServer,
  startProcess,
  text,
  type WireClient,
} from "../helpers/wire_client.ts";
import { computeChildEnv } from "../../src/process/env_policy.ts";

const SERVER_ENV = {
  MY_API_KEY: "k-secret",
  GITHUB_TOKEN: "t-secret",
  DB_SECRET: "s-secret",
  FOO: "bar",
  FOO2: "bar2",
  LANG: "C.UTF-8",
  NODE_REPL_AUTH_TOKEN: "never",
  OPENAI_IDENTITY_TOKEN_FILE: "never",
};

async function childEnv(
  c: WireClient,
  id: string,
  extra: Record<string, unknown>,
): Promise<Record<string, string>> {
  const r = await startProcess(c, id, ["/usr/bin/env"], extra);
  if (r.error) throw new Error(JSON.stringify(r.error));
  const out = text((await collectProcess(c, id)).stdout);
  return Object.fromEntries(
    out.split("\n").filter(Boolean).map((
      l,
    ) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

const policy = (over: Record<string, unknown> = {}) => ({
  inherit: "all",
  ignoreDefaultExcludes: false,
  exclude: [],
  set: {},
  includeOnly: [],
  ...over,
});

Deno.test("env: exactly the requested variables without a policy; secrets never leak by default", async () => {
  await using s = spawnStdioServer(["--listen", "stdio", "--log-level", "error"], SERVER_ENV);
  const c = s.client;
  await c.initialize();
  assertEquals(await childEnv(c, "e", { env: { A: "1", NODE_REPL_AUTH_TOKEN: "x" } }), { A: "1" });
  assertEquals(await childEnv(c, "empty", { env: {} }), {});

  const all = await childEnv(c, "all", { env: {}, envPolicy: policy() });
  assertEquals(all.FOO, "bar");
  for (
    const secret of [
      "MY_API_KEY",
      "GITHUB_TOKEN",
      "DB_SECRET",
      "NODE_REPL_AUTH_TOKEN",
      "OPENAI_IDENTITY_TOKEN_FILE",
    ]
  ) {
    assert(!(secret in all), `${secret} leaked`);
  }
  const ignored = await childEnv(c, "ign", {
    env: {},
    envPolicy: policy({ ignoreDefaultExcludes: true }),
  });
  assertEquals([ignored.MY_API_KEY, ignored.GITHUB_TOKEN], ["k-secret", "t-secret"]);
  assert(!("NODE_REPL_AUTH_TOKEN" in ignored), "always-removed variables stay removed");

  // includeOnly cannot re-admit a default-excluded name; env wins over set.
  const only = await childEnv(c, "only", {
    env: { FOO: "from-env" },
    envPolicy: policy({ set: { FOO: "from-set" }, includeOnly: ["FOO", "MY_*"] }),
  });
  assertEquals(only, { FOO: "from-env" });

  // exclude is a case-insensitive whole-name glob.
  const excl = await childEnv(c, "excl", { env: {}, envPolicy: policy({ exclude: ["foo"] }) });
  assert(!("FOO" in excl) && excl.FOO2 === "bar2");

  const core = await childEnv(c, "core", {
    env: { X_TOKEN: "explicit" },
    envPolicy: policy({ inherit: "core" }),
  });
  assertEquals(core.LANG, "C.UTF-8");
  assert(!("FOO" in core));
  assertEquals(core.X_TOKEN, "explicit", "env can re-add an excluded name");
  assert("PATH" in core);

  const none = await childEnv(c, "none", {
    env: { B: "2" },
    envPolicy: policy({ inherit: "none", set: { A: "1" } }),
  });
  assertEquals(none, { A: "1", B: "2" });

  const bad = await startProcess(c, "bad", ["true"], { envPolicy: { inherit: "all" } });
  assertEquals(bad.error, {
    code: -32602,
    message: "missing field `ignoreDefaultExcludes`",
  });
  const badInherit = await startProcess(c, "bad2", ["true"], {
    envPolicy: policy({ inherit: "some" }),
  });
  assertEquals(badInherit.error, {
    code: -32602,
    message: "unknown variant `some`, expected one of `core`, `all`, `none`",
  });
});

Deno.test("computeChildEnv applies the steps in the reference's order", () => {
  const server = { PATH: "/bin", HOME: "/h", API_KEY: "k", token_x: "t", keep: "1" };
  assertEquals(computeChildEnv({ Z: "z" }, null, server), { Z: "z" });
  assertEquals(
    computeChildEnv({}, {
      inherit: "all",
      ignoreDefaultExcludes: false,
      exclude: ["KEEP"],
      set: { S: "s" },
      includeOnly: [],
    }, server),
    { PATH: "/bin", HOME: "/h", S: "s" },
  );
  assertEquals(
    computeChildEnv({ CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE: "true" }, null, server),
    {},
    "the server's own control variable is never passed",
  );
  assertEquals(
    computeChildEnv({}, {
      inherit: "core",
      ignoreDefaultExcludes: true,
      exclude: [],
      set: {},
      includeOnly: ["p?th"],
    }, server),
    { PATH: "/bin" },
  );
});
