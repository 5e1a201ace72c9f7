// What a hostile or careless client sends: exact integers, prototype names,
// null members, byte-order marks, a __proto__ member. Side by side with
// the reference.

import { assertEquals, assertMatch, assertStringIncludes } from "../helpers/assert.ts";
import { spawnStdioServer, webSocketClient } from "../helpers/wire_client.ts";
import { effectiveDomains } from "../../src/proxy/config.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { b64, type Json, outcome, same, sideBySide, u } from "../helpers/side_by_side.ts";

const PROTOTYPE_NAMES = [
  "constructor",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "isPrototypeOf",
  "__defineGetter__",
  "__proto__",
];

Deno.test("method names of Object.prototype are unknown methods (-32601), before and after initialize, as the reference", async () => {
  const seen = same(
    await sideBySide(async (c) => {
      const out = [];
      for (const method of PROTOTYPE_NAMES) out.push(outcome(await c.call(method, {})));
      return out;
    }),
  );
  for (const [i, e] of seen.entries()) {
    assertEquals(e.code, -32601);
    assertStringIncludes(e.message, `\`${PROTOTYPE_NAMES[i]}\``);
  }
  // Before initialize too (ours; the reference answers the same way).
  await using s = spawnStdioServer(["serve", "--listen", "stdio", "--log-level", "error"]);
  for (const method of PROTOTYPE_NAMES) {
    assertEquals((await s.client.call(method)).error.code, -32601);
  }
});

Deno.test("integers are exact over the whole u64 range (waits, offsets), with the reference's answers", async () => {
  const seen = same(
    await sideBySide(async (c, d) => {
      Deno.writeTextFileSync(`${d}/f`, "data");
      const raw = async (text: string) => {
        const id = Math.floor(Math.random() * 1e9);
        await c.send(text.replace("ID", String(id)));
        return outcome(await c.take((m) => m.id === id));
      };
      await c.request("fs/open", { path: u(`${d}/w`), mode: "replace", handleId: "w" });
      // A fresh handle per read: the reference drops a handle after a failed read.
      let handles = 0;
      const read = async (offset: string) => {
        const handleId = `r${handles++}`;
        await c.request("fs/open", { path: u(`${d}/f`), mode: "read", handleId });
        return await raw(
          `{"jsonrpc":"2.0","id":ID,"method":"fs/readBlock","params":{"handleId":"${handleId}","offset":${offset},"len":4}}`,
        );
      };
      const write = (offset: string) =>
        raw(
          `{"jsonrpc":"2.0","id":ID,"method":"fs/writeBlock","params":{"handleId":"w","offset":${offset},"chunk":"eA=="}}`,
        );
      return {
        wait: await raw(
          `{"jsonrpc":"2.0","id":ID,"method":"process/read","params":{"processId":"none","waitMs":18446744073709551615}}`,
        ),
        maxBytes: await raw(
          `{"jsonrpc":"2.0","id":ID,"method":"process/read","params":{"processId":"none","maxBytes":18446744073709551615}}`,
        ),
        beyond: await raw(
          `{"jsonrpc":"2.0","id":ID,"method":"process/read","params":{"processId":"none","waitMs":18446744073709551616}}`,
        ),
        reads: [
          await read("2"),
          await read("9007199254740992"),
          await read("9007199254740993"),
          await read("9223372036854775803"),
          await read("9223372036854775804"),
          await read("18446744073709551615"),
          await read("-1"),
        ],
        // The range error first: it does not poison our handle (EFBIG does).
        writes: [await write("18446744073709551615"), await write("9007199254740993")],
      };
    }),
  );
  assertEquals(seen.wait, { code: -32600, message: "unknown process id none" });
  assertEquals(seen.beyond, { code: -32602, message: "invalid number" });
  assertEquals(seen.reads.slice(0, 4), [
    { chunk: b64("ta"), eof: true },
    { chunk: "", eof: true },
    { chunk: "", eof: true },
    { chunk: "", eof: true },
  ]);
  // A range that ends past 2^63 - 1 (`off_t`) is invalid, as `pread` says.
  const einval = { code: -32600, message: "Invalid argument (os error 22)" };
  assertEquals(seen.reads.slice(4, 6), [einval, einval]);
  assertEquals(seen.reads[6], { code: -32602, message: "invalid number" });
  assertEquals(seen.writes[1], { code: -32603, message: "File too large (os error 27)" });
});

