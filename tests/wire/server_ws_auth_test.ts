import { assert, assertEquals } from "../helpers/assert.ts";
import { memoryLogger } from "../helpers/wire_client.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { sha256, signJwt, verifyJwt, type WebSocketAuth } from "../../src/server/ws_auth.ts";
import { connectWebSocket, WebSocketHandshakeError } from "../../src/websocket/handshake.ts";

const TOKEN = "mytoken123-very-secret";
const SECRET = new TextEncoder().encode("0123456789abcdef0123456789abcdef01234567");

async function withServer(
  auth: WebSocketAuth,
  fn: (url: string, lines: string[]) => Promise<void>,
) {
  const { logger, lines } = memoryLogger("debug");
  const server = new ExecServer({ logger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0, auth });
  try {
    await fn(listener.url, lines);
  } finally {
    await listener.close();
    await server.close();
  }
}

/** Attempts an upgrade; returns 101 or the refusal's status and body. */
async function attempt(
  url: string,
  headers: Record<string, string> = {},
): Promise<[number, string]> {
  try {
    const channel = await connectWebSocket(url, { headers });
    await channel.close();
    return [101, ""];
  } catch (error) {
    assert(error instanceof WebSocketHandshakeError, String(error));
    return [error.status!, error.body!];
  }
}

Deno.test("capability token: Bearer only, case-insensitive scheme, constant-time digest check", async () => {
  const auth: WebSocketAuth = { mode: "capability-token", tokenSha256: await sha256(TOKEN) };
  await withServer(auth, async (url, lines) => {
    assertEquals(await attempt(url), [401, "missing websocket bearer token"]);
    assertEquals(await attempt(url, { authorization: "Bearer wrong" }), [
      401,
      "invalid websocket bearer token",
    ]);
    assertEquals(await attempt(url, { authorization: `Bearer ${TOKEN}` }), [101, ""]);
    assertEquals(await attempt(url, { authorization: `bearer   ${TOKEN}  ` }), [101, ""]);
    assertEquals(await attempt(url, { authorization: `Basic ${TOKEN}` }), [
      401,
      "invalid authorization header",
    ]);
    assertEquals(await attempt(url, { authorization: TOKEN }), [
      401,
      "invalid authorization header",
    ]);
    assertEquals(await attempt(url, { authorization: "Bearer" }), [
      401,
      "invalid authorization header",
    ]);
    assertEquals(await attempt(`${url}/?token=${TOKEN}`), [401, "missing websocket bearer token"]);
    const ready = await fetch(url.replace("ws://", "http://") + "/readyz");
    assertEquals(ready.status, 200);
    await ready.body?.cancel();
    assert(lines.length > 0);
    assert(
      !lines.some((l) => l.includes(TOKEN) || l.includes("wrong")),
      "tokens must never be logged",
    );
  });
});

Deno.test("signed bearer token: HS256 JWT with exp, nbf, issuer and audience", async () => {
  const auth: WebSocketAuth = {
    mode: "signed-bearer-token",
    secret: SECRET,
    issuer: "iss1",
    audience: "aud1",
    maxClockSkewSeconds: 30,
  };
  const now = Math.floor(Date.now() / 1000);
  const jwt = (
    payload: Record<string, unknown>,
    header?: Record<string, unknown>,
    secret = SECRET,
  ) => signJwt(payload, secret, header);
  await withServer(auth, async (url, lines) => {
    const bearer = async (token: string) =>
      await attempt(url, { authorization: `Bearer ${token}` });
    assertEquals(await bearer(await jwt({ exp: now + 60, iss: "iss1", aud: "aud1" })), [101, ""]);
    assertEquals(await bearer(await jwt({ exp: now + 60, iss: "iss1", aud: ["x", "aud1"] })), [
      101,
      "",
    ]);
    assertEquals(
      await bearer(await jwt({ exp: now - 10, iss: "iss1", aud: "aud1" })),
      [101, ""],
      "inside skew",
    );
    assertEquals(await bearer(await jwt({ exp: now - 100, iss: "iss1", aud: "aud1" })), [
      401,
      "expired websocket jwt",
    ]);
    assertEquals(
      await bearer(await jwt({ exp: now + 60, nbf: now + 100, iss: "iss1", aud: "aud1" })),
      [401, "websocket jwt is not valid yet"],
    );
    assertEquals(await bearer(await jwt({ exp: now + 60, iss: "other", aud: "aud1" })), [
      401,
      "websocket jwt issuer mismatch",
    ]);
    assertEquals(await bearer(await jwt({ exp: now + 60, iss: "iss1", aud: "zzz" })), [
      401,
      "websocket jwt audience mismatch",
    ]);
    assertEquals(await bearer(await jwt({ exp: now + 60, iss: "iss1" })), [
      401,
      "websocket jwt audience mismatch",
    ]);
    assertEquals(await bearer(await jwt({ iss: "iss1", aud: "aud1" })), [
      401,
      "invalid websocket jwt",
    ]);
    const wrongSecret = new TextEncoder().encode("another-secret-of-at-least-32-bytes!!");
    assertEquals(
      await bearer(await jwt({ exp: now + 60, iss: "iss1", aud: "aud1" }, undefined, wrongSecret)),
      [401, "invalid websocket jwt"],
    );
    assertEquals(
      await bearer(await jwt({ exp: now + 60, iss: "iss1", aud: "aud1" }, { alg: "HS384" })),
      [401, "invalid websocket jwt"],
    );
    // alg: none with an empty signature
    const none =
      (await jwt({ exp: now + 60, iss: "iss1", aud: "aud1" }, { alg: "none" })).split(".").slice(
        0,
        2,
      ).join(".") + ".";
    assertEquals(await bearer(none), [401, "invalid websocket jwt"]);
    assertEquals(await bearer("not.a.jwt"), [401, "invalid websocket jwt"]);
    assert(!lines.some((l) => l.includes("eyJ")), "tokens must never be logged");
  });
});

Deno.test("verifyJwt honours the configured skew", async () => {
  const auth = { mode: "signed-bearer-token" as const, secret: SECRET, maxClockSkewSeconds: 0 };
  const token = await signJwt({ exp: 1000 }, SECRET);
  assertEquals(await verifyJwt(token, auth, 999), null);
  assertEquals(await verifyJwt(token, auth, 1000), "expired websocket jwt");
  const lenient = { ...auth, maxClockSkewSeconds: 30 };
  assertEquals(await verifyJwt(token, lenient, 1029), null);
  assertEquals(await verifyJwt(token, lenient, 1030), "expired websocket jwt");
});
