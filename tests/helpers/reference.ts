import type { ConnectOptions } from "../../src/client/client.ts";

// The reference Codex binary, when installed (CI sets CODEX_REFERENCE_BIN).

export function referenceBin(): string | null {
  const candidates = [
    Deno.env.get("CODEX_REFERENCE_BIN"),
    "/tmp/codexref/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
  ];
  for (const c of candidates) {
    if (!c) continue;
    try {
      if (Deno.statSync(c).isFile) return c;
    } catch { /* missing */ }
  }
  return null;
}

/**
 * A scratch directory for tests that must not live under `/tmp`: sandbox
 * policies make `/tmp` writable (so an "outside" directory there is not
 * outside), and the reference's sandbox helper, which it keeps in
 * `CODEX_HOME`, is not reachable from its sandboxes there. The repository's
 * `.cache/`, or `~/.cache/exec-server-tests` when the checkout itself is
 * under `/tmp`.
 */
export function scratchRoot(): string {
  const repo = new URL("../../", import.meta.url).pathname;
  const base = repo.startsWith("/tmp/")
    ? `${Deno.env.get("HOME") ?? "/root"}/.cache/exec-server-tests/`
    : `${repo}.cache/`;
  Deno.mkdirSync(base, { recursive: true });
  return base;
}

/** A fresh `CODEX_HOME` for the reference server (see {@linkcode scratchRoot}). */
export function referenceHome(): string {
  return Deno.makeTempDirSync({ dir: scratchRoot(), prefix: "codex-home-" });
}

/**
 * The stdio servers a portable client test runs against: ours, and the
 * reference when installed (a visible note otherwise).
 */
export function clientTargets(): Array<[string, ConnectOptions]> {
  const cli = new URL("../../cli.ts", import.meta.url).pathname;
  const list: Array<[string, ConnectOptions]> = [[
    "ours",
    {
      command: {
        program: Deno.execPath(),
        args: ["run", "-A", cli, "serve", "--listen", "stdio", "--log-level", "error"],
      },
    },
  ]];
  const ref = referenceBin();
  if (ref) {
    list.push(["reference", {
      command: {
        program: ref,
        args: ["exec-server", "--listen", "stdio"],
        env: { CODEX_HOME: referenceHome() },
      },
    }]);
  } else {
    console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");
  }
  return list;
}
