// Credential masking (capability `credentialMasking`): a `bash -c` child of
// a process started with `networkProxy.proxy.credentialMasking` sees
// stand-ins for its GitHub and OpenAI credentials; its proxy puts the real
// values back for the hosts they belong to. Side by side with the reference:
// each server runs in a mount namespace of its own whose /etc/hosts sends
// api.github.com, api.openai.com and a GitHub Enterprise host to local TLS
// origins (trusted through SSL_CERT_FILE), so real `curl`s go through the
// real proxies and what the origins receive is compared.

import { assert, assertEquals, assertMatch } from "../helpers/assert.ts";
import { CLI, INHERIT_ALL, readProcessOutput, spawnCommandServer } from "../helpers/wire_client.ts";
import { referenceBin, scratchRoot } from "../helpers/reference.ts";
import {
  enterpriseServer,
  maskableCommand,
  maskCredentials,
  standIn,
} from "../../src/proxy/credential_broker.ts";
import { sniffTls } from "../../src/proxy/tls_sniff.ts";

const REF = referenceBin();
const HAS_OPENSSL = await new Deno.Command("openssl", { args: ["version"] }).output()
  .then((o) => o.success, () => false);
const CAN_UNSHARE = HAS_OPENSSL && Deno.uid() === 0 &&
  (await new Deno.Command("unshare", { args: ["--mount", "true"] }).output()
    .then((o) => o.success, () => false));
if (!CAN_UNSHARE) {
  console.warn("note: no mount namespaces here: the end-to-end masking cases are skipped");
}
if (!REF) console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");

const REAL = {
  GH_TOKEN: "ghp_realGH000000000000000000000000000000000",
  GITHUB_TOKEN: "plainvalue",
  OPENAI_API_KEY: "sk-proj-realOPENAI00000000000000000000000000000000",
  GH_ENTERPRISE_TOKEN: "github_pat_realENT0000000000000000000000000000000000000000",
  GH_HOST: "ghes.example.com",
  COPILOT_GITHUB_TOKEN: "",
  OPENAI_KEY: "sk-not-a-brokered-name",
  // Custom providers' (Codex 0.171): a bearer for one URL prefix, and a header of its own.
  MY_TOKEN: "myt_realvaluerealvalue",
  HDR_TOKEN: "hdr_REALVALUEREALVALUE",
};

/** `proxy.credentialProviders` for the OpenAI origin's `/v1/` (at `port`). */
function providers(port: number) {
  const prefix = `https://api.openai.com:${port}/v1/`;
  return {
    mine: { env: ["MY_TOKEN"], patterns: ["myt_[a-z]{18}"], url_prefixes: [prefix] },
    keyed: {
      env: ["HDR_TOKEN"],
      patterns: ["hdr_[A-Z]{18}"],
      url_prefixes: [prefix],
      auth: ["header"],
      header: "X-Api-Key",
      prefix: "Key ",
    },
  };
}

/** Stand-ins are random: keep their prefix and length (a custom one: its kind). */
function normalize(text: string): string {
  return text.replace(
    /(github_pat_|gh[a-z]_|sk-proj-|sk-)masked[A-Za-z0-9]+/g,
    (s, prefix: string) => `${prefix}masked<${s.length}>`,
  ).replace(
    /\b(myt_[a-z]{18}|hdr_[A-Z]{18})\b/g,
    (s) => s === REAL.MY_TOKEN || s === REAL.HDR_TOKEN ? s : `${s.slice(0, 4)}<stand-in>`,
  );
}

async function openssl(args: string[]): Promise<void> {
  const o = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped" }).output();
  assert(o.success, new TextDecoder().decode(o.stderr));
}

/**
 * A TLS origin for `names` recording what it receives, with an RSA CA made
 * by openssl in `dir`. (With one of the ECDSA CAs this package mints among
 * its startup roots, the reference's interceptor fails its clients'
 * handshakes with "decrypt error"; RSA roots work for both servers.)
 */
