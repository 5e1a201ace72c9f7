// Large messages in (issue 48): a long base64 string is decoded from the
// message's bytes while it is scanned, and the rest parsed strictly with a
// marker. Every answer must be what the general path gives: the decoder is
// checked against the strict decoder on valid and mutated input, the whole
// message against decodeMessage on generated envelopes (and the fast path
// must actually be taken), and uploads over stdio and over a WebSocket whose
// client fragments and masks as it likes arrive byte-exact and in order.

import { assert, assertEquals } from "../helpers/assert.ts";
import { inProcessStdio, spawnCommandServer, spawnStdioServer } from "../helpers/wire_client.ts";
import { referenceBin, referenceHome } from "../helpers/reference.ts";
import { startWsServer } from "../helpers/ws_server.ts";
import {
  decodeBase64String,
  decodeLargeMessage,
  longStringStart,
} from "../../src/jsonrpc/large_message.ts";
import { Base64Part, decodeMessage } from "../../src/jsonrpc/message.ts";
import { DEFAULT_JSON_LIMITS } from "../../src/jsonrpc/strict_json.ts";
import { decodeStrictBase64 } from "../../src/protocol/decode.ts";
import { BASE64_MEMBERS } from "../../src/protocol/spec.ts";
import { strictUtf8Decoder } from "../../src/util/utf8.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const decodeUtf8 = strictUtf8Decoder();
const ALPHABET = /^[A-Za-z0-9+/=]*$/;

