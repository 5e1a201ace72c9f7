import { assert, assertEquals } from "../helpers/assert.ts";
import { CLI } from "../helpers/wire_client.ts";
import { delay } from "../../src/util/async.ts";

function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * Reads NDJSON lines from `stream` with minimal parsing (this test moves a
 * GiB): reports each process/output chunk's seq and decoded length, and the
 * seqs of exited/closed.
 */
async function scanOutput(
  stream: ReadableStream<Uint8Array>,
  processId: string,
  onEvent: (kind: string, seq: number, bytes: number) => boolean,
): Promise<void> {
  const decoder = new TextDecoder();
  let pending: Uint8Array[] = [];
  let pendingLength = 0;
  const reader = stream.getReader();
  const handle = (line: string) => {
    if (!line.includes(`"processId":${JSON.stringify(processId)}`)) return true;
    const kind = /"method":"process\/(\w+)"/.exec(line)?.[1];
    if (!kind) return true;
    const seq = Number(/"seq":(\d+)/.exec(line)![1]);
    let bytes = 0;
    if (kind === "output") {
      const start = line.indexOf('"chunk":"') + 9;
      const end = line.indexOf('"', start);
      const b64 = end - start;
      bytes = b64 / 4 * 3 - (line[end - 1] === "=" ? (line[end - 2] === "=" ? 2 : 1) : 0);
    }
    return onEvent(kind, seq, bytes);
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      let start = 0;
      let nl = value.indexOf(10);
      while (nl !== -1) {
        let line = value.subarray(start, nl);
        if (pendingLength > 0) {
          const joined = new Uint8Array(pendingLength + line.length);
          let o = 0;
          for (const p of pending) joined.set(p, (o += p.length) - p.length);
          joined.set(line, pendingLength);
          line = joined;
          pending = [];
          pendingLength = 0;
        }
        if (!handle(decoder.decode(line))) return;
        start = nl + 1;
        nl = value.indexOf(10, start);
      }
      if (start < value.length) {
        pending.push(value.slice(start));
        pendingLength += value.length - start;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

Deno.test({
  name: "a client that stops reading pauses a 1 GiB writer: bounded RSS, then every byte in order",
  async fn() {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "--listen", "stdio", "--log-level", "error"],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const w = child.stdin.getWriter();
    const enc = new TextEncoder();
    const send = (o: unknown) => w.write(enc.encode(JSON.stringify(o) + "\n"));
    await send({ id: 1, method: "initialize", params: { clientName: "slow" } });
    await send({ method: "initialized" });
    const total = 1024 * 1024 * 1024;
    await send({
      id: 2,
      method: "process/start",
      params: {
        processId: "big",
        argv: ["head", "-c", String(total), "/dev/zero"],
        cwd: "file:///tmp",
        env: {},
        tty: false,
      },
    });
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(child.pid))), 50);
    try {
      // Do not read for two seconds: the child must be paused, not buffered.
      await delay(2000);
      const pausedPeak = peak;
      assert(pausedPeak > 0 && pausedPeak < 200 * 1024 * 1024, `RSS while paused ${pausedPeak}`);
      let bytes = 0;
      let lastSeq = 0;
      let gaps = 0;
      let exited = false;
      await scanOutput(child.stdout, "big", (kind, seq, n) => {
        if (seq !== lastSeq + 1) gaps++;
        lastSeq = seq;
        bytes += n;
        if (kind === "exited") exited = true;
        return kind !== "closed";
      });
      assertEquals(gaps, 0, "seqs must be contiguous");
      assert(exited);
      assertEquals(bytes, total);
      console.error(
        `paused peak ${(pausedPeak / 1048576).toFixed(0)} MiB, overall peak ${
          (peak / 1048576).toFixed(0)
        } MiB`,
      );
      assert(peak < 200 * 1024 * 1024, `peak RSS ${(peak / 1048576).toFixed(0)} MiB`);
    } finally {
      clearInterval(sampler);
      await w.close().catch(() => {});
      await child.stdout.cancel().catch(() => {});
      await child.status;
    }
  },
});
