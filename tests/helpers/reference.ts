import type { ConnectOptions } from "../../src/client/client.ts";

// The reference Codex binary, when installed: CODEX_REFERENCE_BIN, or the one
// `tests/setup.sh` (run by `deno task test`) installed and named in
// .cache/reference-bin.

/** The binary `tests/setup.sh` installed, or undefined. */
function installedReference(): string | undefined {
  try {
    const file = new URL("../../.cache/reference-bin", import.meta.url);
    return Deno.readTextFileSync(file).trim() || undefined;
  } catch {
    return undefined;
  }
}

export function referenceBin(): string | null {
  const candidates = [Deno.env.get("CODEX_REFERENCE_BIN"), installedReference()];
  for (const c of candidates) {
    if (!c) continue;
    try {
      if (Deno.statSync(c).isFile) return c;
    } catch { /* missing */ }
  }
  return null;
}

/** The reference's version (`codex --version` → `0.171.0`), or null without one. */
export function referenceVersion(): string | null {
  const bin = referenceBin();
  if (!bin) return null;
  const out = new Deno.Command(bin, { args: ["--version"], stdout: "piped", stderr: "null" })
    .outputSync();
  return /(\d+\.\d+\.\d+\S*)/.exec(new TextDecoder().decode(out.stdout))?.[1] ?? null;
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

const homes: string[] = [];

/**
 * A fresh `CODEX_HOME` for the reference server (see {@linkcode scratchRoot}),
 * removed when the test file's worker unloads (every server started in it is
 * gone by then: the resource sanitizer sees to that).
 */
export function referenceHome(): string {
  if (homes.length === 0) {
    globalThis.addEventListener("unload", () => {
      for (const dir of homes.splice(0)) {
        try {
          Deno.removeSync(dir, { recursive: true });
        } catch { /* already gone */ }
      }
    });
  }
  const dir = Deno.makeTempDirSync({ dir: scratchRoot(), prefix: "codex-home-" });
  homes.push(dir);
  return dir;
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
