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
 * A `CODEX_HOME` for the reference server outside `/tmp` (its sandbox
 * helper lives there and `/tmp` is replaced inside its sandboxes).
 */
export function referenceHome(): string {
  const base = new URL("../../.cache/", import.meta.url).pathname;
  Deno.mkdirSync(base, { recursive: true });
  return Deno.makeTempDirSync({ dir: base, prefix: "codex-home-" });
}
