// A sandboxed program reaches nothing beyond its policy: escapes attempted
// from inside a real sandbox, judged from outside (files on the host), with
// the reference's behaviour run or recorded beside ours.

import { assertEquals } from "../helpers/assert.ts";
import {
  type NamedServer,
  oursServer,
  READ_ONLY,
  referenceServer,
  runSandboxed,
  sandboxContext,
  WORKSPACE_WRITE,
} from "../helpers/sandbox.ts";
import { lexists as exists } from "../../src/fs/metadata.ts";
import { spawnCommandServer } from "../helpers/wire_client.ts";
import { ourStdioCommand } from "../helpers/wire_client.ts";
import { referenceBin, referenceHome, scratchRoot } from "../helpers/reference.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";

/**
 * Ours and the reference (when installed), each started by a launcher that
 * leaves `dir` open on descriptor 7 without close-on-exec.
 */
function launchedWithOpenDirectory(dir: string): NamedServer[] {
  const launcher = (program: string, args: string[], env: Record<string, string> = {}) =>
    spawnCommandServer("bash", ["-c", 'exec 7<"$0"; exec "$@"', dir, program, ...args], env);
  const servers: NamedServer[] = [{
    name: "ours",
    server: launcher(ourStdioCommand()[0]!, ourStdioCommand().slice(1)),
  }];
  const ref = referenceBin();
  if (ref) {
    servers.push({
      name: "reference",
      server: launcher(ref, ["exec-server", "--listen", "stdio"], { CODEX_HOME: referenceHome() }),
    });
  }
  return servers;
}

Deno.test({
  name:
    "escape: a descriptor the server inherited (a directory) reaches no child, sandboxed or not",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const dir = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "inherited-" });
    try {
      for (const named of launchedWithOpenDirectory(dir)) {
        await using s = named.server;
        await s.client.initialize();
        // Unconfined: the child's descriptors above 2.
        const plain = await runSandboxed(
          s.client,
          "/tmp",
          "ls /proc/self/fd | sort -n | awk '$1 > 2' | tr '\\n' ' '",
          null,
        );
        // The child's own `ls` directory descriptor is 3; nothing else.
        assertEquals(plain.stdout.trim(), "3", `${named.name}: unconfined child's descriptors`);
        // Read-only sandbox: writing through the inherited directory would
        // land on the host, outside every writable root.
        const confined = await runSandboxed(
          s.client,
          "/tmp",
          "echo pwned > /proc/self/fd/7/escaped; ls /proc/self/fd/7/ 2>&1 | head -1",
          sandboxContext("/tmp", READ_ONLY),
        );
        assertEquals(confined.sandboxType, "linuxSeccomp", named.name);
        let escaped = true;
        try {
          await Deno.lstat(`${dir}/escaped`);
        } catch {
          escaped = false;
        }
        assertEquals(escaped, false, `${named.name}: a file was created through descriptor 7`);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "escape: a .git pointer file's repository (and a worktree's shared one) stays read-only under workspace-write",
  ignore: !sandboxSupport().available,
  fn: async () => {
    for (const named of [oursServer(), referenceServer()]) {
      if (!named) continue;
      await using s = named.server;
      await s.client.initialize();
      for (const layout of ["pointer", "worktree"] as const) {
        const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "gitdir-" });
        const ws = `${base}/ws`;
        try {
          // pointer: ws/.git says `gitdir: .realgit` (submodules look so).
          // worktree: ws/.git names ws/main/.git/worktrees/wt, whose
          // `commondir` leads to ws/main/.git (config and hooks live there).
          const repo = layout === "pointer" ? `${ws}/.realgit` : `${ws}/main/.git`;
          await Deno.mkdir(`${repo}/hooks`, { recursive: true });
          await Deno.writeTextFile(`${repo}/config`, "[core]\n");
          if (layout === "pointer") {
            await Deno.writeTextFile(`${ws}/.git`, "gitdir: .realgit\n");
          } else {
            await Deno.mkdir(`${repo}/worktrees/wt`, { recursive: true });
            await Deno.writeTextFile(`${repo}/worktrees/wt/commondir`, "../..\n");
            await Deno.writeTextFile(`${ws}/.git`, "gitdir: main/.git/worktrees/wt\n");
          }
          const rel = repo.slice(ws.length + 1);
          const run = await runSandboxed(
            s.client,
            ws,
            `printf pwned >> ${rel}/config; printf '#!/bin/sh\\necho pwned\\n' > ${rel}/hooks/post-checkout; ` +
              "echo ok > allowed.txt",
            sandboxContext(ws, WORKSPACE_WRITE),
          );
          // The workspace itself stays writable; the repository does not.
          assertEquals(await Deno.readTextFile(`${ws}/allowed.txt`), "ok\n", named.name);
          const outcome = {
            config: await Deno.readTextFile(`${repo}/config`),
            hook: await exists(`${repo}/hooks/post-checkout`),
          };
          if (named.name === "reference" && layout === "worktree") {
            // Recorded, not required: 0.169.0 protects a pointer's own
            // target but leaves a worktree's shared repository writable
            // ({config: "[core]\npwned", hook: true}); ours protects both.
            console.warn(`note: reference, worktree layout: ${JSON.stringify(outcome)}`);
            continue;
          }
          assertEquals(
            outcome,
            { config: "[core]\n", hook: false },
            `${named.name} ${layout}: ${run.stderr}`,
          );
        } finally {
          await Deno.remove(base, { recursive: true });
        }
      }
    }
  },
});

