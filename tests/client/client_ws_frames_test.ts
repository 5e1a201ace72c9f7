// The client under a WebSocket server written frame by frame: control frames
// the server sends (pings, including one between the fragments of a
// message) are answered with their payload and do not disturb the message,
// and a close the server starts ends the connection with a clear error on
// the next call — never a hang.

import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { connect } from "../../src/client/client.ts";
import { ConnectionClosedError } from "../../src/client/errors.ts";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

function frame(opcode: number, payload: Uint8Array, fin = true): Uint8Array {
  const head = payload.length < 126 ? 2 : 4;
  const out = new Uint8Array(head + payload.length);
  out[0] = (fin ? 0x80 : 0) | opcode;
  if (head === 2) out[1] = payload.length;
  else {
    out[1] = 126;
    new DataView(out.buffer).setUint16(2, payload.length);
  }
  out.set(payload, head);
  return out;
}

/** Reads the client's frames (masked; lengths of 7, 16 or 64 bits). */
async function* clientFrames(conn: Deno.Conn, pending: Uint8Array) {
  // A growable buffer: data[start, end) is unread.
  let data = new Uint8Array(Math.max(65536, pending.length * 2));
  data.set(pending);
  let start = 0;
  let end = pending.length;
  const have = () => end - start;
  const at = (i: number) => data[start + i]!;
  const more = async () => {
    if (data.length - end < 65536) {
      const grown = new Uint8Array(Math.max(data.length * 2, have() + 65536));
      grown.set(data.subarray(start, end));
      data = grown;
      end -= start;
      start = 0;
    }
    const n = await conn.read(data.subarray(end));
    if (n === null) return false;
    end += n;
    return true;
  };
  while (true) {
    while (have() < 2) if (!(await more())) return;
    let len = at(1) & 0x7f;
    let off = 2;
    if (len >= 126) {
      off = len === 126 ? 4 : 10;
      while (have() < off) if (!(await more())) return;
      len = 0;
      for (let i = 2; i < off; i++) len = len * 256 + at(i);
    }
    assert(at(1) & 0x80, "client frames are masked");
    while (have() < off + 4 + len) if (!(await more())) return;
    const mask = data.slice(start + off, start + off + 4);
    const payload = data.slice(start + off + 4, start + off + 4 + len);
    for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!;
    yield { fin: (at(0) & 0x80) !== 0, opcode: at(0) & 0x0f, payload };
    start += off + 4 + len;
  }
}

interface FrameServer {
  url: string;
  pongs: string[];
  /** The client's close frame's payload, once it sent one. */
  closeFromClient: Uint8Array | null;
  /** Settles when the connection has ended. */
  served: Promise<void>;
  close(): Promise<void>;
}

/**
 * A WebSocket server of one connection, frame by frame: `onText` gets each
 * text message with a writer of raw frames.
 */
