// stdio-to-uds: a byte relay between stdio and a Unix domain socket, run as
// the real command against real socket servers.

import { assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import { CLI, text } from "../helpers/wire_client.ts";

const encoder = new TextEncoder();

async function withSocket(
  serve: (conn: Deno.UnixConn) => Promise<void>,
  body: (path: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/s.sock`;
  const listener = Deno.listen({ transport: "unix", path });
  const served = (async () => {
    const conn = await listener.accept();
    try {
      await serve(conn);
    } finally {
      try {
        conn.close();
      } catch { /* closed */ }
    }
  })();
  try {
    await body(path);
    await served;
  } finally {
    listener.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Reads to EOF with `read` (ending `readable` would close the socket). */
async function readAll(conn: Deno.Conn): Promise<string> {
  let out = "";
  const buffer = new Uint8Array(4096);
  for (;;) {
    const n = await conn.read(buffer);
    if (n === null) return out;
    out += text(buffer.subarray(0, n));
  }
}

function relay(path: string) {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "stdio-to-uds", path],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

Deno.test("stdio-to-uds: stdin EOF first — the peer sees EOF, then answers", async () => {
  await withSocket(async (conn) => {
    const request = await readAll(conn); // ends only when the relay half-closes
    await conn.write(encoder.encode(`echo:${request}`));
  }, async (path) => {
    const child = relay(path);
    const writer = child.stdin.getWriter();
    await writer.write(encoder.encode("request 1\n"));
    await writer.write(encoder.encode("request 2\n"));
    await writer.close();
    const out = await child.output();
    assertEquals(text(out.stdout), "echo:request 1\nrequest 2\n");
    assertEquals(out.code, 0);
  });
});

Deno.test("stdio-to-uds: socket EOF first — output flushed, exit waits for stdin EOF", async () => {
  await withSocket(async (conn) => {
    await conn.write(encoder.encode("bye"));
  }, async (path) => {
    const child = relay(path);
    const reader = child.stdout.getReader();
    let got = "";
    while (got.length < 3) got += text((await reader.read()).value!);
    assertEquals(got, "bye");
    // Still running: it finishes only when stdin ends.
    const early = await Promise.race([
      child.status.then(() => "exited"),
      new Promise((r) => setTimeout(() => r("running"), 300)),
    ]);
    assertEquals(early, "running");
    await child.stdin.close();
    assertEquals((await reader.read()).done, true);
    assertEquals((await child.status).code, 0);
    await child.stderr.cancel();
  });
});

Deno.test("stdio-to-uds: stdin after the peer closed is a broken relay (exit 1)", async () => {
  await withSocket(async (conn) => {
    conn.close();
    await Promise.resolve();
  }, async (path) => {
    const child = relay(path);
    const writer = child.stdin.getWriter();
    const chunk = encoder.encode("x".repeat(64 * 1024));
    // Keep writing until the relay gives up (the first writes may still be accepted).
    try {
      for (let i = 0; i < 200; i++) await writer.write(chunk);
      await writer.close();
    } catch { /* the relay exited */ }
    const out = await child.output();
    assertEquals(out.code, 1);
    assertStringIncludes(text(out.stderr), "failed to relay data between stdio and socket");
  });
});

Deno.test("stdio-to-uds: a missing socket exits 1, bad arguments are usage errors (2)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const missing = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "stdio-to-uds", `${dir}/nope.sock`],
      stdin: "null",
    }).output();
    assertEquals(missing.code, 1);
    assertStringIncludes(text(missing.stderr), `failed to connect to socket at ${dir}/nope.sock`);
    const none = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "stdio-to-uds"],
      stdin: "null",
    }).output();
    assertEquals(none.code, 2);
    assertStringIncludes(text(none.stderr), "stdio-to-uds needs SOCKET_PATH");
    const two = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "stdio-to-uds", "a", "b"],
      stdin: "null",
    }).output();
    assertEquals(two.code, 2);
    assertStringIncludes(text(two.stderr), "stdio-to-uds takes one SOCKET_PATH, got 2 arguments");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("stdio-to-uds: 32 MiB each way through an echo server", async () => {
  const size = 32 * 1024 * 1024;
  await withSocket(async (conn) => {
    await conn.readable.pipeTo(conn.writable, { preventClose: true }).catch(() => {});
  }, async (path) => {
    const child = relay(path);
    const chunk = new Uint8Array(1024 * 1024).map((_, i) => i % 251);
    const writing = (async () => {
      const writer = child.stdin.getWriter();
      for (let sent = 0; sent < size; sent += chunk.length) await writer.write(chunk);
      await writer.close();
    })();
    let received = 0;
    let intact = true;
    for await (const piece of child.stdout) {
      for (let i = 0; i < piece.length; i += 4099) {
        if (piece[i] !== ((received + i) % (1024 * 1024)) % 251) intact = false;
      }
      received += piece.length;
    }
    await writing;
    assertEquals(received, size);
    assertEquals(intact, true);
    assertEquals((await child.status).code, 0);
    await child.stderr.cancel();
  });
});