Deno.test("null where serde wants a value, [] for unit params, and a byte-order mark are refused as by the reference", async () => {
  const seen = same(
    await sideBySide(async (c, d) => {
      Deno.writeTextFileSync(`${d}/f`, "x");
      const start = (extra: Json) => ({
        processId: crypto.randomUUID(),
        argv: ["true"],
        cwd: u(d),
        env: {},
        tty: false,
        arg0: null,
        ...extra,
      });
      const http = (extra: Json) => ({
        method: "GET",
        url: "http://127.0.0.1:9/",
        requestId: crypto.randomUUID(),
        ...extra,
      });
      const calls: Array<[string, Json]> = [
        ["http/request", http({ headers: null })],
        ["http/request", http({ redirectPolicy: null })],
        ["http/request", http({ streamResponse: null })],
        ["environment/status", []],
        ["environment/info", []],
        ["process/start", start({ pipeStdin: null })],
        ["process/start", start({ enforceManagedNetwork: null })],
        ["fs/open", { path: u(`${d}/f`), handleId: "m", mode: null }],
        // Option members: null is absent.
        ["fs/readFile", { path: u(`${d}/f`), followSymlinks: null }],
        ["fs/createDirectory", { path: u(`${d}/sub`), recursive: null }],
      ];
      const out = [];
      for (const [method, params] of calls) out.push(outcome(await c.call(method, params)));
      await c.send('\uFEFF{"jsonrpc":"2.0","id":4242,"method":"environment/status"}');
      out.push(outcome(await c.take((m) => m.id === 4242 || m.id === -1)));
      return out;
    }),
  );
  assertEquals(seen.slice(0, 8).map((e: Json) => e.message), [
    "invalid type: null, expected a sequence",
    "invalid type: null, expected string or map",
    "invalid type: null, expected a boolean",
    "invalid type: sequence, expected unit",
    "invalid type: sequence, expected unit",
    "invalid type: null, expected a boolean",
    "invalid type: null, expected a boolean",
    "invalid type: null, expected string or map",
  ]);
  assertEquals(seen[8], { dataBase64: b64("x") });
  assertEquals(seen[9], {});
  assertMatch(
    seen[10].message,
    /^failed to parse JSON-RPC message .*expected value at line 1 column 1$/,
  );
});

Deno.test("a WebSocket text frame starting with a byte-order mark is a parse error, as on stdio", async () => {
  await using server = new ExecServer({ logger: nullLogger });
  await using listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  const c = await webSocketClient(listener.url);
  try {
    await c.send(
      '\uFEFF{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"t"}}',
    );
    const error = (await c.take((m) => m.id === -1)).error;
    assertEquals(error.code, -32600);
    assertMatch(
      error.message,
      /^failed to parse websocket JSON-RPC message .*: expected value at line 1 column 1$/,
    );
    // Without the mark the same text is fine.
    await c.initialize();
  } finally {
    await c.close();
  }
});

Deno.test("a member named __proto__ is an ordinary key (an environment variable), as the reference", async () => {
  const seen = same(
    await sideBySide(async (c, d) => {
      await c.request("process/start", {
        processId: "env",
        argv: ["/bin/sh", "-c", 'printenv __proto__; printenv constructor; echo "$A"'],
        cwd: u(d),
        env: JSON.parse('{"__proto__":"p","constructor":"c","A":"a"}'),
        tty: false,
        arg0: null,
      });
      let out = "";
      let after = 0;
      for (;;) {
        const r = await c.request("process/read", {
          processId: "env",
          afterSeq: after,
          waitMs: 2000,
        });
        for (const chunk of r.chunks) out += atob(chunk.chunk);
        after = r.nextSeq - 1;
        if (r.closed) return out;
      }
    }),
  );
  assertEquals(seen, "p\nc\na\n");
});

Deno.test("proxy domain maps keep hosts named after Object.prototype members", () => {
  // Parsed as a client's JSON is: "__proto__" an own member.
  const domains = effectiveDomains(
    JSON.parse('{"constructor":"deny","__proto__":"allow","ToString":"allow"}'),
  );
  assertEquals(Object.keys(domains).sort(), ["__proto__", "constructor", "tostring"]);
  assertEquals(domains.constructor, "deny");
  assertEquals(Object.getPrototypeOf(domains), Object.prototype);
});