async function origin(dir: string, tag: string, names: string[]) {
  const [ca, key, leaf] = [`${dir}/${tag}-ca`, `${dir}/${tag}.key`, `${dir}/${tag}.pem`];
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    `${ca}.key`,
    "-out",
    `${ca}.pem`,
    "-days",
    "2",
    "-subj",
    `/CN=${tag} test CA`,
  ]);
  await openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    key,
    "-out",
    `${dir}/${tag}.csr`,
    "-subj",
    `/CN=${names[0]}`,
  ]);
  await Deno.writeTextFile(
    `${dir}/${tag}.ext`,
    `subjectAltName=${names.map((n) => `DNS:${n}`).join(",")}\n`,
  );
  await openssl([
    "x509",
    "-req",
    "-in",
    `${dir}/${tag}.csr`,
    "-CA",
    `${ca}.pem`,
    "-CAkey",
    `${ca}.key`,
    "-CAcreateserial",
    "-out",
    leaf,
    "-days",
    "2",
    "-extfile",
    `${dir}/${tag}.ext`,
  ]);
  const seen: Array<{ path: string; headers: Record<string, string> }> = [];
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: await Deno.readTextFile(leaf),
    key: await Deno.readTextFile(key),
    onListen() {},
  }, (req) => {
    const url = new URL(req.url);
    seen.push({ path: url.pathname + url.search, headers: Object.fromEntries(req.headers) });
    return new Response("ok");
  });
  return { server, seen, caPem: await Deno.readTextFile(`${ca}.pem`), port: server.addr.port };
}

interface Observed {
  readonly output: string;
  readonly unmasked: string;
  readonly snapshot: string;
  readonly seen: string[];
}