/** Keys of the host's keyrings whose description holds `marker` (as /proc/keys lists them). */
function hostKeys(marker: string): string[] {
  return Deno.readTextFileSync("/proc/keys").split("\n").filter((line) => line.includes(marker));
}

/** Invalidates host keys a failing run planted (keyctl KEYCTL_INVALIDATE). */
function removeHostKeys(marker: string): void {
  const keys = hostKeys(marker);
  if (keys.length === 0) return;
  const libc = Deno.dlopen("libc.so.6", {
    syscall: { parameters: ["i64", "i64", "i64"], result: "i64" },
  });
  try {
    const keyctl = Deno.build.arch === "x86_64" ? 250n : 219n;
    for (const line of keys) libc.symbols.syscall(keyctl, 21n, BigInt(`0x${line.split(" ")[0]}`));
  } finally {
    libc.close();
  }
}

Deno.test({
  name:
    "escape: root in the sandbox is not root on the host — sysctl, keyring, perf, userfaultfd, TIOCSTI refused",
  ignore: !sandboxSupport().available || Deno.uid() !== 0,
  fn: async () => {
    const fixture = new URL("../fixtures/confined_syscalls.ts", import.meta.url).pathname;
    const swappiness = Deno.readTextFileSync("/proc/sys/vm/swappiness").trim();
    const other = swappiness === "61" ? "62" : "61";
    for (const named of [oursServer(), referenceServer()]) {
      if (!named) continue;
      await using s = named.server;
      await s.client.initialize();
      const marker = `exec-server-escape-${crypto.randomUUID().slice(0, 8)}`;
      try {
        const run = await runSandboxed(
          s.client,
          "/tmp",
          `echo ${other} > /proc/sys/vm/swappiness 2>/dev/null; ` +
            `${Deno.execPath()} run --quiet --no-config --allow-ffi ${fixture} ${marker}`,
          sandboxContext("/tmp", READ_ONLY),
          { tty: true },
        );
        // The calls' own verdicts, then what the host shows.
        const calls = JSON.parse(run.stdout.slice(run.stdout.indexOf("{")).trim());
        const outcome = {
          sysctl: Deno.readTextFileSync("/proc/sys/vm/swappiness").trim() === swappiness
            ? "unchanged"
            : "changed",
          hostKeys: hostKeys(marker).length,
          ...calls,
        };
        if (named.name === "reference") {
          // Recorded: 0.169.0 gives {sysctl: "changed", hostKeys: 1,
          // add_key: "ok", perf_event_open: "ok", userfaultfd: "errno 1"
          // (this kernel's own setting), tiocsti: "errno 1"}.
          console.warn(`note: reference: ${JSON.stringify(outcome)}`);
          continue;
        }
        assertEquals(outcome, {
          sysctl: "unchanged",
          hostKeys: 0,
          add_key: "errno 1",
          perf_event_open: "errno 1",
          userfaultfd: "errno 1",
          tiocsti: "errno 1",
        });
      } finally {
        Deno.writeTextFileSync("/proc/sys/vm/swappiness", swappiness);
        removeHostKeys(marker);
      }
    }
  },
});

/** A library that, loaded by any process, appends that process's PID namespace and name to $MARK_FILE. */
const PRELOAD_SOURCE = `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) {
  const char *mark = getenv("MARK_FILE");
  if (!mark) return;
  char ns[64] = {0}, comm[64] = {0};
  if (readlink("/proc/self/ns/pid", ns, sizeof ns - 1) < 0) return;
  FILE *c = fopen("/proc/self/comm", "r");
  if (c) { if (!fgets(comm, sizeof comm, c)) comm[0] = 0; fclose(c); }
  FILE *f = fopen(mark, "a");
  if (f) { fprintf(f, "%s %s", ns, comm); fclose(f); }
}
`;

