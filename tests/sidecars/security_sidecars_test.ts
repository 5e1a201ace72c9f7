// An attacker's suite against the sidecars: request smuggling through the
// responses-proxy, escapes from `exec-server mcp --root` (a dangling link
// out, a path flipped between a directory and a link out while the tools
// use it), and web pages reaching the MCP HTTP endpoints (Origin, Host /
// DNS rebinding) whatever address they are bound to.

import { Client } from "@modelcontextprotocol/sdk/client";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { connect } from "../../src/client/client.ts";
import { inProcessTransport } from "../../src/client/in_process.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { serveExecToolsHttp } from "../../src/mcp/tool_serve.ts";
import { createExecToolServer } from "../../src/mcp/tool_server.ts";
import { sandboxSupport } from "../../src/sandbox/bwrap.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { startResponsesProxy } from "../../src/sidecars/responses_proxy.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { raw, recordingUpstream } from "../helpers/proxy.ts";
import { mcpInitialize } from "../helpers/mcp.ts";

const encoder = new TextEncoder();

Deno.test("security responses-proxy: CL+TE and conflicting lengths are refused, framing is ours", async () => {
  await using upstream = recordingUpstream();
  const proxy = await startResponsesProxy({
    authorization: encoder.encode("Bearer sk-test"),
    upstreamUrl: `${upstream.url}/v1/responses`,
    report: () => {},
  });
  try {
    const port = proxy.addr.port;
    const inner = "GET /v1/files HTTP/1.1\r\nHost: api\r\n\r\n";
    const smuggle = `POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n` +
      `Transfer-Encoding: chunked\r\n\r\n${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
    assert((await raw(port, smuggle)).startsWith("HTTP/1.1 400"));
    const twice = `POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n` +
      `Content-Length: ${2 + inner.length}\r\n\r\n{}${inner}`;
    assert((await raw(port, twice)).startsWith("HTTP/1.1 400"));
    const folded =
      `POST /v1/responses HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Content-Length: 2\r\n\r\n{}`;
    assert((await raw(port, folded)).startsWith("HTTP/1.1 400"));
    assertEquals(upstream.received, "", "nothing reached the upstream");
    // A chunked request is forwarded with our own Content-Length only.
    const chunked = await raw(
      port,
      `POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    );
    assert(chunked.startsWith("HTTP/1.1 200"), chunked);
    assertEquals(upstream.received.match(/content-length: 2\r\n/gi)?.length, 1, upstream.received);
    assert(!/transfer-encoding/i.test(upstream.received), upstream.received);
    assert(!upstream.received.includes("/v1/files"));
  } finally {
    await proxy.close();
  }
});

interface Tools extends AsyncDisposable {
  call(name: string, args: Record<string, unknown>): Promise<{ text: string; isError: boolean }>;
  root: string;
  outside: string;
}

async function rootedTools(): Promise<Tools> {
  // Both under /tmp: not among what a sandboxed file worker can see.
  const base = await Deno.realPath(await Deno.makeTempDir());
  const root = `${base}/root`;
  const outside = `${base}/outside`;
  await Deno.mkdir(root);
  await Deno.mkdir(outside);
  await Deno.writeTextFile(`${outside}/secret.txt`, "outside secret");
  const server = new ExecServer({ logger: nullLogger });
  const client = await connect({
    transport: inProcessTransport((c) => server.serve(c, "terminate")),
  });
  const tools = await createExecToolServer(client, { roots: [root] });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await tools.connect(a);
  const mcp = new Client({ name: "attacker", version: "1.0.0" });
  await mcp.connect(b);
  return {
    root,
    outside,
    async call(name, args) {
      const r = await mcp.callTool({ name, arguments: args }) as {
        content: Array<{ text?: string }>;
        isError?: boolean;
      };
      return { text: r.content.map((c) => c.text ?? "").join(""), isError: r.isError === true };
    },
    async [Symbol.asyncDispose]() {
      await mcp.close();
      await tools.close();
      await client.close();
      await server.close();
      await Deno.remove(base, { recursive: true });
    },
  };
}

const sandboxed = sandboxSupport().available;

Deno.test({
  name: "security mcp --root: a dangling symlink out never creates the outside file",
  ignore: !sandboxed,
  async fn() {
    await using t = await rootedTools();
    await Deno.symlink(`${t.outside}/target.txt`, `${t.root}/dangle`);
    const write = await t.call("write_file", { path: `${t.root}/dangle`, content: "escaped" });
    assert(write.isError, write.text);
    for (const tool of ["create_directory", "write_file"]) {
      await t.call(tool, { path: `${t.root}/dangle/x`, content: "x" });
    }
    const names = [];
    for await (const e of Deno.readDir(t.outside)) names.push(e.name);
    assertEquals(names, ["secret.txt"]);
    // Inside the root, work goes on.
    assert(!(await t.call("write_file", { path: `${t.root}/ok.txt`, content: "fine" })).isError);
    assertEquals(await Deno.readTextFile(`${t.root}/ok.txt`), "fine");
  },
});

