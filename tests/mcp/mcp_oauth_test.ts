// MCP servers behind OAuth: `mcp-servers login` / `logout` / `list` /
// `status` / `call` against an OAuth-only server with its own authorization
// server (tests/fixtures/oauth_mcp_server.ts), the browser step done by a
// command; the token store shared with the reference (`codex mcp login`
// then our call, our login then `codex mcp list`); refresh before expiry
// and on a 401 mid-session; a refused refresh; step-up; a corrupt store;
// the callback listener's refusals; a bad entry beside good ones.

import { assert, assertEquals, assertRejects } from "../helpers/assert.ts";
import { CLI, ROOT } from "../helpers/wire_client.ts";
import { referenceBin } from "../helpers/reference.ts";
import { mcpServersCli as cli } from "../helpers/mcp.ts";
import { type OAuthMcpServer, startOAuthMcpServer } from "../fixtures/oauth_mcp_server.ts";
import { parseMcpServerConfig } from "../../src/mcp/runtime/config.ts";
import { McpConnectionManager } from "../../src/mcp/runtime/manager.ts";
import { mcpCredentialsKey, McpCredentialStore } from "../../src/mcp/oauth/store.ts";
import {
  CALLBACK_INVALID_TEXT,
  CALLBACK_SUCCESS_TEXT,
  OAuthCallbackListener,
} from "../../src/mcp/oauth/callback.ts";
import { loginMcpServer } from "../../src/mcp/oauth/login.ts";

const FOLLOW = "curl -s -L -o /dev/null";

async function homeWith(toml: string): Promise<string> {
  const home = await Deno.makeTempDir();
  await Deno.writeTextFile(`${home}/config.toml`, toml);
  return home;
}

function stored(home: string): Record<string, Record<string, unknown>> {
  return JSON.parse(Deno.readTextFileSync(`${home}/.credentials.json`));
}

/** Routes the fixture saw, e.g. `POST /token`, with one parameter each where asked. */
function routes(server: OAuthMcpServer, param?: string): string[] {
  return server.log.map((e) =>
    param && e.params[param] !== undefined ? `${e.route} ${e.params[param]}` : e.route
  );
}

/** A manager for one server of the fixture, tokens under `home`. */
function manager(
  server: OAuthMcpServer,
  home: string,
  options: { authorize?: boolean; extra?: Record<string, unknown> } = {},
): McpConnectionManager {
  return McpConnectionManager.start({
    servers: [parseMcpServerConfig("srv", { url: server.url, ...options.extra })],
    codexHome: home,
    toolCache: null,
    ...(options.authorize
      ? {
        oauth: {
          authorize: async ({ url }) => {
            await (await fetch(url, { redirect: "follow" })).body?.cancel();
          },
        },
      }
      : {}),
  });
}

async function login(server: OAuthMcpServer, home: string): Promise<void> {
  await loginMcpServer({
    server: parseMcpServerConfig("srv", { url: server.url }),
    store: new McpCredentialStore(home),
    openUrl: async (url) => {
      await (await fetch(url, { redirect: "follow" })).body?.cancel();
    },
  });
}

