// The official MCP conformance suite's OAuth client scenarios (auth/*),
// run against our MCP runtime (tests/fixtures/conformance_client.ts):
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
import { runConformanceClient } from "../helpers/mcp.ts";

const CLIENT = `${ROOT}tests/fixtures/conformance_client.ts`;

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

for (const scenario of SCENARIOS) {
  Deno.test(`mcp oauth conformance: auth/${scenario}`, async () => {
    const { checks, output } = await runConformanceClient(CLIENT, `auth/${scenario}`, 240_000);
    assert(checks.length > 0, output);
    assertEquals(
      checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING"),
      [],
      output,
    );
    assert(checks.some((c) => c.status === "SUCCESS"), output);
  });
}
