// The client under a WebSocket server written frame by frame: control frames
// the server sends (pings, including one between the fragments of a
// message) are answered with their payload and do not disturb the message,
// and a close the server starts ends the connection with a clear error on
// the next call — never a hang.

import { assert, assertEquals, assertRejects, assertStringIncludes } from "../helpers/assert.ts";
import { connect } from "../../src/client/client.ts";
import { ConnectionClosedError } from "../../src/client/errors.ts";
import { encodeFrame, FrameParser, Opcode } from "../../src/websocket/frame.ts";
import { acceptKey, encodeResponse, readHead } from "../../src/http1/head.ts";
import { connReader } from "../../src/http1/body.ts";
import { writeAll } from "../../src/util/conn_io.ts";
import { concatBytes } from "../../src/util/bytes.ts";

/** One unmasked (server) frame. */
function frame(opcode: number, payload: Uint8Array, fin = true): Uint8Array {
  return concatBytes(encodeFrame(opcode, payload, false, fin));
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
    const reader = connReader(conn);
    const head = await readHead(reader);
    const key = head.headers.get("sec-websocket-key")!;
    const write = (f: Uint8Array) => writeAll(conn, f);
    await write(encodeResponse(101, {
      upgrade: "websocket",
      connection: "Upgrade",
      "sec-websocket-accept": acceptKey(key),
    }));
    const parser = new FrameParser({ maxFramePayload: 64 * 1024 * 1024, expectMasked: true });
    let fragments: Uint8Array[] = [];
    let chunk: Uint8Array | undefined = head.leftover;
    read: while (chunk !== undefined) {
      for (const { fin, opcode, payload } of parser.push(chunk)) {
        if (opcode === Opcode.Pong) state.pongs.push(new TextDecoder().decode(payload));
        if (opcode === Opcode.Close) {
          state.closeFromClient = payload.slice();
          break read;
        }
        if (opcode !== Opcode.Text && opcode !== Opcode.Continuation) continue;
        // A text message, in one frame or in fragments.
        fragments.push(payload);
        if (!fin) continue;
        const text = new TextDecoder().decode(concatBytes(fragments));
        fragments = [];
        await onText(JSON.parse(text), write);
      }
      chunk = (await reader.read()).value;
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
      await write(frame(Opcode.Ping, enc.encode("p1")));
      await write(frame(Opcode.Text, answer.subarray(0, half), false));
      await write(frame(Opcode.Ping, enc.encode("p2")));
      await write(frame(Opcode.Continuation, answer.subarray(half), true));
    } else if (msg.method === "initialized") {
      // The server goes away: 1001 with a reason.
      const why = enc.encode("going away for maintenance");
      const body = new Uint8Array(2 + why.length);
      new DataView(body.buffer).setUint16(0, 1001);
      body.set(why, 2);
      await write(frame(Opcode.Close, body));
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
    if (msg.method === "initialize") await write(frame(Opcode.Text, initializeAnswer(msg.id)));
    else if (msg.method === "initialized") {
      // Stop reading until the client's 24 MiB call is under way (its write
      // cannot finish: nobody reads), then ping it and read on.
      await new Promise<void>((resolve) => stalled = resolve);
      await write(frame(Opcode.Ping, enc.encode("mid-write")));
    } else if (msg.method === "fs/writeFile") {
      received = ((msg as { params?: { dataBase64?: string } }).params?.dataBase64 ?? "").length;
      await write(
        frame(Opcode.Text, enc.encode(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: {} }))),
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
