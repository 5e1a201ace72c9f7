import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { inProcessStdio, memoryLogger, startProcess } from "../helpers/wire_client.ts";
import { VERSION } from "../../src/version.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";

Deno.test("gating: every method but initialize waits for the handshake", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  const before = await c.call("process/read", { processId: "x" });
  assertEquals(before.error, {
    code: -32600,
    message: "client must call initialize before using exec methods",
  });
  const families: Array<[string, unknown, string]> = [
    ["fs/readFile", { path: "file:///etc/hostname" }, "filesystem"],
    ["environment/info", {}, "environment info"],
    ["environment/status", {}, "environment status"],
    ["http/request", { method: "GET", url: "http://127.0.0.1:1/", requestId: "r" }, "http"],
  ];
  for (const [method, params, family] of families) {
    const r = await c.call(method, params);
    assertEquals(r.error.message, `client must call initialize before using ${family} methods`);
  }
  // Like the reference, params are validated before the handshake gate.
  assertEquals((await c.call("fs/readFile", {})).error.message, "missing field `path`");
  const init = await c.call("initialize", { clientName: "probe" });
  assert(/^[0-9a-f-]{36}$/.test(init.result.sessionId));
  const early = await c.call("fs/readFile", { path: "file:///etc/hostname" });
  assertEquals(early.error, {
    code: -32600,
    message: "client must send initialized before using filesystem methods",
  });
  const again = await c.call("initialize", { clientName: "again" });
  assertEquals(again.error, {
    code: -32600,
    message: "initialize may only be sent once per connection",
  });
  await c.send({ method: "initialized", params: {} });
  assertEquals(await c.request("environment/status"), { status: "ready" });
  // Sending initialized again is harmless.
  await c.send({ method: "initialized" });
  assertEquals(await c.request("environment/status"), { status: "ready" });
});

Deno.test("a failed initialize may be retried; bad initialize params are -32602", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  const bad = await c.call("initialize", {});
  assertEquals(bad.error, { code: -32602, message: "missing field `clientName`" });
  const wrongType = await c.call("initialize", { clientName: 5 });
  assertEquals(wrongType.error, {
    code: -32602,
    message: "invalid type: number, expected a string",
  });
  const unknown = await c.call("initialize", { clientName: "x", resumeSessionId: "nope" });
  assertEquals(unknown.error, { code: -32600, message: "unknown session id nope" });
  const ok = await c.initialize();
  assert(typeof ok.sessionId === "string");
});

Deno.test("unknown methods, unknown notifications and bad params", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.initialize();
  const unknown = await c.call("process/resizePty", {});
  assertEquals(unknown.error, {
    code: -32601,
    message: "exec-server stub does not implement `process/resizePty` yet",
  });
  // Unknown notifications (and server notification names) are ignored: the
  // connection stays open (the reference closes it).
  await c.send({ method: "foo/bar", params: {} });
  await c.send({ method: "process/output", params: {} });
  await c.send({ id: 999, result: {} });
  assertEquals(await c.request("environment/status"), { status: "ready" });
  const extra = await c.call("environment/status", { extra: 1 });
  assertEquals(extra.error, { code: -32602, message: "invalid type: map, expected unit" });
  assertEquals(await c.request("environment/status", null), { status: "ready" });
  assertEquals(await c.request("environment/status", {}), { status: "ready" });
});

Deno.test("parse errors answer with id -1 and keep the connection", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.send("{not json}");
  const e1 = await c.take((m) => m.id === -1);
  assertEquals(e1.error, {
    code: -32600,
    message:
      "failed to parse JSON-RPC message from exec-server stdio: key must be a string at line 1 column 2",
  });
  await c.send("[1,2,3]");
  assertStringIncludes(
    (await c.take((m) => m.id === -1)).error.message,
    "expected a JSON-RPC object",
  );
  await c.send('{"id":5}');
  assertStringIncludes((await c.take((m) => m.id === -1)).error.message, "missing field `error`");
  await c.send('{"id":"abc","method":"initialize","params":{"clientName":"x"}}');
  assert((await c.take((m) => m.id === "abc")).result.sessionId);
});

