// The registry client as the seed's tests describe it: redirects are never
// followed, a validation is valid only for `{"valid": true}`, and an
// executor whose rendezvous URL is refused registers again.

import { createLogger, nullLogger } from "../../src/log/logger.ts";
import { connect } from "../../src/client/client.ts";
import { generateIdentity, SECURITY_PROFILE } from "../../src/noise/hybrid_ik.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import { loadLibc } from "../../src/util/libc.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import {
  connectHarness,
  registerExecutor,
  RegistryError,
  validateHarness,
} from "../../src/relay/wire/registry_client.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";

await loadNoiseCrypto();
// An ExecServer loads libc (FFI) on first use; it stays open for the process.
loadLibc();

function body(identity: ReturnType<typeof generateIdentity>) {
  return {
    executor_registration_id: "reg_1",
    harness_public_key: identity.publicKey,
    harness_key_authorization: "hka_1",
  };
}

function fakeRegistry(handler: (req: Request) => Response | Promise<Response>) {
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return handler(req);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test("registry client: redirects are refused, never followed", async () => {
  await using target = fakeRegistry(() => Response.json({ url: "ws://x", environment_id: "e" }));
  await using registry = fakeRegistry(() =>
    new Response(null, { status: 307, headers: { location: `${target.url}/register` } })
  );
  const identity = generateIdentity();
  await assertRejects(
    () => registerExecutor({ url: registry.url, bearer: "t" }, "e", identity.publicKey),
  );
  assertEquals(target.seen, [], "the redirect was followed");
  assertEquals(
    await validateHarness({ url: registry.url, bearer: "t" }, "e", "s1", body(identity)),
    "invalid",
  );
});

Deno.test("registry client: a validation is valid only for a literal true", async () => {
  const answers: unknown[] = [
    { valid: true },
    { valid: "true" },
    { valid: 1 },
    {},
    null,
  ];
  const statuses = [200, 200, 200, 200, 401];
  let i = 0;
  await using registry = fakeRegistry(() => {
    const at = i++;
    return Response.json(answers[at], { status: statuses[at] });
  });
  const results = [];
  for (let n = 0; n < answers.length; n++) {
    results.push(
      await validateHarness(
        { url: registry.url, bearer: "t" },
        "e",
        `s${n}`,
        body(generateIdentity()),
      ),
    );
  }
  assertEquals(results, ["valid", "invalid", "invalid", "invalid", "unauthorized"]);
});

Deno.test("remote executor: a refused rendezvous URL makes it register again", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const token = await relay.store.createToken("executor", "env-r");
  let registrations = 0;
  // A registry in front of the relay whose first URL is refused (a 4xx on
  // the upgrade: its signature is wrong).
  await using registry = fakeRegistry(async (req) => {
    const upstream = await fetch(`${relay.url}${new URL(req.url).pathname}`, {
      method: "POST",
      headers: req.headers,
      body: await req.text(),
    });
    const body = await upstream.json();
    if (new URL(req.url).pathname.endsWith("/register") && registrations++ === 0) {
      body.url = body.url.replace(/sig=[^&]+/, "sig=AAAA");
    }
    return Response.json(body, { status: upstream.status });
  });
  const server = new ExecServer();
  const executor = await RemoteExecutor.start({
    registry: { url: registry.url, bearer: token },
    environmentId: "env-r",
    server,
    logger: nullLogger,
    backoff: { initialMs: 20, maxMs: 50 },
  });
  try {
    await executor.connected;
    assertEquals(registrations >= 2, true, "registered again after the refusal");
  } finally {
    await executor.close();
    await server.close();
    await relay.close();
  }
});

Deno.test("registry client: a refusal keeps the registry's code, not its body; a non-JSON error body is previewed, bounded", async () => {
  const identity = generateIdentity();
  await using forbidden = fakeRegistry(() =>
    Response.json({ error: { code: "token_revoked", message: "the token was revoked at 09:00" } }, {
      status: 403,
    })
  );
  await assertRejects(
    () => connectHarness({ url: forbidden.url, bearer: "t" }, "e", identity.publicKey),
    RegistryError,
    "environment registry rejected the connect credentials (HTTP 403) (token_revoked)",
  );
  const page = `<html><body>${"Bad gateway. ".repeat(50_000)}</body></html>`;
  await using broken = fakeRegistry(() => new Response(page, { status: 418 }));
  const error = await assertRejects(
    () => registerExecutor({ url: broken.url, bearer: "t" }, "e", identity.publicKey),
    RegistryError,
    "environment registry register failed with HTTP 418: <html><body>Bad gateway. Bad gateway.",
  );
  assert(error.message.length < 400, `${error.message.length} characters`);
  assert(error.message.includes(" bytes)"), error.message);
});