/** A seeded generator (xorshift), so a failure reproduces. */
function rng(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

function randomBytes(n: number, next: (n: number) => number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = next(256);
  return out;
}

/** What the string's contents up to the first quote are, by the strict decoder: bytes, or null. */
function oracle(text: string): Uint8Array | null {
  const end = text.indexOf('"');
  if (end < 0) return null;
  const contents = text.slice(0, end);
  if (!ALPHABET.test(contents)) return null;
  const decoded = decodeStrictBase64(contents);
  return decoded instanceof Uint8Array ? decoded : null;
}

Deno.test("large messages: the sliced decoder agrees with the strict decoder on valid and mutated base64", () => {
  const next = rng(48);
  const mutations = [
    "!",
    "\\",
    '"',
    " ",
    "=",
    "==",
    "\u00e9",
    "A",
    "",
    "\n",
    "\t",
    "\r",
    "\f",
    "-",
    "_",
  ];
  let valid = 0;
  let refused = 0;
  // The decoder takes 32 KiB of text at a time: strings that end just
  // before, at and after a slice's end (49 152 bytes are 65 536 symbols),
  // and mutations there.
  const edge = 48 * 1024;
  for (let round = 0; round < 3400; round++) {
    const size = round < 2000 ? next(64) : round < 3000 ? next(140_000) : edge - 3 + next(7);
    let text = randomBytes(size, next).toBase64();
    if (round % 3 === 1 && text.length > 0) {
      // A mutation at any place: a foreign symbol, an escape, a quote (a
      // shorter string), misplaced padding, a symbol more or less.
      const at = round >= 3000 && text.length > 65540 ? 65532 + next(9) : next(text.length + 1);
      const m = mutations[next(mutations.length)]!;
      const drop = next(3) === 0 ? 1 : 0;
      text = text.slice(0, at) + m + text.slice(at + drop);
    }
    const bytes = encoder.encode(`{"x":"${text}"}`);
    const want = oracle(decoder.decode(bytes.subarray(6)));
    {
      const got = decodeBase64String(bytes, 6);
      if (want === null) {
        assertEquals(got, null, `round ${round}: ${text.slice(-12)}`);
        refused++;
      } else {
        assert(got !== null, `round ${round}: refused valid ${text.slice(-12)}`);
        assertEquals(got.bytes, want, `round ${round}`);
        assertEquals(bytes[got.close], 0x22);
        assertEquals(
          decoder.decode(bytes.subarray(6, got.close)),
          text.slice(0, text.indexOf('"') >= 0 ? text.indexOf('"') : text.length),
        );
        valid++;
      }
    }
  }
  assert(valid > 2000 && refused > 600, `valid ${valid}, refused ${refused}`);
  // Non-canonical trailing bits are accepted, as by the strict decoder.
  const loose = encoder.encode('"aGl="');
  assertEquals(decodeBase64String(loose, 1)?.bytes, encoder.encode("hi"));
});

Deno.test("large messages: the long string is found past short strings and escaped quotes", () => {
  const big = "A".repeat(5000);
  const cases: Array<[string, number]> = [
    [`{"a":"x\\"y","b":"${big}"}`, 17],
    [`{"a":"\\\\","b":"${big}"}`, 15],
    [`{"a":"\\\\\\"${big}"}`, 6],
    [`{"a":"short"}`, -1],
    [`{"a":"${"B".repeat(4095)}"}`, -1],
    [`{"a":"${"B".repeat(4096)}"}`, 6],
    [`{"a":"unterminated`, -1],
  ];
  for (const [text, want] of cases) {
    assertEquals(longStringStart(encoder.encode(text)), want, text.slice(0, 20));
  }
});

/** The general path's message with the member's base64 as bytes (what the fast path gives). */
function normalised(message: unknown, member: string | undefined): unknown {
  const m = structuredClone(message) as { params?: Record<string, unknown> };
  if (member === undefined || m.params === undefined) return m;
  const v = m.params[member];
  if (typeof v === "string") {
    const bytes = decodeStrictBase64(v);
    if (bytes instanceof Uint8Array) m.params[member] = bytes;
  }
  return m;
}

function fastPath(text: string): unknown {
  const got = decodeLargeMessage(
    encoder.encode(text),
    BASE64_MEMBERS,
    DEFAULT_JSON_LIMITS,
    decodeUtf8,
  );
  if (got === null) return null;
  const m = got as { params?: Record<string, unknown> };
  for (const [k, v] of Object.entries(m.params ?? {})) {
    if (v instanceof Base64Part) m.params![k] = v.bytes.slice();
  }
  return m;
}

Deno.test("large messages: a whole message decodes as by the general path, or is left to it", () => {
  const next = rng(4848);
  const payload = randomBytes(60_000, next).toBase64();
  const envelopes: Array<[string, string | undefined, boolean]> = [
    // [text, base64 member of its method, fast path expected]
    [
      `{"jsonrpc":"2.0","id":1,"method":"fs/writeFile","params":{"path":"file:///tmp/a","dataBase64":"${payload}"}}`,
      "dataBase64",
      true,
    ],
    [
      `{"id":2,"method":"fs/writeFile","params":{"dataBase64":"${payload}","path":"file:///tmp/a","followSymlinks":false}}`,
      "dataBase64",
      true,
    ],
    [
      ` {"id" : 3 , "method":"process/write","params":{"processId":"p","chunk":"${payload}","writeId":"w"}} `,
      "chunk",
      true,
    ],
    [
      `{"id":"s","method":"fs/writeBlock","params":{"handleId":"h","offset":0,"chunk":"${payload}"}}`,
      "chunk",
      true,
    ],
    [
      `{"id":9223372036854775807,"method":"fs/writeBlock","params":{"handleId":"h","offset":0,"chunk":"${payload}"}}`,
      "chunk",
      true,
    ],
    [
      `{"method":"process/write","params":{"processId":"p","chunk":"${payload}","writeId":"w"}}`,
      "chunk",
      true,
    ],
    [
      `{"id":4,"method":"http/request","params":{"method":"POST","url":"http://127.0.0.1/","bodyBase64":"${payload}"}}`,
      "bodyBase64",
      true,
    ],
    // Left to the general path (each answer is its own):
    [
      `{"id":5,"method":"fs/writeFile","params":{"path":"${payload}","dataBase64":"aGk="}}`,
      "dataBase64",
      false,
    ],
    [
      `{"id":6,"method":"process/start","params":{"processId":"p","argv":["${payload}"]}}`,
      undefined,
      false,
    ],
    [
      `{"id":7,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${payload}","dataBase64":"aGk="}}`,
      "dataBase64",
      false,
    ],
    [
      `{"id":8,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${payload}"}}x`,
      "dataBase64",
      false,
    ],
    [
      `{"id":9,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${payload}!"}}`,
      "dataBase64",
      false,
    ],
    [
      `{"id":10,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${
        payload.slice(1)
      }"}}`,
      "dataBase64",
      false,
    ],
    [
      `{"id":11,"method":"fs/writeFile","params":{"path":"file:///a","${payload}":"x"}}`,
      "dataBase64",
      false,
    ],
    [`{"id":12,"method":"fs/writeFile","params":["${payload}"]}`, "dataBase64", false],
    [`{"id":13,"result":{"dataBase64":"${payload}"}}`, undefined, false],
    [
      `{"id":14,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${payload}"},"params":{}}`,
      "dataBase64",
      false,
    ],
    [
      `{"id":1.5,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${payload}"}}`,
      "dataBase64",
      false,
    ],
    [
      `{"id":15,"method":"fs/writeFile","params":{"path":"file:///a","dataBase64":"${
        payload.slice(0, 40000)
      }\\/${payload.slice(40002)}"}}`,
      "dataBase64",
      false,
    ],
  ];
  for (const [text, member, expected] of envelopes) {
    const general = decodeMessage(text, "p", DEFAULT_JSON_LIMITS);
    const fast = fastPath(text);
    const label = text.replace(payload, "<payload>").slice(0, 120);
    if (expected) {
      assert(fast !== null, `fast path not taken: ${label}`);
      assert(!("malformed" in general), label);
    }
    if (fast !== null) assertEquals(fast, normalised(general, member), label);
  }
});

Deno.test("large messages over stdio: uploads arrive byte-exact, and a large write then small ones take effect in order", async () => {
  await using stdio = inProcessStdio();
  const client = stdio.client;
  await client.initialize();
  const dir = await Deno.makeTempDir();
  try {
    const next = rng(7);
    // Decoded by V8 (a message under 12 MiB), and by the scanning decoder.
    for (const size of [3 * 1024 * 1024 + 1, 13 * 1024 * 1024 + 2]) {
      const whole = randomBytes(size, next);
      await client.request("fs/writeFile", {
        path: `file://${dir}/whole`,
        dataBase64: whole.toBase64(),
      });
      assertEquals(await Deno.readFile(`${dir}/whole`), whole);
    }

    await client.request("fs/open", {
      handleId: "h",
      path: `file://${dir}/blocks`,
      mode: "replace",
    });
    const blocks = [randomBytes(1024 * 1024, next), randomBytes(1024 * 1024 - 7, next)];
    await Promise.all(
      blocks.map((b, i) =>
        client.request("fs/writeBlock", {
          handleId: "h",
          offset: i * 1024 * 1024,
          chunk: b.toBase64(),
        })
      ),
    );
    await client.request("fs/close", { handleId: "h" });
    assertEquals(
      await Deno.readFile(`${dir}/blocks`),
      new Uint8Array([...blocks[0]!, ...blocks[1]!]),
    );

    // A large write, then small writes about the same process, all in flight at once.
    await client.request("process/start", {
      processId: "cat",
      argv: ["/bin/sh", "-c", `cat > ${dir}/stdin`],
      cwd: `file://${dir}`,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      pipeStdin: true,
    });
    const pieces = [
      randomBytes(2 * 1024 * 1024, next),
      encoder.encode("a"),
      randomBytes(300_000, next),
      encoder.encode("bc"),
    ];
    const answers = await Promise.all(
      pieces.map((p, i) =>
        client.request("process/write", { processId: "cat", chunk: p.toBase64(), writeId: `w${i}` })
      ),
    );
    assertEquals(answers.map((a) => a.status), ["accepted", "accepted", "accepted", "accepted"]);
    await client.request("process/closeStdin", { processId: "cat" });
    await client.notification("process/closed", (p) => p.processId === "cat");
    const all = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
    pieces.reduce((at, p) => (all.set(p, at), at + p.length), 0);
    assertEquals(await Deno.readFile(`${dir}/stdin`), all);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("large messages: invalid base64 in a large upload gets the reference's answer; a valid one on a real pipe is byte-exact", async () => {
  const reference = referenceBin();
  const servers = [spawnStdioServer(["serve", "--listen", "stdio", "--log-level", "error"])];
  if (reference) {
    servers.push(
      spawnCommandServer(reference, ["exec-server", "--listen", "stdio"], {
        CODEX_HOME: referenceHome(),
      }),
    );
  }
  const dir = await Deno.makeTempDir();
  try {
    const good = randomBytes(200_000, rng(3)).toBase64();
    const texts = [
      good.slice(0, -4) + "AB!=",
      good.slice(0, -1),
      good.slice(0, 100_000) + "*" + good.slice(100_001),
    ];
    const answers: string[][] = [];
    for (const s of servers) {
      await s.client.initialize();
      const got: string[] = [];
      for (const data of texts) {
        const a = await s.client.call("fs/writeFile", {
          path: `file://${dir}/bad`,
          dataBase64: data,
        });
        got.push(`${a.error?.code} ${a.error?.message}`);
      }
      answers.push(got);
    }
    assertEquals(answers[0], [
      `-32600 fs/writeFile requires valid base64 dataBase64: Invalid symbol 33, offset ${
        good.length - 2
      }.`,
      "-32600 fs/writeFile requires valid base64 dataBase64: Invalid padding",
      `-32600 fs/writeFile requires valid base64 dataBase64: Invalid symbol 42, offset 100000.`,
    ]);
    if (answers[1]) assertEquals(answers[0], answers[1]);
    assertEquals(await Deno.stat(`${dir}/bad`).catch(() => null), null);
    // And after them, on the real stdin pipe (ours grows it once a line is
    // long, and reads a megabyte at a time), a valid upload byte-exact.
    const data = randomBytes(3 * 1024 * 1024 + 5, rng(5));
    for (const [i, s] of servers.entries()) {
      const a = await s.client.call("fs/writeFile", {
        path: `file://${dir}/good${i}`,
        dataBase64: data.toBase64(),
      });
      assertEquals(a.result, {}, JSON.stringify(a.error));
      assertEquals(await Deno.readFile(`${dir}/good${i}`), data);
    }
  } finally {
    for (const s of servers) await s[Symbol.asyncDispose]();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("large messages over stdio: invalid UTF-8 in a large line ends the connection as for any line", async () => {
  await using stdio = inProcessStdio();
  await stdio.client.initialize();
  const payload = randomBytes(100_000, rng(9)).toBase64();
  const line = encoder.encode(
    `{"id":5,"method":"fs/writeFile","params":{"path":"file:///tmp/\xff","dataBase64":"${payload}"}}\n`,
  );
  // "\xff" was encoded as UTF-8 (c3 bf): make it a lone continuation byte.
  const at = line.indexOf(0xc3);
  line.copyWithin(at, at + 1);
  await stdio.client.transport.sendRaw(line.subarray(0, -1));
  const info = await stdio.served as { reason: string };
  assertEquals(info.reason, "invalid UTF-8 in input");
});

/** A raw WebSocket client that fragments and masks as told (no project code). */
async function rawWs(url: string) {
  const u = new URL(url);
  const conn = await Deno.connect({ hostname: u.hostname, port: Number(u.port) });
  const write = async (b: Uint8Array) => {
    for (let o = 0; o < b.length;) o += await conn.write(b.subarray(o));
  };
  await write(encoder.encode(
    `GET / HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${btoa("0123456789abcdef")}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  ));
  let rest = new Uint8Array(0);
  const read = async () => {
    const buf = new Uint8Array(65536);
    const n = await conn.read(buf);
    if (n === null) return false;
    rest = new Uint8Array([...rest, ...buf.subarray(0, n)]);
    return true;
  };
  while (!decoder.decode(rest).includes("\r\n\r\n")) {
    if (!(await read())) throw new Error("no handshake");
  }
  rest = rest.slice(decoder.decode(rest).indexOf("\r\n\r\n") + 4);
  const next = rng(1234);
  return {
    /** Sends `text` as one message in frames of the given sizes (the last takes the rest), each with a random mask. */
    async send(text: Uint8Array, sizes: number[]) {
      let at = 0;
      for (let f = 0; at < text.length || f === 0; f++) {
        const n = f < sizes.length ? Math.min(sizes[f]!, text.length - at) : text.length - at;
        const fin = at + n === text.length;
        const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
        const frame = new Uint8Array(head + 4 + n);
        frame[0] = (fin ? 0x80 : 0) | (f === 0 ? 1 : 0);
        if (n < 126) frame[1] = 0x80 | n;
        else if (n < 65536) frame.set([0x80 | 126, n >> 8, n & 255], 1);
        else {
          frame[1] = 0x80 | 127;
          new DataView(frame.buffer).setBigUint64(2, BigInt(n));
        }
        const mask = [next(256), next(256), next(256), next(256)];
        frame.set(mask, head);
        for (let i = 0; i < n; i++) frame[head + 4 + i] = text[at + i]! ^ mask[i & 3]!;
        await write(frame);
        at += n;
      }
    },
    /** The next data message's text, or the close frame's code. */
    async next(): Promise<string | number> {
      for (;;) {
        if (rest.length >= 2) {
          let len = rest[1]! & 127;
          let off = 2;
          if (len === 126) [len, off] = [(rest[2]! << 8) | rest[3]!, 4];
          else if (len === 127) {
            [len, off] = [Number(new DataView(rest.buffer).getBigUint64(2)), 10];
          }
          if (rest.length >= off + len) {
            const opcode = rest[0]! & 15;
            const payload = rest.slice(off, off + len);
            rest = rest.slice(off + len);
            if (opcode === 8) return (payload[0]! << 8) | payload[1]!;
            if (opcode === 1) return decoder.decode(payload);
            continue;
          }
        }
        if (!(await read())) return -1;
      }
    },
    close: () => conn.close(),
  };
}

Deno.test("large messages over WebSocket: fragmented, masked uploads arrive byte-exact; invalid UTF-8 closes with 1007", async () => {
  await using server = await startWsServer("ours");
  const ws = await rawWs(server.url);
  try {
    let id = 0;
    const call = async (method: string, params: unknown, sizes: number[] = [1 << 20]) => {
      const my = ++id;
      await ws.send(encoder.encode(JSON.stringify({ id: my, method, params })), sizes);
      for (;;) {
        const m = await ws.next();
        if (typeof m === "number") throw new Error(`closed ${m}`);
        const msg = JSON.parse(m);
        if (msg.id === my) return msg;
      }
    };
    await call("initialize", { clientName: "t" });
    await ws.send(encoder.encode(JSON.stringify({ method: "initialized" })), [1 << 20]);
    const dir = await Deno.makeTempDir();
    try {
      const next = rng(11);
      const frames = [[1 << 20], [1, 2, 3, 70_000, 12345], [3_000_000], [65536, 65536, 65536]];
      for (const [i, sizes] of frames.entries()) {
        const data = randomBytes(1_500_000 + i * 333, next);
        const answer = await call("fs/writeFile", {
          path: `file://${dir}/f${i}`,
          dataBase64: data.toBase64(),
        }, sizes);
        assertEquals(answer.result, {}, JSON.stringify(answer.error));
        assertEquals(await Deno.readFile(`${dir}/f${i}`), data);
      }
      // A large text message that is not UTF-8 (outside the base64).
      const payload = randomBytes(100_000, next).toBase64();
      const bad = encoder.encode(
        `{"id":99,"method":"fs/writeFile","params":{"path":"file:///tmp/\u00e9","dataBase64":"${payload}"}}`,
      );
      bad[bad.indexOf(0xc3)] = 0xff;
      await ws.send(bad, [50_000]);
      assertEquals(await ws.next(), 1007);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  } finally {
    ws.close();
  }
});

Deno.test("large messages over WebSocket: a flood of 4 MiB writes to a child that never reads, then an unrelated request, all answered", async () => {
  await using server = await startWsServer("ours");
  const ws = await rawWs(server.url);
  try {
    const send = (m: unknown) => ws.send(encoder.encode(JSON.stringify(m)), [16 * 1024 * 1024]);
    await send({ id: 1, method: "initialize", params: { clientName: "t" } });
    await ws.next();
    await send({ method: "initialized" });
    await send({
      id: 2,
      method: "process/start",
      params: {
        processId: "p",
        argv: ["sleep", "60"],
        cwd: "file:///tmp",
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        pipeStdin: true,
      },
    });
    const chunk = new Uint8Array(4 * 1024 * 1024).fill(97).toBase64();
    for (let i = 0; i < 30; i++) {
      await send({
        id: 100 + i,
        method: "process/write",
        params: { processId: "p", chunk, writeId: `w${i}` },
      });
    }
    await send({ id: 3, method: "fs/getMetadata", params: { path: "file:///tmp" } });
    const answers = new Map<number, { result?: { status: string }; error?: { message: string } }>();
    const until = async (done: () => boolean) => {
      while (!done()) {
        const m = await ws.next();
        if (typeof m === "number") throw new Error(`closed ${m}`);
        const msg = JSON.parse(m);
        if (typeof msg.id === "number") answers.set(msg.id, msg);
      }
    };
    // The unrelated request is answered while the first writes still wait
    // for a child that reads nothing.
    await until(() => answers.has(3));
    assert(answers.get(3)?.result !== undefined);
    const refused = [...answers.keys()].filter((id) => id >= 100);
    assert(refused.length > 0 && refused.length < 30, `${refused.length} answered before`);
    for (const id of refused) {
      assert(/stdin/.test(answers.get(id)?.error?.message ?? ""), JSON.stringify(answers.get(id)));
    }
    // Ended, the child takes the rest with it: every write is answered.
    await send({ id: 4, method: "process/terminate", params: { processId: "p" } });
    await until(() => answers.has(4) && [...Array(30).keys()].every((i) => answers.has(100 + i)));
    for (let i = 0; i < 30; i++) {
      const a = answers.get(100 + i)!;
      assert(
        a.result !== undefined || /stdin/.test(a.error?.message ?? ""),
        JSON.stringify(a).slice(0, 200),
      );
    }
  } finally {
    ws.close();
  }
});