Deno.test("environment/info describes this machine with file: URIs", async () => {
  await using s = inProcessStdio();
  const info = (await s.client.initialize()).environmentInfo;
  assertEquals(info.executorVersion, VERSION);
  assertEquals(info.prependPathDirs, []); // no helper programs shipped
  assertEquals(info.platformOs, "linux");
  assertEquals(info.cwd, `file://${Deno.cwd()}`);
  assert(info.userHomeDir.startsWith("file:///"));
  assert(info.tempDir.startsWith("file:///"));
  assert(Array.isArray(info.temporaryDirectories));
  assert(info.shell.path.startsWith("/") && info.shell.name.length > 0);
  assertEquals(info.shell.name, info.shell.path.slice(info.shell.path.lastIndexOf("/") + 1));
  assertEquals(await s.client.request("environment/info"), info);
  // The sandbox is claimed exactly when bubblewrap works here, and says why not.
  const sandbox = sandboxSupport();
  assertEquals(info.sandbox, {
    available: sandbox.available,
    mechanism: "bubblewrap",
    reason: sandbox.reason,
  });
  assertEquals(info.capabilities.linuxSandbox, sandbox.available);
  assertEquals(info.capabilities.sandboxedFileStreaming, sandbox.available);
  // Codex-specific features not built yet are not claimed.
  assertEquals(info.capabilities.windowsMxc, false);
  assertEquals(info.capabilities.credentialMaskingCustomProviders, true);
  assertEquals(info.capabilities.credentialMasking, true);
  assertEquals(info.capabilities.environmentConfigRead, true);
  assertEquals(info.capabilities.networkProxyLaunch, true);
  assertEquals(info.capabilities.networkProxyReviewDomains, true);
  assertEquals(info.capabilities.shellSnapshotV2, true);
  assertEquals(info.capabilities.capabilityDiscoveryV2, true);
  assertEquals(info.capabilities.capabilityDiscoverySandbox, sandbox.available);
});

Deno.test("the version constant matches deno.json", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../../deno.json", import.meta.url)));
  assertEquals(VERSION, config.version);
});

Deno.test("stdio EOF ends the connection; in-flight answers are still written", async () => {
  await using s = inProcessStdio();
  const c = s.client;
  await c.send({ id: 1, method: "initialize", params: { clientName: "x" } });
  await c.send({ method: "initialized" });
  await c.send({ id: 2, method: "environment/status" });
  await s.closeInput();
  const info = await s.served;
  assertEquals((info as { reason: string }).reason, "eof");
  await c.ended;
  assert(c.received.some((m) => m.id === 2 && m.result?.status === "ready"));
});

Deno.test("observability: one debug event per request, an info event per process exit", async () => {
  const { logger, lines } = memoryLogger("debug");
  await using s = inProcessStdio({ logger });
  const c = s.client;
  await c.initialize();
  await c.call("fs/getMetadata", { path: "file:///nonexistent-observability" });
  await startProcess(c, "obs", ["sh", "-c", "exit 4"]);
  await c.notification("process/closed", (p) => p.processId === "obs");
  const events = lines.map((l) => JSON.parse(l));
  const requests = events.filter((e) => e.event === "jsonrpc.request");
  const failed = requests.find((e) => e.method === "fs/getMetadata")!;
  assertEquals([failed.outcome, typeof failed.durationMs, typeof failed.id], [
    -32004,
    "number",
    "number",
  ]);
  assertEquals(requests.find((e) => e.method === "process/start")!.outcome, "ok");
  const exit = events.find((e) => e.event === "process.exited")!;
  assertEquals([exit.level, exit.processId, exit.exitCode], ["info", "obs", 4]);
});
