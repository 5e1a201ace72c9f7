// The real harness: `codex exec` (0.171.0) with a scripted fake model,
// pointed at an exec-server by CODEX_EXEC_SERVER_URL, in its default
// (read-only) sandbox mode and in workspace-write. What Codex sends back to
// the model (the tool outputs) and what ends up on disk must be the same
// through our server as through the reference's.

import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { fakeModel, type Json, toolOutputs, type Turn } from "../helpers/fake_model.ts";
import { referenceBin, scratchRoot } from "../helpers/reference.ts";
import { startWsServer } from "../helpers/ws_server.ts";
import { httpOrigin } from "../helpers/proxy.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";
import { tcpCaptureSupport } from "../../src/sandbox/mod.ts";

const REF = referenceBin();
const CACHE = scratchRoot();

interface Session {
  /** The tool outputs of the last request, normalized. */
  readonly outputs: string[];
  /** The workspace's files afterwards, with contents. */
  readonly files: Record<string, string>;
}

/** Runs `codex exec` once; the tool outputs of its last model request, normalized. */
async function runCodex(
  base: string,
  modelUrl: string,
  serverUrl: string,
  ws: string,
  sandbox: string[],
  requests: Json[],
  config: CodexConfig,
): Promise<string[]> {
  const home = `${base}/codex-home`;
  await Deno.mkdir(home);
  await Deno.writeTextFile(
    `${home}/config.toml`,
    [
      ...(config.top ?? []),
      'model = "gpt-5.5"',
      'model_provider = "fake"',
      "[model_providers.fake]",
      'name = "fake"',
      `base_url = "${modelUrl}"`,
      'wire_api = "responses"',
      'env_key = "FAKE_MODEL_KEY"',
      ...(config.tables ?? []),
    ].join("\n") + "\n",
  );
  // Codex refuses to hand a remote executor a proxy when its own
  // environment names extra CAs (SSL_CERT_FILE…): such runs get a bare one.
  const env: Record<string, string> = {
    CODEX_HOME: home,
    FAKE_MODEL_KEY: "test-key",
    CODEX_EXEC_SERVER_URL: serverUrl,
  };
  if (config.bareEnv) {
    Object.assign(env, { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: base });
  }
  const run = await new Deno.Command(REF!, {
    args: ["exec", "--skip-git-repo-check", "-C", ws, ...sandbox, "do the scripted work"],
    env,
    clearEnv: config.bareEnv ?? false,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(run.code, 0, new TextDecoder().decode(run.stderr).slice(-2000));
  return Object.entries(toolOutputs(requests.at(-1)))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([, text]) =>
      text.replaceAll(base, "$BASE")
        .replace(/Chunk ID: \w+/g, "Chunk ID: X")
        .replace(/Wall time: [\d.]+ seconds/g, "Wall time: X seconds")
        // Codex counts tokens of the raw text: the random temporary paths in it vary.
        .replace(/Original token count: \d+/g, "Original token count: X")
        .replace(/ after \d+ ms/g, " after X ms")
    );
}

/**
 * Extra `config.toml` lines (before and after the model provider), a bare
 * environment for Codex, and variables for the exec-server.
 */
interface CodexConfig {
  readonly top?: string[];
  readonly tables?: string[];
  readonly bareEnv?: boolean;
  readonly serverEnv?: Record<string, string>;
}

/**
 * The `net` permission profile's tables: read everything, network on in
 * full mode with `extra` settings, `domain` allowed.
 */
function networkProfile(extra: string[], domain: string): string[] {
  return [
    "[permissions.net.filesystem]",
    '":root" = "read"',
    "[permissions.net.network]",
    "enabled = true",
    'mode = "full"',
    ...extra,
    "[permissions.net.network.domains]",
    `"${domain}" = "allow"`,
  ];
}

/** The workspace: hello.txt; OUTSIDE is a sibling directory Codex never writes to. */
async function codexSession(
  kind: "ours" | "reference",
  sandbox: string[],
  turns: (ws: string, outside: string) => Turn[],
  config: CodexConfig = {},
): Promise<Session> {
  await Deno.mkdir(CACHE, { recursive: true });
  const base = await Deno.makeTempDir({ dir: CACHE, prefix: "codex-exec-" });
  try {
    const ws = `${base}/ws`;
    const outside = `${base}/outside`;
    await Deno.mkdir(ws);
    await Deno.mkdir(outside);
    await Deno.writeTextFile(`${ws}/hello.txt`, "hello\n");
    await using model = fakeModel(turns(ws, outside));
    let outputs: string[];
    {
      // The server ends before the workspace is inspected: sandboxed file
      // operations run in a worker whose read-only placeholders (.codex …)
      // exist on the host while it lives.
      await using server = await startWsServer(kind, { env: config.serverEnv });
      outputs = await runCodex(
        base,
        model.baseUrl,
        server.url,
        ws,
        sandbox,
        model.requests,
        config,
      );
    }
    const files: Record<string, string> = {};
    for await (const entry of Deno.readDir(ws)) {
      files[entry.name] = entry.isFile ? await Deno.readTextFile(`${ws}/${entry.name}`) : "<dir>";
    }
    for await (const entry of Deno.readDir(outside)) files[`OUTSIDE/${entry.name}`] = "!";
    return { outputs, files };
  } finally {
    await Deno.remove(base, { recursive: true });
  }
}

const ready = REF !== null && sandboxSupport().available;
if (!ready) console.warn("note: codex exec harness tests need the reference (CODEX_REFERENCE_BIN)");

Deno.test({
  name:
    "codex exec, default read-only sandbox: reads work, writes are denied — as through the reference",
  ignore: !ready,
  async fn() {
    const turns = (): Turn[] => [
      { call: "exec_command", cmd: "cat hello.txt" },
      { call: "exec_command", cmd: "echo x > written.txt" },
      { message: "done" },
    ];
    const ours = await codexSession("ours", [], turns);
    const reference = await codexSession("reference", [], turns);
    assertEquals(ours.outputs.length, 2);
    assertStringIncludes(ours.outputs[0]!, "Process exited with code 0");
    assertStringIncludes(ours.outputs[0]!, "hello\n");
    assertStringIncludes(ours.outputs[1]!, "Process exited with code 1");
    assertStringIncludes(ours.outputs[1]!, "written.txt: Read-only file system");
    assertEquals(ours.files, { "hello.txt": "hello\n" });
    assertEquals(ours, reference);
  },
});

Deno.test({
  name:
    "codex exec --sandbox workspace-write: commands and apply_patch write the workspace only — as through the reference",
  ignore: !ready,
  async fn() {
    const turns = (_ws: string, outside: string): Turn[] => [
      { call: "exec_command", cmd: "echo written > written.txt && cat written.txt" },
      { call: "exec_command", cmd: `echo x > ${outside}/escaped` },
      { call: "exec_command", cmd: "mkdir -p .codex && echo y > .codex/config.toml" },
      {
        call: "apply_patch",
        patch: "*** Begin Patch\n*** Add File: added.txt\n+added\n*** End Patch\n",
      },
      {
        call: "apply_patch",
        patch: "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hello\n+hello, patched\n" +
          "*** End Patch\n",
      },
      { message: "done" },
    ];
    const sandbox = ["--sandbox", "workspace-write"];
    const ours = await codexSession("ours", sandbox, turns);
    const reference = await codexSession("reference", sandbox, turns);
    assertEquals(ours.outputs.length, 5);
    assertStringIncludes(ours.outputs[0]!, "written\n");
    assertStringIncludes(ours.outputs[1]!, "Read-only file system");
    assertStringIncludes(ours.outputs[2]!, "Read-only file system");
    assertStringIncludes(ours.outputs[3]!, "A added.txt");
    assertStringIncludes(ours.outputs[4]!, "M hello.txt");
    assertEquals(ours.files, {
      "hello.txt": "hello, patched\n",
      "added.txt": "added\n",
      "written.txt": "written\n",
    });
    assert(!("OUTSIDE/escaped" in ours.files));
    assertEquals(ours, reference);
  },
});

Deno.test({
  name:
    "codex exec with shell_snapshot_v2 and executor_capability_discovery_v2: the same tool outputs as through the reference",
  ignore: !ready,
  async fn() {
    const turns = (): Turn[] => [
      { call: "exec_command", cmd: 'cat hello.txt; echo "shell: $0"' },
      { call: "exec_command", cmd: "export FOO=bar; echo set" },
      { call: "exec_command", cmd: 'echo "foo=[$FOO]"; type cd | head -1' },
      { message: "done" },
    ];
    const flags = ["--enable", "shell_snapshot_v2", "--enable", "executor_capability_discovery_v2"];
    const ours = await codexSession("ours", flags, turns);
    const reference = await codexSession("reference", flags, turns);
    assertEquals(ours.outputs.length, 3);
    assertStringIncludes(ours.outputs[0]!, "hello\n");
    assertStringIncludes(ours.outputs[2]!, "foo=[]");
    assertEquals(ours, reference);
  },
});

Deno.test({
  name:
    "codex exec with a permission profile's network (network_proxy): a proxy per command on the executor, nothing else reachable — as through the reference",
  ignore: !ready,
  async fn() {
    const origin = httpOrigin();
    try {
      const port = origin.port;
      const turns = (): Turn[] => [
        {
          call: "exec_command",
          cmd: `curl -sS -m 5 -o /dev/null -w "%{http_code}\\n" --noproxy "" -x "$HTTP_PROXY" ` +
            `http://localhost:${port}/via-proxy; ` +
            `curl -sS -m 3 -o /dev/null -w "%{http_code}\\n" http://127.0.0.1:${port}/direct 2>&1; ` +
            `echo "active=$CODEX_NETWORK_PROXY_ACTIVE"`,
        },
        { message: "done" },
      ];
      const config: CodexConfig = {
        top: ['default_permissions = "net"'],
        tables: networkProfile(["allow_local_binding = true"], "localhost"),
        bareEnv: true,
      };
      const flags = ["--enable", "network_proxy"];
      const ours = await codexSession("ours", flags, turns, config);
      const reference = await codexSession("reference", flags, turns, config);
      assertEquals(ours.outputs.length, 1);
      assertStringIncludes(ours.outputs[0]!, "200\n");
      assertStringIncludes(ours.outputs[0]!, "Failed to connect to 127.0.0.1");
      assertStringIncludes(ours.outputs[0]!, "active=1");
      assertEquals(ours, reference);
      assertEquals(origin.seen.map((s) => s.path), ["/via-proxy", "/via-proxy"]);
    } finally {
      await origin.server.shutdown();
    }
  },
});

Deno.test({
  name:
    "codex exec with credential_masking: the command sees stand-ins for the executor's credentials — as through the reference",
  ignore: !ready,
  async fn() {
    const turns = (): Turn[] => [
      {
        call: "exec_command",
        cmd: 'echo "gh=${GH_TOKEN:0:10} len=${#GH_TOKEN} ' +
          'broker=$CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE"',
      },
      { message: "done" },
    ];
    const config: CodexConfig = {
      // Codex masks only commands it runs as `bash -c` (no login shell).
      top: ['default_permissions = "net"', "allow_login_shell = false"],
      tables: networkProfile([], "api.github.com"),
      bareEnv: true,
      serverEnv: { GH_TOKEN: "ghp_realGH000000000000000000000000000000000" },
    };
    const flags = ["--enable", "network_proxy", "--enable", "credential_masking"];
    const ours = await codexSession("ours", flags, turns, config);
    const reference = await codexSession("reference", flags, turns, config);
    assertEquals(ours.outputs.length, 1);
    assertStringIncludes(ours.outputs[0]!, "gh=ghp_masked len=43 broker=1");
    assertEquals(ours, reference);
  },
});

Deno.test({
  name:
    "codex exec with a permission profile whose network uses transparent TCP: a program that ignores proxy variables is held to the policy — as through the reference",
  ignore: !ready || !tcpCaptureSupport().available,
  async fn() {
    const host = Deno.networkInterfaces()
      .find((i) => i.family === "IPv4" && !i.address.startsWith("127."))?.address;
    if (!host) {
      console.warn("note: no non-loopback IPv4 address here: transparent TCP session skipped");
      return;
    }
    const origin = Deno.serve(
      { hostname: "0.0.0.0", port: 0, onListen() {} },
      (req) => new Response(`hello ${new URL(req.url).pathname}\n`),
    );
    try {
      // One pipe for both streams (2>&1): the reset's message and the exit
      // code then arrive in the order they were written, on a busy machine too.
      const raw = (target: string, path: string) =>
        `{ bash -c 'exec 3<>/dev/tcp/${target} && printf "GET ${path} HTTP/1.0\\r\\n\\r\\n" >&3 && ` +
        `cat <&3 | tail -1'; echo "rc=$?"; } 2>&1`;
      const turns = (): Turn[] => [
        { call: "exec_command", cmd: raw(`${host}/${origin.addr.port}`, "/raw-allowed") },
        { call: "exec_command", cmd: raw("203.0.113.7/80", "/raw-denied") },
        { message: "done" },
      ];
      const config: CodexConfig = {
        top: ['default_permissions = "net"'],
        tables: networkProfile(["allow_local_binding = true", "transparent_tcp = true"], host),
        bareEnv: true,
      };
      const flags = ["--enable", "network_proxy"];
      // A refused connection is reset after the policy answers: bash has
      // usually connected by then (cat reads the reset; the pipeline's status
      // is tail's, 0), but on a busy machine the reset can come before bash
      // runs again (connect's error, and bash exits 1): the same outcome.
      const session = async (kind: "ours" | "reference") => {
        const run = await codexSession(kind, flags, turns, config);
        return {
          ...run,
          outputs: run.outputs.map((o) =>
            o.replace(
              /bash: connect: Connection reset by peer\nbash: line 1: \/dev\/tcp\/[^\n]*\nrc=1\n/,
              "cat: -: Connection reset by peer\nrc=0\n",
            )
          ),
        };
      };
      const ours = await session("ours");
      const reference = await session("reference");
      assertEquals(ours.outputs.length, 2);
      assertStringIncludes(ours.outputs[0]!, "hello /raw-allowed\nrc=0");
      assertStringIncludes(ours.outputs[1]!, "Connection reset by peer");
      assertEquals(ours, reference);
    } finally {
      await origin.shutdown();
    }
  },
});