/** One server (ours or the reference) in its own mount namespace, driven through one scenario. */
async function observe(kind: "ours" | "reference"): Promise<Observed> {
  const dir = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "masking-" });
  const github = await origin(dir, "github", ["api.github.com"]);
  const openai = await origin(dir, "openai", ["api.openai.com"]);
  const ghes = await origin(dir, "ghes", ["ghes.example.com"]);
  try {
    const hosts = `${dir}/hosts`;
    await Deno.writeTextFile(
      hosts,
      (await Deno.readTextFile("/etc/hosts")) +
        "\n127.0.0.1 api.github.com api.openai.com ghes.example.com\n",
    );
    await Deno.writeTextFile(`${dir}/ca.pem`, [github.caPem, openai.caPem, ghes.caPem].join("\n"));
    await Deno.mkdir(`${dir}/home`);
    const command = kind === "ours"
      ? [Deno.execPath(), "run", "-A", CLI, "serve", "--listen", "stdio", "--log-level", "error"]
      : [REF!, "exec-server", "--listen", "stdio"];
    await using server = spawnCommandServer(
      "unshare",
      ["--mount", "--", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', hosts, ...command],
      { ...REAL, CODEX_HOME: `${dir}/home`, SSL_CERT_FILE: `${dir}/ca.pem` },
    );
    const c = server.client;
    await c.initialize();
    const gh = `https://api.github.com:${github.port}`;
    const oa = `https://api.openai.com:${openai.port}`;
    const ent = `https://ghes.example.com:${ghes.port}`;
    const code = `-s -o /dev/null -w '%{http_code}\\n'`;
    const script = [
      'for v in GH_TOKEN GITHUB_TOKEN OPENAI_API_KEY GH_ENTERPRISE_TOKEN COPILOT_GITHUB_TOKEN OPENAI_KEY CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS MY_TOKEN HDR_TOKEN; do echo "$v=${!v}"; done',
      `curl ${code} ${gh}/bearer -H "Authorization: Bearer $GH_TOKEN"`,
      `curl ${code} ${gh}/token -H "Authorization: token $GITHUB_TOKEN"`,
      `curl ${code} ${gh}/basic -u "x-access-token:$GH_TOKEN"`,
      `curl ${code} ${gh}/explicit -H "Authorization: Bearer explicit"`,
      `curl ${code} ${gh}/none`,
      `curl ${code} ${gh}/query?t=$GH_TOKEN`,
      `curl ${code} ${oa}/openai -H "Authorization: Bearer $OPENAI_API_KEY"`,
      `curl ${code} ${oa}/wrong-host -H "Authorization: Bearer $GH_TOKEN"`,
      `curl ${code} ${oa}/other-header -H "X-Api-Key: $OPENAI_API_KEY"`,
      `curl ${code} ${ent}/enterprise -H "Authorization: Bearer $GH_ENTERPRISE_TOKEN"`,
      `curl ${code} -x "$ALL_PROXY" ${gh}/socks -H "Authorization: Bearer $GH_TOKEN"`,
      `curl ${code} ${oa}/v1/custom -H "Authorization: Bearer $MY_TOKEN"`,
      `curl ${code} ${oa}/v1x-outside -H "Authorization: Bearer $MY_TOKEN"`,
      `curl ${code} ${oa}/v1/custom-token -H "Authorization: token $MY_TOKEN"`,
      `curl ${code} ${oa}/v1/custom-header -H "X-Api-Key: Key $HDR_TOKEN"`,
      `curl ${code} ${oa}/v1/custom-header-bare -H "X-Api-Key: $HDR_TOKEN"`,
    ].join("\n");
    const start = (processId: string, argv: string[], extra: Record<string, unknown> = {}) =>
      c.request("process/start", {
        processId,
        argv,
        cwd: `file://${dir}`,
        env: {},
        envPolicy: INHERIT_ALL,
        tty: false,
        arg0: null,
        enforceManagedNetwork: true,
        networkProxy: {
          proxy: {
            enabled: true,
            credentialMasking: true,
            enableSocks5: true,
            enableSocks5Udp: false,
            allowUpstreamProxy: false,
            dangerouslyAllowAllUnixSockets: false,
            mode: "full",
            domains: {
              "api.github.com": "allow",
              "api.openai.com": "allow",
              "ghes.example.com": "allow",
            },
            unixSockets: null,
            allowLocalBinding: true,
            credentialProviders: providers(openai.port),
          },
          auditMetadata: {},
        },
        ...extra,
      });
    await start("masked", ["/bin/bash", "-c", script]);
    const output = normalize(await readProcessOutput(c, "masked"));
    // Not `bash -c` exactly: nothing is masked.
    await start("login", [
      "bash",
      "-lc",
      'echo "$GH_TOKEN|$CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE"',
    ]);
    const unmasked = await readProcessOutput(c, "login");
    // With a shell snapshot (which replays the profile's exports): not masked either.
    await start(
      "snapshot",
      ["/bin/bash", "-c", 'echo "$GH_TOKEN|$CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE"'],
      { shellSnapshot: { scopeId: "s", shell: { name: "bash", path: "/bin/bash" } } },
    );
    const snapshot = await readProcessOutput(c, "snapshot");
    const seen = [github, openai, ghes].flatMap((o) =>
      o.seen.map((s) =>
        normalize(
          `${s.path} ${s.headers.authorization ?? "-"} ${s.headers["x-api-key"] ?? ""}`.trim(),
        )
      )
    );
    return { output, unmasked, snapshot, seen };
  } finally {
    await Promise.all([github, openai, ghes].map((o) => o.server.shutdown()));
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "credential masking end to end: stand-ins in the child, real values at the bound hosts only — as the reference",
  ignore: !CAN_UNSHARE,
  async fn() {
    const ours = await observe("ours");
    if (REF) assertEquals(ours, await observe("reference"), "ours vs the reference");
    const lines = ours.output.split("\n");
    assertEquals(lines.slice(0, 6), [
      "GH_TOKEN=ghp_masked<43>",
      "GITHUB_TOKEN=ghp_masked<40>",
      "OPENAI_API_KEY=sk-proj-masked<51>",
      "GH_ENTERPRISE_TOKEN=github_pat_masked<58>",
      "COPILOT_GITHUB_TOKEN=",
      "OPENAI_KEY=sk-not-a-brokered-name",
    ]);
    assertEquals(lines[6], "CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE=1");
    assertMatch(
      lines[7]!,
      /^CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS=\[\["@alias:GH_ENTERPRISE_TOKEN"/,
    );
    assertEquals(ours.unmasked, `${REAL.GH_TOKEN}|\n`);
    assertEquals(ours.snapshot, `${REAL.GH_TOKEN}|\n`);
    assertEquals(lines.slice(8, 10), ["MY_TOKEN=myt_<stand-in>", "HDR_TOKEN=hdr_<stand-in>"]);
    const seen = Object.fromEntries(ours.seen.map((s) => [s.split(" ")[0], s]));
    assertEquals(seen["/bearer"], `/bearer Bearer ${REAL.GH_TOKEN}`);
    assertEquals(seen["/token"], `/token token ${REAL.GITHUB_TOKEN}`);
    assertEquals(
      seen["/basic"],
      `/basic Basic ${new TextEncoder().encode(`x-access-token:${REAL.GH_TOKEN}`).toBase64()}`,
    );
    assertEquals(seen["/explicit"], "/explicit Bearer explicit");
    assertEquals(seen["/none"], "/none -");
    assertEquals(seen["/openai"], `/openai Bearer ${REAL.OPENAI_API_KEY}`);
    assertEquals(seen["/wrong-host"], "/wrong-host Bearer ghp_masked<43>");
    assertEquals(seen["/other-header"], "/other-header - sk-proj-masked<51>");
    assertEquals(seen["/enterprise"], `/enterprise Bearer ${REAL.GH_ENTERPRISE_TOKEN}`);
    assertEquals(seen["/socks"], `/socks Bearer ${REAL.GH_TOKEN}`);
    assert(seen["/query?t=ghp_masked<43>"] !== undefined, "URLs are never rewritten");
    // Custom providers: under their prefix, and only the ways their auth allows.
    assertEquals(seen["/v1/custom"], `/v1/custom Bearer ${REAL.MY_TOKEN}`);
    assertEquals(seen["/v1x-outside"], "/v1x-outside Bearer myt_<stand-in>");
    assertEquals(seen["/v1/custom-token"], "/v1/custom-token token myt_<stand-in>");
    assertEquals(seen["/v1/custom-header"], `/v1/custom-header - Key ${REAL.HDR_TOKEN}`);
    assertEquals(seen["/v1/custom-header-bare"], "/v1/custom-header-bare - hdr_<stand-in>");
  },
});

Deno.test("stand-ins: the credential's prefix, 'masked', random letters and digits; as long as the value and at least 40 (GitHub) or 51 (OpenAI)", () => {
  const cases: Array<[string, "github" | "openai", RegExp]> = [
    ["ghp_short", "github", /^ghp_masked[A-Za-z0-9]{30}$/],
    ["gho_" + "1".repeat(70), "github", /^gho_masked[A-Za-z0-9]{64}$/],
    ["plain", "github", /^ghp_masked[A-Za-z0-9]{30}$/],
    ["sk-abc", "openai", /^sk-masked[A-Za-z0-9]{42}$/],
    ["sk-proj-" + "x".repeat(150), "openai", /^sk-proj-masked[A-Za-z0-9]{144}$/],
  ];
  for (const [real, family, shape] of cases) assertMatch(standIn(real, family), shape);
  assert(standIn("x", "github") !== standIn("x", "github"), "fresh every time");
});

Deno.test("masking applies to `bash -c <script>` exactly, and GH_HOST binds enterprise tokens only when it names a server", async () => {
  assert(maskableCommand(["/bin/bash", "-c", "x"]));
  assert(maskableCommand(["bash", "-c", "x"]));
  for (
    const argv of [["bash", "-lc", "x"], ["sh", "-c", "x"], ["zsh", "-c", "x"], [
      "bash",
      "-c",
      "x",
      "y",
    ], [
      "/usr/bin/env",
      "bash",
      "-c",
      "x",
    ]]
  ) assert(!maskableCommand(argv), argv.join(" "));
  assertEquals(
    [
      "myghes",
      "GHES.Example.com",
      "ghes.example.com:8443",
      "127.0.0.1",
      "localhost",
      "https://ghes.example.com",
      "github.com",
      "foo.ghe.com",
      undefined,
    ]
      .map(enterpriseServer),
    ["myghes", "ghes.example.com", "ghes.example.com", "", "", "", "", "", ""],
  );
  const { env } = await maskCredentials({ GH_ENTERPRISE_TOKEN: "t", GH_HOST: "localhost" });
  assertEquals(env.GH_ENTERPRISE_TOKEN, "t", "unbound: left as it is");
  assertEquals(env.CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS, "[]");
});

Deno.test("the broker rewrites Authorization only: Bearer, token, Basic user or password, for the bound host", async () => {
  const { env, broker } = await maskCredentials({
    GH_TOKEN: "real-gh",
    OPENAI_API_KEY: "real-oa",
  });
  const gh = env.GH_TOKEN!;
  const rewrite = (host: string, value: string) =>
    broker.rewrite({ host, port: 443, path: "/" }, [["Authorization", value], ["X-Other", gh]]);
  assertEquals(rewrite("api.github.com", `Bearer ${gh}`), [["Authorization", "Bearer real-gh"], [
    "X-Other",
    gh,
  ]]);
  assertEquals(rewrite("API.GitHub.com.", `token ${gh}`)[0], ["Authorization", "token real-gh"]);
  const basic = (pair: string) => `Basic ${new TextEncoder().encode(pair).toBase64()}`;
  assertEquals(rewrite("github.com", basic(`${gh}:x-oauth-basic`))[0], [
    "Authorization",
    basic("real-gh:x-oauth-basic"),
  ]);
  assertEquals(rewrite("api.openai.com", `Bearer ${gh}`)[0], ["Authorization", `Bearer ${gh}`]);
  assertEquals(rewrite("api.github.com", "Bearer real-looking")[0], [
    "Authorization",
    "Bearer real-looking",
  ]);
  assert(broker.binds("uploads.github.com") && broker.binds("x.ghe.com"));
  assert(!broker.binds("raw.githubusercontent.com") && !broker.binds("example.com"));
});

Deno.test("a bound host's tunnel: TLS is intercepted, a client that waits for the server gets an opaque tunnel", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted = listener.accept();
  const client = await Deno.connect({
    hostname: "127.0.0.1",
    port: (listener.addr as Deno.NetAddr).port,
  });
  const server = await accepted;
  try {
    // A server-first protocol: the client says nothing; the sniff gives up
    // after its wait and hands over the read still under way.
    const silent = await sniffTls(server, null, 50);
    assertEquals(silent.tls, false);
    assert(silent.first instanceof Promise);
    await client.write(new TextEncoder().encode("hello"));
    assertEquals(new TextDecoder().decode((await silent.first)!), "hello");
    // A TLS record header.
    await client.write(Uint8Array.of(0x16, 0x03, 0x01));
    const tls = await sniffTls(server, null, 1000);
    assertEquals(tls.tls, true);
    assertEquals(await sniffTls(server, Uint8Array.of(0x53), 1000), {
      tls: false,
      first: Uint8Array.of(0x53),
    });
  } finally {
    client.close();
    server.close();
    listener.close();
  }
});