Deno.test("registry client: what a refusal echoes back is never shown — no body on 401/403, the bearer and bearer-shaped values redacted elsewhere, odd codes dropped", async () => {
  const identity = generateIdentity();
  const bearer = "tok_5ecret_value";
  const echoes: Array<[number, () => Response, string]> = [
    [
      401,
      () =>
        Response.json({ error: { code: "bad_token", message: `token ${bearer} is unknown` } }, {
          status: 401,
        }),
      "environment registry rejected the register credentials (HTTP 401) (bad_token)",
    ],
    [
      403,
      () => new Response(`Authorization: Bearer ${bearer}`, { status: 403 }),
      "environment registry rejected the register credentials (HTTP 403)",
    ],
    [
      500,
      () =>
        Response.json({ error: { code: "internal", message: `failed for ${bearer}` } }, {
          status: 500,
        }),
      "environment registry register failed with HTTP 500 (internal): failed for [redacted]",
    ],
    [
      502,
      () =>
        new Response(
          `<pre>POST /register\nauthorization: Bearer other.jwt.value\nx: Basic dXNlcjpwdw==</pre>`,
          {
            status: 502,
          },
        ),
      "environment registry register failed with HTTP 502: <pre>POST /register authorization: Bearer [redacted] x: Basic [redacted]</pre>",
    ],
    [
      500,
      () => Response.json({ error: { code: `token ${bearer}`, message: "no" } }, { status: 500 }),
      "environment registry register failed with HTTP 500: no",
    ],
  ];
  for (const [status, answer, expected] of echoes) {
    await using registry = fakeRegistry(answer);
    const error = await assertRejects(
      () =>
        registerExecutor({ url: registry.url, bearer }, "e", identity.publicKey, {
          maxAttempts: 1,
        }),
      RegistryError,
    );
    assertEquals([error.status, error.message], [status, expected]);
    for (const secret of [bearer, "other.jwt.value", "dXNlcjpwdw=="]) {
      assert(!error.message.includes(secret), error.message);
    }
  }
});

Deno.test("remote executor: a validation refused with a body that echoes secrets — the harness is refused, the log says the status and code, never the body", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const executorToken = await relay.store.createToken("executor", "env-v");
  const harnessToken = await relay.store.createToken("harness", "env-v");
  const secret = `hka_echo_${crypto.randomUUID()}`;
  let status = 401;
  // A registry in front of the relay whose /validate refuses, echoing what it got.
  await using registry = fakeRegistry(async (req) => {
    const path = new URL(req.url).pathname;
    const text = await req.text();
    if (path.endsWith("/validate")) {
      return Response.json({
        error: {
          code: "authorization_rejected",
          message: `${secret} ${req.headers.get("authorization")} ${text}`,
        },
      }, { status });
    }
    const upstream = await fetch(`${relay.url}${path}`, {
      method: "POST",
      headers: req.headers,
      body: text,
    });
    return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
  });
  const lines: string[] = [];
  const server = new ExecServer();
  const executor = await RemoteExecutor.start({
    registry: { url: registry.url, bearer: executorToken },
    environmentId: "env-v",
    server,
    logger: createLogger({ level: "trace", write: (line) => lines.push(line) }),
    backoff: { initialMs: 20, maxMs: 50 },
  });
  try {
    await executor.connected;
    const refusals: string[] = [];
    for (status of [401, 403, 500]) {
      const error = await assertRejects(() =>
        connect({
          rendezvous: { registryUrl: relay.url, environmentId: "env-v", token: harnessToken },
          reconnect: false,
          connectTimeoutMs: 10_000,
        })
      );
      refusals.push(error.message);
      assert(!error.message.includes(secret), error.message);
      assert(!error.message.includes(executorToken), error.message);
    }
    assertStringIncludes(refusals[0]!, "rejected");
    const refused = lines.filter((l) => l.includes("remote.harness_refused")).map((l) => {
      const record = JSON.parse(l);
      return [record.status, record.code];
    });
    assertEquals(refused, [
      [401, "authorization_rejected"],
      [403, "authorization_rejected"],
      [500, "authorization_rejected"],
    ]);
    for (const line of lines) {
      assert(!line.includes(secret), line);
      assert(!line.includes(executorToken), line);
    }
  } finally {
    await executor.close();
    await server.close();
    await relay.close();
  }
});

Deno.test("registry client: register and validate send the bearer, account id, stream id and body the registry protocol names (trailing slashes trimmed, the id encoded)", async () => {
  const requests: Array<{ path: string; headers: Headers; body: unknown }> = [];
  const identity = generateIdentity();
  await using registry = fakeRegistry(async (req) => {
    const path = new URL(req.url).pathname;
    requests.push({ path, headers: req.headers, body: await req.json() });
    return path.endsWith("/register")
      ? Response.json({
        environment_id: "env/1",
        url: "wss://relay.example/executor?sig=x",
        security_profile: SECURITY_PROFILE,
        executor_registration_id: "reg_9",
      })
      : Response.json({ valid: true });
  });
  const endpoint = { url: `${registry.url}//`, bearer: "tok_1", accountId: "acct_7" };
  const registration = await registerExecutor(endpoint, "env/1", identity.publicKey);
  assertEquals(
    await validateHarness(endpoint, "env/1", "stream-3", body(identity)),
    "valid",
  );
  const [register, validate] = requests;
  assertEquals(register!.path, "/cloud/environment/env%2F1/register");
  assertEquals(register!.headers.get("authorization"), "Bearer tok_1");
  assertEquals(register!.headers.get("chatgpt-account-id"), "acct_7");
  assertEquals(register!.headers.get("content-type"), "application/json");
  assertEquals(Object.keys(register!.body as object).sort(), [
    "executor_public_key",
    "security_profile",
  ]);
  assertEquals(
    (register!.body as { executor_public_key: unknown }).executor_public_key,
    identity.publicKey,
  );
  assertEquals(
    (register!.body as { security_profile: unknown }).security_profile,
    SECURITY_PROFILE,
  );
  assertEquals(registration, {
    environmentId: "env/1",
    url: "wss://relay.example/executor?sig=x",
    executorRegistrationId: "reg_9",
  });
  assertEquals(validate!.path, "/cloud/environment/env%2F1/validate");
  assertEquals(validate!.headers.get("x-codex-noise-stream-id"), "stream-3");
  assertEquals(validate!.headers.get("authorization"), "Bearer tok_1");
  assertEquals(validate!.body, body(identity));
});
