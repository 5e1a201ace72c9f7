import { assert, assertEquals } from "../helpers/assert.ts";
import { eventually, isDead, memoryLogger } from "../helpers/wire_client.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { listenWebSocket } from "../../src/server/listen_ws.ts";
import { connectWebSocket } from "../../src/websocket/handshake.ts";
import { webSocketConnection } from "../../src/jsonrpc/websocket_adapter.ts";
import { RpcPeer } from "../../src/jsonrpc/peer.ts";
import type { WebSocketChannel } from "../../src/websocket/channel.ts";
import { delay } from "../../src/util/async.ts";

interface Output {
  seq: number;
  chunk: string;
}

/** A client over our WebSocket channel that records process notifications. */
async function client(url: string) {
  const channel: WebSocketChannel = await connectWebSocket(url);
  const notes: Array<{ method: string; params: Output & { processId: string } }> = [];
  const peer = new RpcPeer(webSocketConnection(channel), {
    onNotification: (method, params) =>
      notes.push({ method, params: params as Output & { processId: string } }),
  });
  return { channel, peer, notes };
}

function startParams(processId: string, script: string) {
  return {
    processId,
    argv: ["sh", "-c", script],
    cwd: "file:///tmp",
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
  };
}

Deno.test("resume after a killed socket: replay of missed output plus read catch-up, no gap", async () => {
  const { logger } = memoryLogger("warn");
  const server = new ExecServer({ logger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  try {
    const a = await client(listener.url);
    const { sessionId } = await a.peer.request<{ sessionId: string }>("initialize", {
      clientName: "a",
    });
    await a.peer.notify("initialized");
    const lines = 300;
    await a.peer.request(
      "process/start",
      startParams(
        "tick",
        `i=0; while [ $i -lt ${lines} ]; do echo line $i; i=$((i+1)); sleep 0.004; done`,
      ),
    );
    assert(
      await eventually(() => a.notes.filter((n) => n.method === "process/output").length >= 20),
      "timed out waiting",
    );
    // Kill the socket without a closing handshake, mid-stream.
    a.channel.abort("test kills the socket");
    await a.peer.closed;
    const seenByA = new Map<number, string>();
    for (const n of a.notes) {
      if (n.method === "process/output") seenByA.set(n.params.seq, n.params.chunk);
    }
    const lastSeen = Math.max(...seenByA.keys());
    await delay(300); // output keeps flowing while detached

    const b = await client(listener.url);
    const resumed = await b.peer.request<{ sessionId: string }>("initialize", {
      clientName: "b",
      resumeSessionId: sessionId,
    });
    assertEquals(resumed.sessionId, sessionId);
    await b.peer.notify("initialized");
    const caught = await b.peer.request<{ chunks: Output[] }>("process/read", {
      processId: "tick",
      afterSeq: lastSeen,
    });
    assert(
      await eventually(() => b.notes.some((n) => n.method === "process/closed"), 60_000),
      "timed out waiting",
    );

    const notifiedSeqs = b.notes.filter((n) => n.method === "process/output").map((n) =>
      n.params.seq
    );
    assertEquals(
      new Set(notifiedSeqs).size,
      notifiedSeqs.length,
      "notifications carry no duplicate seq",
    );
    const all = new Map(seenByA);
    for (const c of caught.chunks) all.set(c.seq, c.chunk);
    for (const n of b.notes) {
      if (n.method === "process/output") all.set(n.params.seq, n.params.chunk);
    }
    const seqs = [...all.keys()].sort((x, y) => x - y);
    const text = seqs.map((s) => new TextDecoder().decode(Uint8Array.fromBase64(all.get(s)!))).join(
      "",
    );
    const expected = Array.from({ length: lines }, (_, i) => `line ${i}\n`).join("");
    assertEquals(text, expected);
    // Every output seq below the exit is accounted for: no gap.
    const exited = b.notes.find((n) => n.method === "process/exited")!;
    const closed = b.notes.find((n) => n.method === "process/closed")!;
    const everything = new Set([...seqs, exited.params.seq, closed.params.seq]);
    for (let s = 1; s <= closed.params.seq; s++) assert(everything.has(s), `seq ${s} missing`);
    b.peer.close();
    await b.peer.closed;
  } finally {
    await listener.close();
    await server.close();
  }
});

Deno.test("output produced while detached is held (child paused at the bound) and replayed on resume", async () => {
  const server = new ExecServer({ logger: memoryLogger("warn").logger });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  try {
    const a = await client(listener.url);
    const { sessionId } = await a.peer.request<{ sessionId: string }>("initialize", {
      clientName: "a",
    });
    await a.peer.notify("initialized");
    a.channel.abort();
    await a.peer.closed;
    // Detached now: start nothing new, but a process started before keeps
    // running. Reconnect to start one, then drop again.
    const b = await client(listener.url);
    await b.peer.request("initialize", { clientName: "b", resumeSessionId: sessionId });
    await b.peer.notify("initialized");
    await b.peer.request("process/start", startParams("burst", "head -c 8388608 /dev/zero"));
    b.channel.abort();
    await b.peer.closed;
    await delay(500);
    const seenByB = b.notes.filter((n) => n.method === "process/output").map((n) => n.params);
    const lastSeen = Math.max(0, ...seenByB.map((o) => o.seq));
    const c = await client(listener.url);
    await c.peer.request("initialize", { clientName: "c", resumeSessionId: sessionId });
    await c.peer.notify("initialized");
    // Catch up from the last seq B saw: what B lost in flight is still held.
    const history = await c.peer.request<{ chunks: Output[] }>("process/read", {
      processId: "burst",
      afterSeq: lastSeen,
    });
    assert(
      await eventually(() => c.notes.some((n) => n.method === "process/closed"), 60_000),
      "timed out waiting",
    );
    const bytesOf = (o: Output) => Uint8Array.fromBase64(o.chunk).length;
    const bySeq = new Map<number, number>();
    for (const o of seenByB) bySeq.set(o.seq, bytesOf(o));
    for (const ch of history.chunks) bySeq.set(ch.seq, bytesOf(ch));
    for (const n of c.notes) {
      if (n.method === "process/output") bySeq.set(n.params.seq, bytesOf(n.params));
    }
    const total = [...bySeq.values()].reduce((x, y) => x + y, 0);
    assertEquals(total, 8388608);
    c.peer.close();
    await c.peer.closed;
  } finally {
    await listener.close();
    await server.close();
  }
});

Deno.test("a detached session expires after its TTL and its process groups are killed", async () => {
  // A TTL well beyond the 100 ms check below, whatever the machine's load.
  const server = new ExecServer({ logger: memoryLogger("warn").logger, sessionTtlMs: 1500 });
  const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
  try {
    const a = await client(listener.url);
    const { sessionId } = await a.peer.request<{ sessionId: string }>("initialize", {
      clientName: "a",
    });
    await a.peer.notify("initialized");
    await a.peer.request("process/start", startParams("bg", "sleep 1000 & echo $!; wait"));
    assert(
      await eventually(() => a.notes.some((n) => n.method === "process/output")),
      "timed out waiting",
    );
    const out = a.notes.find((n) => n.method === "process/output")!;
    const grandchild = Number(
      new TextDecoder().decode(Uint8Array.fromBase64(out.params.chunk)).trim(),
    );
    a.peer.close();
    await a.peer.closed;
    await delay(100);
    assert(!isDead(grandchild), "killed before the TTL");
    assert(
      await eventually(() => isDead(grandchild), 30_000),
      "grandchild survived session expiry",
    );
    const b = await client(listener.url);
    const expired = await b.peer.request("initialize", {
      clientName: "b",
      resumeSessionId: sessionId,
    }).catch((e) => e);
    assertEquals((expired as Error).message, `unknown session id ${sessionId}`);
    b.peer.close();
    await b.peer.closed;
  } finally {
    await listener.close();
    await server.close();
  }
});