Deno.test({
  name: "security mcp --root: a path flipped between a directory and a link out never escapes",
  ignore: !sandboxed,
  async fn() {
    await using t = await rootedTools();
    const race = `${t.root}/race`;
    await Deno.mkdir(`${t.root}/race-dir`);
    await Deno.writeTextFile(`${t.root}/race-dir/secret.txt`, "inside");
    await Deno.symlink(t.outside, `${t.root}/race-link`);
    // Another process flips the path as fast as it can (true concurrency
    // with the server's check and use).
    const flipper = new Deno.Command("bash", {
      args: [
        "-c",
        'cd "$0" && while :; do mv -T race-link race; mv -T race race-link; ' +
        "mv -T race-dir race; mv -T race race-dir; done 2>/dev/null",
        t.root,
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const reads: string[] = [];
    try {
      for (let i = 0; i < 150; i++) {
        await t.call("write_file", { path: `${race}/x${i}.txt`, content: "escaped" });
        const read = await t.call("read_text_file", { path: `${race}/secret.txt` });
        if (!read.isError) reads.push(read.text);
      }
    } finally {
      flipper.kill("SIGKILL");
      await flipper.status;
    }
    const names = [];
    for await (const e of Deno.readDir(t.outside)) names.push(e.name);
    assertEquals(names, ["secret.txt"], "a write landed outside");
    assert(!reads.includes("outside secret"), "an outside file was read");
  },
});

Deno.test("security mcp --root: refused without a sandboxing server unless checking only is accepted", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const client = await connect({
    transport: inProcessTransport((c) => server.serve(c, "terminate")),
  });
  try {
    // A server that cannot sandbox file access, as a client sees it.
    const info = client.environmentInfo!;
    const capabilities = info.capabilities as unknown as Record<string, boolean>;
    const saved = capabilities.sandboxedFileStreaming!;
    capabilities.sandboxedFileStreaming = false;
    try {
      await assertRejects(
        () => createExecToolServer(client, { roots: ["/tmp"] }),
        Error,
        "sandboxed file access",
      );
      const tools = await createExecToolServer(client, {
        roots: ["/tmp"],
        rootsWithoutSandbox: true,
      });
      await tools.close();
    } finally {
      capabilities.sandboxedFileStreaming = saved;
    }
  } finally {
    await client.close();
    await server.close();
  }
});

Deno.test("security mcp --http: web pages are refused on every bind address (Origin, Host)", async () => {
  const server = new ExecServer({ logger: nullLogger });
  const client = await connect({
    transport: inProcessTransport((c) => server.serve(c, "terminate")),
  });
  const hosts = ["127.0.0.1", "127.0.0.2", "0.0.0.0"];
  try {
    for (const hostname of hosts) {
      const http = await serveExecToolsHttp(client, { port: 0, hostname, logger: nullLogger });
      try {
        const port = http.addr.port;
        const target = hostname === "0.0.0.0" ? "127.0.0.1" : hostname;
        const init = JSON.stringify(mcpInitialize(1, "page"));
        const post = (headers: Record<string, string>) =>
          raw(
            port,
            `POST /mcp HTTP/1.1\r\n${
              Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")
            }content-type: application/json\r\naccept: application/json, text/event-stream\r\n` +
              `content-length: ${init.length}\r\nconnection: close\r\n\r\n${init}`,
            undefined,
            target,
          );
        const evil = await post({ host: `${target}:${port}`, origin: "http://evil.example" });
        assert(evil.startsWith("HTTP/1.1 403"), `${hostname}: ${evil}`);
        assertStringIncludes(evil, "origin http://evil.example is not allowed");
        const nullOrigin = await post({ host: `${target}:${port}`, origin: "null" });
        assert(nullOrigin.startsWith("HTTP/1.1 403"), `${hostname}: ${nullOrigin}`);
        const rebound = await post({ host: `evil.example:${port}` });
        assert(rebound.startsWith("HTTP/1.1 403"), `${hostname}: ${rebound}`);
        assertStringIncludes(rebound, "host evil.example");
        // A local client (no Origin, an IP or localhost Host) is served.
        for (const host of [`${target}:${port}`, `localhost:${port}`]) {
          const fine = await post({ host, origin: `http://localhost:${port}` });
          assert(fine.startsWith("HTTP/1.1 200"), `${hostname} ${host}: ${fine}`);
        }
      } finally {
        await http.close();
      }
    }
  } finally {
    await client.close();
    await server.close();
  }
});