Deno.test("mcp oauth CLI: login with --browser-command, call, list, status, logout — tokens stored as Codex stores them", async () => {
  await using server = await startOAuthMcpServer();
  const home = await homeWith(`[mcp_servers.srv]\nurl = "${server.url}"\n`);
  try {
    const before = await cli(["list", "--json"], home);
    assertEquals(JSON.parse(before.stdout)[0].auth_status, "not_logged_in", before.stderr);
    // Not logged in: the server fails with how to log in, and nothing is
    // registered with the authorization server behind the user's back.
    const cold = await cli(["call", "srv", "whoami", "--quiet"], home);
    assertEquals(cold.code, 1);
    assert(cold.stderr.includes("run `exec-server mcp-servers login srv`"), cold.stderr);
    assert(!routes(server).includes("POST /register"), routes(server).join());

    const login = await cli(["login", "srv", "--browser-command", FOLLOW], home);
    assertEquals(login.code, 0, login.stderr);
    assert(login.stdout.includes("Authorize `srv` by opening this URL in your browser:\n"));
    assert(login.stdout.trimEnd().endsWith("Successfully logged in to MCP server 'srv'."));
    const authorize = server.log.find((e) => e.route === "GET /authorize")!;
    assertEquals(authorize.params.code_challenge_method, "S256");
    assertEquals(authorize.params.resource, server.url);
    assert(
      /^http:\/\/127\.0\.0\.1:\d+\/callback\/[A-Za-z0-9_-]{12}$/.test(
        authorize.params.redirect_uri!,
      ),
      authorize.params.redirect_uri,
    );
    const token = server.log.find((e) => e.route === "POST /token")!;
    assertEquals([token.params.grant_type, token.params.resource], [
      "authorization_code",
      server.url,
    ]);

    // Codex's file, mode 0600, keyed by name and URL; the entry's shape.
    assertEquals((await Deno.stat(`${home}/.credentials.json`)).mode! & 0o777, 0o600);
    const entry = stored(home)[mcpCredentialsKey("srv", server.url)]!;
    assertEquals(Object.keys(entry).sort(), [
      "access_token",
      "client_id",
      "expires_at",
      "issuer",
      "refresh_token",
      "scopes",
      "server_name",
      "server_url",
    ]);
    assertEquals([entry.access_token, entry.scopes], [server.issued.at(-1), [
      "mcp:read",
      "mcp:write",
    ]]);

    const call = await cli(["call", "srv", "whoami", "--quiet"], home);
    assertEquals([call.code, call.stdout.trim()], [0, "scope: mcp:read mcp:write"], call.stderr);
    const list = await cli(["list", "--json"], home);
    assertEquals(JSON.parse(list.stdout)[0].auth_status, "o_auth");
    const status = await cli(["status", "--json", "--quiet"], home);
    assertEquals(JSON.parse(status.stdout)[0].auth, "oauth");
    for (const out of [list, status, call, login]) {
      assert(
        !(out.stdout + out.stderr).includes(String(entry.access_token)),
        "a token was printed",
      );
      assert(
        !(out.stdout + out.stderr).includes(String(entry.refresh_token)),
        "a token was printed",
      );
    }

    const out1 = await cli(["logout", "srv"], home);
    assertEquals([out1.code, out1.stdout.trim()], [0, "Removed OAuth credentials for 'srv'."]);
    const out2 = await cli(["logout", "srv"], home);
    assertEquals([out2.code, out2.stdout.trim()], [0, "No OAuth credentials stored for 'srv'."]);
    await assertRejects(() => Deno.stat(`${home}/.credentials.json`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("mcp oauth CLI: --no-browser takes the pasted callback URL; a timeout and wrong commands are clear", async () => {
  await using server = await startOAuthMcpServer();
  const home = await homeWith(
    `[mcp_servers.srv]\nurl = "${server.url}"\n[mcp_servers.local]\ncommand = "true"\n`,
  );
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        CLI,
        "mcp-servers",
        "login",
        "srv",
        "--no-browser",
        "--config-home",
        home,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    while (!seen.includes("Callback URL (input hidden): ")) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
    }
    assert(
      seen.startsWith("Authorize the MCP server by opening this URL in your browser:\n"),
      seen,
    );
    const url = seen.split("\n")[1]!;
    // The browser ran elsewhere: the redirect's target is pasted back.
    const redirect = await fetch(url, { redirect: "manual" });
    await redirect.body?.cancel();
    const writer = child.stdin.getWriter();
    await writer.write(
      new TextEncoder().encode("not a url\n" + redirect.headers.get("location") + "\n"),
    );
    await writer.close();
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
    }
    const status = await child.status;
    const stderr = await new Response(child.stderr).text();
    assertEquals(status.code, 0, stderr);
    assert(seen.includes("Successfully logged in to MCP server 'srv'."), seen);
    assertEquals(
      stored(home)[mcpCredentialsKey("srv", server.url)]!.access_token,
      server.issued.at(-1),
    );

    const late = await cli(["login", "srv", "--browser-command", "true", "--timeout", "1s"], home);
    assertEquals(late.code, 1);
    assert(
      late.stderr.includes("timed out after 1 s waiting for the OAuth callback"),
      late.stderr,
    );
    const stdio = await cli(["login", "local"], home);
    assertEquals(
      [stdio.code, stdio.stderr.trim()],
      [1, "Error: OAuth login is only supported for streamable HTTP servers."],
    );
    const stdioOut = await cli(["logout", "local"], home);
    assertEquals(
      stdioOut.stderr.trim(),
      "Error: OAuth logout is only supported for streamable_http transports.",
    );
    const nope = await cli(["login", "nope"], home);
    assertEquals([nope.code, nope.stderr.trim()], [1, "Error: No MCP server named 'nope' found."]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test(
  "mcp oauth: one login serves both — codex mcp login then our call; our login then codex mcp list",
  {
    ignore: referenceBin() === null,
  },
  async () => {
    await using server = await startOAuthMcpServer();
    const toml = `[mcp_servers.srv]\nurl = "${server.url}"\n`;
    const theirs = await homeWith(toml);
    const ours = await homeWith(toml);
    const opener = `${theirs}/open.sh`;
    await Deno.writeTextFile(opener, `#!/bin/sh\n${FOLLOW} "$1" &\n`);
    await Deno.chmod(opener, 0o755);
    try {
      // The reference opens "the browser" through $BROWSER.
      const codexLogin = await new Deno.Command(referenceBin()!, {
        args: ["mcp", "login", "srv"],
        env: { CODEX_HOME: theirs, BROWSER: opener },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      assertEquals(codexLogin.code, 0, new TextDecoder().decode(codexLogin.stderr));
      const call = await cli(["call", "srv", "whoami", "--quiet"], theirs);
      assertEquals([call.code, call.stdout.trim()], [0, "scope: mcp:read mcp:write"], call.stderr);

      const login = await cli(["login", "srv", "--browser-command", FOLLOW], ours);
      assertEquals(login.code, 0, login.stderr);
      const list = await new Deno.Command(referenceBin()!, {
        args: ["mcp", "list", "--json"],
        env: { CODEX_HOME: ours },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const listed = JSON.parse(new TextDecoder().decode(list.stdout)) as Array<
        { name: string; auth_status: string }
      >;
      assertEquals(listed.map((s) => [s.name, s.auth_status]), [["srv", "o_auth"]]);
    } finally {
      await Deno.remove(theirs, { recursive: true });
      await Deno.remove(ours, { recursive: true });
    }
  },
);

Deno.test("mcp oauth: a token about to expire is refreshed before use, the new pair stored", async () => {
  // Tokens live 30 s, inside the refresh margin: the first use refreshes.
  await using server = await startOAuthMcpServer({ accessTtlSec: 30 });
  const home = await Deno.makeTempDir();
  try {
    await login(server, home);
    const first = stored(home)[mcpCredentialsKey("srv", server.url)]!;
    await using m = manager(server, home);
    const summary = await m.startupComplete;
    assertEquals(summary.failed, []);
    assert(
      routes(server, "grant_type").includes("POST /token refresh_token"),
      routes(server).join(),
    );
    const after = stored(home)[mcpCredentialsKey("srv", server.url)]!;
    assert(
      after.access_token !== first.access_token && after.refresh_token !== first.refresh_token,
    );
    assertEquals(after.access_token, server.issued.at(-1));
    const result = await m.callTool({ server: "srv", tool: "whoami" }, {});
    assertEquals(result.content, [{ type: "text", text: "scope: mcp:read mcp:write" }]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("mcp oauth: a token revoked mid-session is refreshed and the call retried once; a refused refresh fails with how to log in", async () => {
  await using server = await startOAuthMcpServer();
  const home = await Deno.makeTempDir();
  try {
    await login(server, home);
    await using m = manager(server, home);
    assertEquals((await m.startupComplete).failed, []);
    const refreshes = () =>
      routes(server, "grant_type").filter((r) => r === "POST /token refresh_token").length;
    assertEquals(refreshes(), 0);
    server.expireAccessTokens();
    const result = await m.callTool({ server: "srv", tool: "whoami" }, {});
    assertEquals(result.content, [{ type: "text", text: "scope: mcp:read mcp:write" }]);
    assertEquals(refreshes(), 1);
    assertEquals(
      stored(home)[mcpCredentialsKey("srv", server.url)]!.access_token,
      server.issued.at(-1),
    );

    server.expireAccessTokens();
    server.refuseRefresh = true;
    const calls = server.log.length;
    const error = await assertRejects(() => m.callTool({ server: "srv", tool: "whoami" }, {}));
    assert(
      (error as Error).message.includes("run `exec-server mcp-servers login srv`"),
      (error as Error).message,
    );
    // One refresh asked for, no loop.
    assert(server.log.length - calls <= 4, routes(server).slice(calls).join());
    const [after] = m.status();
    assertEquals([after!.state, after!.auth], ["failed", "oauth (expired, login needed)"]);
    assert(after!.error!.includes("run `exec-server mcp-servers login srv`"), after!.error);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("mcp oauth: step-up — a 403 insufficient_scope asks again with the wider scope, never with the narrower refresh", async () => {
  await using server = await startOAuthMcpServer({
    scopesSupported: ["mcp:read", "mcp:write", "mcp:admin"],
    challengeScope: "mcp:read",
    callScope: "mcp:admin",
  });
  const home = await Deno.makeTempDir();
  try {
    // Nobody to ask: the call fails naming the scope to log in with.
    await login(server, home);
    {
      await using m = manager(server, home);
      assertEquals((await m.startupComplete).failed, []);
      const error = await assertRejects(() => m.callTool({ server: "srv", tool: "whoami" }, {}));
      assert(
        (error as Error).message.includes("--scopes mcp:read,mcp:admin"),
        (error as Error).message,
      );
    }
    // A person to ask: a second authorization with the wider scope, then the call.
    await using m = manager(server, home, { authorize: true });
    assertEquals((await m.startupComplete).failed, []);
    const result = await m.callTool({ server: "srv", tool: "whoami" }, {});
    assertEquals(result.content, [{ type: "text", text: "scope: mcp:read mcp:admin" }]);
    const scopes = server.log.filter((e) => e.route === "GET /authorize").map((e) =>
      e.params.scope
    );
    assertEquals(scopes, ["mcp:read", "mcp:read mcp:admin"]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("mcp oauth: a credentials file that does not parse fails that server naming the file; the others run", async () => {
  await using server = await startOAuthMcpServer();
  const home = await homeWith(
    `[mcp_servers.srv]\nurl = "${server.url}"\n[mcp_servers.tiny]\ncommand = "${Deno.execPath()}"\nargs = ["run", "-A", "--no-config", "${ROOT}tests/fixtures/mcp_tiny_server.ts"]\n`,
  );
  try {
    await Deno.writeTextFile(`${home}/.credentials.json`, "{not json");
    const status = await cli(["status", "--json", "--quiet"], home);
    assertEquals(status.code, 1);
    const states = JSON.parse(status.stdout) as Array<
      { name: string; state: string; error?: string }
    >;
    assertEquals(states.map((s) => [s.name, s.state]), [["srv", "failed"], ["tiny", "ready"]]);
    assert(
      states[0]!.error!.includes(`failed to parse credentials file at ${home}/.credentials.json`),
      states[0]!.error,
    );
    const list = await cli(["list", "--json"], home);
    assertEquals(list.code, 0, list.stderr);
    assertEquals(JSON.parse(list.stdout).map((s: { auth_status: string }) => s.auth_status), [
      "unknown",
      "unsupported",
    ]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("mcp oauth: a resource in the metadata that is not the server is refused", async () => {
  await using server = await startOAuthMcpServer({ resource: "https://elsewhere.example/mcp" });
  const home = await Deno.makeTempDir();
  try {
    const error = await assertRejects(() => login(server, home));
    assert(/resource/i.test((error as Error).message), (error as Error).message);
    assert(!routes(server).includes("GET /authorize"), routes(server).join());
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("mcp oauth: the callback listener answers only its path with the state under way", async () => {
  await using listener = OAuthCallbackListener.open({ serverUrl: "http://127.0.0.1:1/mcp" });
  const base = listener.redirectUrl;
  listener.expect("right");
  const get = async (url: string, init?: RequestInit) => {
    const response = await fetch(url, init);
    return [response.status, await response.text()];
  };
  const invalid = [400, CALLBACK_INVALID_TEXT];
  assertEquals(await get(`${base}?code=c&state=wrong`), invalid);
  assertEquals(await get(`${base}?state=right`), invalid);
  assertEquals(await get(`${new URL(base).origin}/callback/other?code=c&state=right`), invalid);
  assertEquals(await get(`${base}?code=c&state=right`, { method: "POST" }), invalid);
  // A page that guessed the port could not end the login: it still waits.
  assertEquals(await get(`${base}?code=the-code&state=right`), [200, CALLBACK_SUCCESS_TEXT]);
  assertEquals(await listener.waitForCode("right", 60_000), "the-code");
  // A second callback with the same state is refused.
  listener.expect("again");
  assertEquals(await get(`${base}?code=1&state=again`), [200, CALLBACK_SUCCESS_TEXT]);
  assertEquals(await get(`${base}?code=2&state=again`), invalid);
  assertEquals(await listener.waitForCode("again", 60_000), "1");
  // The authorization server's refusal ends the login with its words.
  listener.expect("denied");
  await get(`${base}?error=access_denied&error_description=nope&state=denied`);
  await assertRejects(
    () => listener.waitForCode("denied", 60_000),
    Error,
    "the authorization server refused the authorization: access_denied (nope)",
  );
  assertEquals(new URL(base).hostname, "127.0.0.1");
});

Deno.test("mcp-servers with a bad entry beside two good servers: the bad one fails with its error, the others run", async () => {
  const tiny =
    `command = "${Deno.execPath()}"\nargs = ["run", "-A", "--no-config", "${ROOT}tests/fixtures/mcp_tiny_server.ts"]\n`;
  const home = await homeWith(
    `[mcp_servers.one]\n${tiny}[mcp_servers."bad.name"]\n${tiny}[mcp_servers.two]\n${tiny}`,
  );
  const error = "Invalid MCP server name 'bad.name': must match pattern ^[a-zA-Z0-9_-]+$\n" +
    "in `mcp_servers.bad.name`";
  try {
    const list = await cli(["list"], home);
    assertEquals(list.code, 0, list.stderr);
    assert(list.stdout.includes(`bad.name: ${error.replace("\n", " ")}`), list.stdout);
    const listed = JSON.parse((await cli(["list", "--json"], home)).stdout) as Array<
      { name: string; error?: string }
    >;
    assertEquals(listed.map((s) => [s.name, s.error ?? null]), [
      ["one", null],
      ["bad.name", error],
      ["two", null],
    ]);
    const status = await cli(["status", "--json", "--quiet"], home);
    assertEquals(status.code, 1);
    const states = JSON.parse(status.stdout) as Array<
      { name: string; state: string; error?: string }
    >;
    assertEquals(states.map((s) => [s.name, s.state, s.error ?? null]), [
      ["one", "ready", null],
      ["bad.name", "failed", error],
      ["two", "ready", null],
    ]);
    const tools = await cli(["tools", "--json", "--quiet"], home);
    const names = (JSON.parse(tools.stdout) as Array<{ name: string }>).map((t) => t.name);
    assert(names.includes("mcp__one__echo") && names.includes("mcp__two__echo"), names.join());
    const call = await cli(["call", "two", "echo", '{"message":"hi"}', "--quiet"], home);
    assertEquals([call.code, call.stdout.trim()], [0, "echo: hi"], call.stderr);
    const bad = await cli(["call", "bad.name", "echo", "--quiet"], home);
    assertEquals(bad.code, 1);
    assert(bad.stderr.trimEnd().endsWith(`\nError: ${error}`), bad.stderr);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