Deno.test({
  name:
    "escape: LD_PRELOAD in process/start.env runs only inside the sandbox, never in a host-side helper",
  ignore: !sandboxSupport().available,
  fn: async () => {
    const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "preload-" });
    try {
      await Deno.writeTextFile(`${base}/preload.c`, PRELOAD_SOURCE);
      const cc = await new Deno.Command("gcc", {
        args: ["-shared", "-fPIC", "-o", `${base}/preload.so`, `${base}/preload.c`],
      }).output();
      assertEquals(cc.success, true, new TextDecoder().decode(cc.stderr));
      const hostNamespace = Deno.readLinkSync("/proc/self/ns/pid");
      const ws = `${base}/ws`;
      for (const named of [oursServer(), referenceServer()]) {
        if (!named) continue;
        await using s = named.server;
        await s.client.initialize();
        for (const tty of [false, true]) {
          await Deno.mkdir(ws, { recursive: true });
          const mark = `${ws}/loads`;
          const run = await runSandboxed(
            s.client,
            ws,
            "echo confined",
            sandboxContext(ws, WORKSPACE_WRITE),
            {
              tty,
              env: {
                PATH: "/usr/local/bin:/usr/bin:/bin",
                LD_PRELOAD: `${base}/preload.so`,
                MARK_FILE: mark,
              },
            },
          );
          assertEquals(
            run.stdout.includes("confined"),
            true,
            `${named.name} tty=${tty}: ${JSON.stringify(run)}`,
          );
          const loads = (await Deno.readTextFile(mark).catch(() => "")).trim().split("\n")
            .filter((l) => l !== "");
          const onHost = loads.filter((l) => l.startsWith(`${hostNamespace} `));
          const inside = loads.length - onHost.length;
          await Deno.remove(ws, { recursive: true });
          if (named.name === "reference") {
            // Recorded: 0.169.0 runs it on the host in its bubblewrap (the
            // three bwrap processes, before anything is confined).
            console.warn(`note: reference tty=${tty}: on the host in ${JSON.stringify(onHost)}`);
            continue;
          }
          assertEquals(onHost, [], `ours tty=${tty}: loaded outside the sandbox`);
          // The confined program did get the variable the request set.
          assertEquals(inside > 0, true, `ours tty=${tty}: never loaded inside`);
        }
      }
    } finally {
      await Deno.remove(base, { recursive: true });
    }
  },
});

Deno.test({
  name: "escape: TMPDIR in the request never widens what a workspace-write sandbox can write",
  ignore: !sandboxSupport().available,
  fn: async () => {
    for (const named of [oursServer(), referenceServer()]) {
      if (!named) continue;
      await using s = named.server;
      await s.client.initialize();
      const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "tmpdir-escape-" });
      const ws = `${base}/ws`;
      const home = `${base}/home`; // stands for $HOME: outside every root
      await Deno.mkdir(ws);
      await Deno.mkdir(home);
      const inTmp = await Deno.makeTempDir({ prefix: "tmpdir-ok-" }); // inside /tmp (writable)
      try {
        const attempts: Array<[string, string, string]> = [
          // [TMPDIR, where the script writes, the host path that shows it]
          ["/", `${home}/via-slash`, `${home}/via-slash`],
          [home, `${home}/via-home`, `${home}/via-home`],
          ["..", `${base}/via-dotdot`, `${base}/via-dotdot`],
        ];
        const outcome: Record<string, boolean> = {};
        for (const [tmpdir, target, check] of attempts) {
          await runSandboxed(
            s.client,
            ws,
            `echo x > '${target}'`,
            sandboxContext(ws, WORKSPACE_WRITE),
            {
              env: { PATH: "/usr/local/bin:/usr/bin:/bin", TMPDIR: tmpdir },
            },
          );
          outcome[tmpdir === home ? "$HOME" : tmpdir] = await exists(check);
        }
        // A TMPDIR inside a writable root stays usable.
        const ok = await runSandboxed(
          s.client,
          ws,
          'echo x > "$TMPDIR/ok" && echo written',
          sandboxContext(ws, WORKSPACE_WRITE),
          { env: { PATH: "/usr/local/bin:/usr/bin:/bin", TMPDIR: inTmp } },
        );
        outcome.inside = ok.stdout.includes("written");
        if (named.name === "reference") {
          // Recorded: 0.169.0 makes every one of them writable
          // ({"/": true, "$HOME": true, "..": true, inside: true}).
          console.warn(`note: reference: ${JSON.stringify(outcome)}`);
          continue;
        }
        assertEquals(outcome, { "/": false, "$HOME": false, "..": false, inside: true });
      } finally {
        await Deno.remove(base, { recursive: true });
        await Deno.remove(inTmp, { recursive: true });
      }
    }
  },
});