function frameServer(
  onText: (
    msg: { id?: number; method?: string },
    write: (f: Uint8Array) => Promise<unknown>,
  ) => Promise<void>,
): FrameServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const enc = new TextEncoder();
  const state: FrameServer = {
    url: `ws://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    pongs: [],
    closeFromClient: null,
    served: Promise.resolve(),
    close: async () => {
      listener.close();
      await state.served.catch(() => {});
    },
  };
  state.served = (async () => {
    const conn = await listener.accept();
    let head = new Uint8Array(0);
    let end = -1;
    while (end < 0) {
      const chunk = new Uint8Array(4096);
      const n = await conn.read(chunk);
      if (n === null) throw new Error("no upgrade request");
      const next = new Uint8Array(head.length + n);
      next.set(head);
      next.set(chunk.subarray(0, n), head.length);
      head = next;
      end = new TextDecoder().decode(head).indexOf("\r\n\r\n");
    }
    const request = new TextDecoder().decode(head.subarray(0, end));
    const key = /sec-websocket-key:\s*(\S+)/i.exec(request)![1]!;
    const digest = await crypto.subtle.digest("SHA-1", enc.encode(key + GUID));
    const accept = btoa(String.fromCharCode(...new Uint8Array(digest)));
    await conn.write(
      enc.encode(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
      ),
    );
    const write = async (f: Uint8Array) => {
      for (let at = 0; at < f.length;) at += await conn.write(f.subarray(at));
    };
    let fragments: Uint8Array[] = [];
    for await (const { fin, opcode, payload } of clientFrames(conn, head.slice(end + 4))) {
      if (opcode === 0xa) state.pongs.push(new TextDecoder().decode(payload));
      if (opcode === 0x8) {
        state.closeFromClient = payload;
        break;
      }
      if (opcode !== 0x1 && opcode !== 0x0) continue;
      // A text message, in one frame or in fragments.
      fragments.push(payload);
      if (!fin) continue;
      const decoder = new TextDecoder();
      const text = fragments.map((f, i) => decoder.decode(f, { stream: i < fragments.length - 1 }))
        .join("");
      fragments = [];
      await onText(JSON.parse(text), write);
    }
    conn.close();
  })();
  return state;
}

const enc = new TextEncoder();

function initializeAnswer(id: number | undefined): Uint8Array {
  return enc.encode(JSON.stringify({
    jsonrpc: "2.0",
    id,
    result: { sessionId: "s-1", environmentInfo: { shell: null } },
  }));
}

Deno.test("client over a hand-written WebSocket server: pings answered with their payload, a ping between fragments, a server-initiated close", async () => {
  const server = frameServer(async (msg, write) => {
    if (msg.method === "initialize") {
      const answer = initializeAnswer(msg.id);
      const half = answer.length >> 1;
      // A ping first, then the answer in two fragments with a ping between.
      await write(frame(0x9, enc.encode("p1")));
      await write(frame(0x1, answer.subarray(0, half), false));
      await write(frame(0x9, enc.encode("p2")));
      await write(frame(0x0, answer.subarray(half), true));
    } else if (msg.method === "initialized") {
      // The server goes away: 1001 with a reason.
      const why = enc.encode("going away for maintenance");
      const body = new Uint8Array(2 + why.length);
      new DataView(body.buffer).setUint16(0, 1001);
      body.set(why, 2);
      await write(frame(0x8, body));
    }
  });
  try {
    const client = await connect({
      url: server.url,
      reconnect: false,
      connectTimeoutMs: 30_000,
      initializeTimeoutMs: 30_000,
    });
    try {
      assertEquals(client.sessionId, "s-1");
      await server.served;
      assertEquals(server.pongs, ["p1", "p2"]);
      // The client echoed the close, status code first.
      assert(server.closeFromClient !== null, "the client answered the close");
      assertEquals(new DataView((server.closeFromClient as Uint8Array).buffer).getUint16(0), 1001);
      const error = await assertRejects(
        () => client.request("environment/info", {}),
        ConnectionClosedError,
      );
      // The error says who closed and why.
      assertStringIncludes(error.message, "1001 going away for maintenance");
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

Deno.test("client over a hand-written WebSocket server: a write blocked on a full socket survives a ping arriving meanwhile", async () => {
  const big = "x".repeat(24 * 1024 * 1024);
  let received = -1;
  let stalled: (() => void) | null = null;
  const server = frameServer(async (msg, write) => {
    if (msg.method === "initialize") await write(frame(0x1, initializeAnswer(msg.id)));
    else if (msg.method === "initialized") {
      // Stop reading until the client's 24 MiB call is under way (its write
      // cannot finish: nobody reads), then ping it and read on.
      await new Promise<void>((resolve) => stalled = resolve);
      await write(frame(0x9, enc.encode("mid-write")));
    } else if (msg.method === "fs/writeFile") {
      received = ((msg as { params?: { dataBase64?: string } }).params?.dataBase64 ?? "").length;
      await write(
        frame(0x1, enc.encode(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: {} }))),
      );
    }
  });
  try {
    const client = await connect({ url: server.url, reconnect: false });
    try {
      const call = client.call("fs/writeFile", { path: "/nowhere", dataBase64: big });
      // The server stalls at `initialized`; the call's write then fills the
      // socket. One turn of the event loop hands the call to the WebSocket
      // before the server pings (either order must work; this one is the test).
      await new Promise((r) => setTimeout(r, 0));
      while (stalled === null) await new Promise((r) => setTimeout(r, 5));
      (stalled as () => void)();
      await call;
      assertEquals(received, big.length);
      assertEquals(server.pongs, ["mid-write"]);
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});
