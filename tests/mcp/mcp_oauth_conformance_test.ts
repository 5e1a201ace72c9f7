// The official MCP conformance suite's OAuth client scenarios (auth/*),
// run against our MCP runtime (tests/fixtures/conformance_auth_client.ts):
// discovery, registration (dynamic, client ID metadata document,
// pre-registered), PKCE, resource indicators, token endpoint
// authentication, scope selection and step-up, the 2025-03-26 fallbacks,
// offline_access, and the client-credentials extension. Judged by the
// suite's recorded checks: no FAILURE and no WARNING.
//
// Not run: auth/cross-app-access-complete-flow (the enterprise-managed
// extension, SEP-990): it exchanges an ID token from the enterprise's
// identity provider for an authorization grant; Codex takes that token from
// its own enterprise sign-in (`auth = "ema_auth"`), which this runtime does
// not have.

import { assert, assertEquals } from "../helpers/assert.ts";
import { ROOT } from "../helpers/wire_client.ts";

const CONFORMANCE = "npm:@modelcontextprotocol/conformance@0.1.16";
const CLIENT = `${ROOT}tests/fixtures/conformance_auth_client.ts`;
const CONFIG = `${ROOT}deno.test.json`;

const SCENARIOS = [
  "metadata-default",
  "metadata-var1",
  "metadata-var2",
  "metadata-var3",
  "basic-cimd",
  "scope-from-www-authenticate",
  "scope-from-scopes-supported",
  "scope-omitted-when-undefined",
  "scope-step-up",
  "scope-retry-limit",
  "token-endpoint-auth-basic",
  "token-endpoint-auth-post",
  "token-endpoint-auth-none",
  "pre-registration",
  "2025-03-26-oauth-metadata-backcompat",
  "2025-03-26-oauth-endpoint-fallback",
  "resource-mismatch",
  "offline-access-scope",
  "offline-access-not-supported",
  "client-credentials-jwt",
  "client-credentials-basic",
];

interface Check {
  id: string;
  status: string;
  description?: string;
}

function checksIn(dir: string): Check[] {
  for (const entry of Deno.readDirSync(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      const found = checksIn(path);
      if (found.length > 0) return found;
    } else if (entry.name === "checks.json") {
      return JSON.parse(Deno.readTextFileSync(path));
    }
  }
  return [];
}

for (const scenario of SCENARIOS) {
  Deno.test(`mcp oauth conformance: auth/${scenario}`, async () => {
    const dir = await Deno.makeTempDir();
    try {
      const command = [Deno.execPath(), "run", "-A", "--cached-only", "--config", CONFIG, CLIENT]
        .map((a) => `'${a}'`).join(" ");
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--cached-only",
          "--config",
          CONFIG,
          CONFORMANCE,
          "client",
          "--command",
          command,
          "--scenario",
          `auth/${scenario}`,
          "--timeout",
          "240000",
          "--output-dir",
          `${dir}/results`,
        ],
        cwd: dir,
        stdout: "piped",
        stderr: "piped",
        stdin: "null",
      }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      const checks = checksIn(`${dir}/results`);
      assert(checks.length > 0, text);
      assertEquals(
        checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING"),
        [],
        text,
      );
      assert(checks.some((c) => c.status === "SUCCESS"), text);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}
