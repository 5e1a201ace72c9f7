import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  collectProcess,
  type Msg,
  spawnCommandServer,
  spawnStdioServer,
  startProcess,
  text,
} from "../helpers/wire_client.ts";
import { referenceBin, referenceHome, scratchRoot } from "../helpers/reference.ts";
import { isLoginCommand, snapshotScript } from "../../src/process/shell_snapshot.ts";

const encoder = new TextEncoder();

Deno.test("shell snapshot: the capture's state and environment become a restore script", () => {
  const output = encoder.encode(
    "Welcome from the profile!\n" +
      "\n@@exec-server shell snapshot@@\nset -o braceexpand\nmyfn () \n{ \n    echo hi\n}\n" +
      "\n@@exec-server shell snapshot env@@\n" +
      'A=1\0QUOTED=it\'s "x"\nline2\0PWD=/somewhere\0SHLVL=3\0_=/usr/bin/env\0BASH_FUNC_f%%=() { :; }\0',
  );
  const script = snapshotScript(output)!;
  assert(!script.includes("Welcome"), "what the profile printed is dropped");
  assertStringIncludes(script, "set -o braceexpand\nmyfn () \n{ \n    echo hi\n}\n");
  assertStringIncludes(script, "*) export A='1' ;;");
  assertStringIncludes(script, `*) export QUOTED='it'\\''s "x"\nline2' ;;`);
  for (const name of ["PWD", "SHLVL", "export _", "BASH_FUNC"]) {
    assert(!script.includes(name), name);
  }
  assertEquals(snapshotScript(encoder.encode("no markers at all")), null);
  const bash = { name: "bash", path: "/bin/bash" };
  assert(isLoginCommand(["/bin/bash", "-lc", "ls"], bash));
  assert(!isLoginCommand(["/bin/bash", "-c", "ls"], bash));
  assert(!isLoginCommand(["/bin/sh", "-lc", "ls"], bash));
});

/** A home whose login profile talks, exports, defines a function and counts logins. */
async function chattyHome(): Promise<string> {
  const home = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "snaphome-" });
  await Deno.writeTextFile(
    `${home}/.bash_profile`,
    [
      'echo "Welcome to this machine!"',
      'echo login >> "$HOME/logins"',
      "export FROM_PROFILE=yes",
      "export PICKED=profile",
      'myfn() { echo "fn ran with $1"; }',
      "",
    ].join("\n"),
  );
  return home;
}

async function scenario(server: ReturnType<typeof spawnStdioServer>, home: string) {
  await using s = server;
  await s.client.initialize();
  const env = { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: home };
  const snapshot = (scopeId: string) => ({
    shellSnapshot: { scopeId, shell: { name: "bash", path: "/bin/bash" } },
  });
  const run = async (id: string, argv: string[], extra: Msg = {}) => {
    const started = await startProcess(s.client, id, argv, { env, ...extra });
    assert(started.result, JSON.stringify(started));
    const r = await collectProcess(s.client, id);
    return { out: text(r.stdout), err: text(r.stderr), code: r.exitCode };
  };
  const results = [
    await run("a", ["/bin/bash", "-lc", "echo $FROM_PROFILE; myfn x"], snapshot("s1")),
    await run("b", ["/bin/bash", "-lc", "echo $FROM_PROFILE $PICKED; exit 4"], snapshot("s1")),
    // The request's own variables win over the snapshot's.
    await run("c", ["/bin/bash", "-lc", "echo $PICKED"], {
      ...snapshot("s1"),
      env: { ...env, PICKED: "request" },
    }),
    await run("d", ["/bin/bash", "-lc", "echo scope two"], snapshot("s2")),
    // Not the login form: run as sent.
    await run("e", ["/bin/bash", "-c", "echo plain; type myfn >/dev/null 2>&1 || echo no-fn"], {
      ...snapshot("s1"),
    }),
  ];
  const logins = (await Deno.readTextFile(`${home}/logins`)).trim().split("\n").length;
  return { results, logins };
}

Deno.test("shell snapshot: one login per scope, its state restored, its chatter gone", async () => {
  const home = await chattyHome();
  try {
    const ours = await scenario(spawnStdioServer(), home);
    assertEquals(ours.results.map((r) => [r.out, r.code]), [
      ["yes\nfn ran with x\n", 0],
      ["yes profile\n", 4],
      ["request\n", 0],
      ["scope two\n", 0],
      ["plain\nno-fn\n", 0],
    ]);
    assertEquals(ours.logins, 2, "one login per scope (s1, s2)");
    const ref = referenceBin();
    if (!ref) {
      console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");
      return;
    }
    await Deno.remove(`${home}/logins`);
    const theirs = await scenario(
      spawnCommandServer(ref, ["exec-server", "--listen", "stdio"], {
        CODEX_HOME: referenceHome(),
      }),
      home,
    );
    // Under load the reference now and then reports no exit code (null) for
    // the process that ran its login; ours is held to the exact codes above.
    assertEquals(
      ours.results.map((r, i) => [r.out, theirs.results[i]?.code === null ? null : r.code]),
      theirs.results.map((r) => [r.out, r.code]),
    );
    assertEquals(ours.logins, theirs.logins);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("shell snapshot: a profile that fails leaves commands as sent; bad shells are refused", async () => {
  const home = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "snaphome-" });
  try {
    await Deno.writeTextFile(`${home}/.bash_profile`, "echo broken >&2; exit 3\n");
    await using s = spawnStdioServer();
    await s.client.initialize();
    const env = { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: home };
    const shellSnapshot = { scopeId: "s", shell: { name: "bash", path: "/bin/bash" } };
    await startProcess(s.client, "a", ["/bin/bash", "-lc", "echo never"], { env, shellSnapshot });
    const r = await collectProcess(s.client, "a");
    assertEquals([text(r.stdout), text(r.stderr), r.exitCode], ["", "broken\n", 3]);
    const fish = await startProcess(s.client, "b", ["/bin/bash", "-lc", "true"], {
      env,
      shellSnapshot: { scopeId: "s", shell: { name: "fish", path: "/usr/bin/fish" } },
    });
    assertEquals(fish.error, {
      code: -32602,
      message: "shell snapshots are unsupported for shell `fish`",
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("shell snapshot: what the first request set is not replayed into later ones", async () => {
  const home = await chattyHome();
  try {
    await using s = spawnStdioServer();
    await s.client.initialize();
    const env = { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: home };
    const shellSnapshot = { scopeId: "s", shell: { name: "bash", path: "/bin/bash" } };
    await startProcess(s.client, "a", ["/bin/bash", "-lc", "echo first"], {
      env: { ...env, ONLY_FIRST: "1" },
      shellSnapshot,
    });
    assertEquals(text((await collectProcess(s.client, "a")).stdout), "first\n");
    await startProcess(s.client, "b", ["/bin/bash", "-lc", 'echo "[$ONLY_FIRST] $FROM_PROFILE"'], {
      env,
      shellSnapshot,
    });
    assertEquals(text((await collectProcess(s.client, "b")).stdout), "[] yes\n");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
