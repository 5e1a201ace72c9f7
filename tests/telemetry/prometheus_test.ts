// A real Prometheus (Debian's `prometheus`, installed by tests/setup.sh)
// scrapes `serve --metrics-listen` after a fixed workload, and its own HTTP
// API is asked for the series and their exact values.

import { assert, assertEquals } from "../helpers/assert.ts";
import { freePort, spawnStdioServer } from "../helpers/wire_client.ts";
import { metricsWorkload } from "../helpers/metrics_workload.ts";
import { DURATION_BOUNDS_SECONDS } from "../../src/telemetry/exec_metrics.ts";

function findPrometheus(): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":")) {
    try {
      if (Deno.statSync(`${dir}/prometheus`).isFile) return `${dir}/prometheus`;
    } catch { /* next */ }
  }
  return null;
}

const prometheus = findPrometheus();
if (!prometheus) {
  console.warn("prometheus not installed (tests/setup.sh installs it): the scrape test is skipped");
}

interface Series {
  metric: Record<string, string>;
  value: [number, string];
}

Deno.test({
  name:
    "prometheus: a real Prometheus scrapes /metrics and its API returns the workload's exact series",
  ignore: prometheus === null,
  async fn() {
    const metricsPort = freePort();
    await using s = spawnStdioServer([
      "serve",
      "--listen",
      "stdio",
      "--log-level",
      "error",
      "--metrics-listen",
      `127.0.0.1:${metricsPort}`,
    ]);
    await metricsWorkload(s.client);

    const dir = await Deno.makeTempDir({ prefix: "prometheus-test-" });
    const webPort = freePort();
    await Deno.writeTextFile(
      `${dir}/prometheus.yml`,
      [
        "global:",
        "  scrape_interval: 200ms",
        "  scrape_timeout: 150ms",
        "scrape_configs:",
        "  - job_name: exec-server",
        "    static_configs:",
        `      - targets: ["127.0.0.1:${metricsPort}"]`,
        "",
      ].join("\n"),
    );
    const child = new Deno.Command(prometheus!, {
      args: [
        `--config.file=${dir}/prometheus.yml`,
        `--storage.tsdb.path=${dir}/data`,
        `--web.listen-address=127.0.0.1:${webPort}`,
        "--log.level=error",
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let log = "";
    const logged = (async () => {
      for (;;) {
        const { value, done } = await stderr.read();
        if (done) return;
        log += value;
      }
    })();
    try {
      const api = `http://127.0.0.1:${webPort}`;
      const query = async (q: string): Promise<Series[]> => {
        const r = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(q)}`);
        const body = await r.json();
        assertEquals(body.status, "success", JSON.stringify(body));
        return body.data.result as Series[];
      };
      // Ready, then scraped: wait on Prometheus's own signals.
      const deadline = Date.now() + 60_000;
      for (;;) {
        let up: Series[] = [];
        try {
          if (
            (await fetch(`${api}/-/ready`).then(async (
              r,
            ) => (await r.body?.cancel(), r.status))) === 200
          ) {
            up = await query('up{job="exec-server"}');
          }
        } catch { /* not listening yet */ }
        if (up.length === 1 && up[0]!.value[1] === "1") break;
        if (Date.now() > deadline) throw new Error(`Prometheus never scraped the server:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const values = async (q: string) =>
        Object.fromEntries(
          (await query(q)).map((x) => {
            const { __name__: _n, job, instance, ...labels } = x.metric;
            assertEquals([job, instance], ["exec-server", `127.0.0.1:${metricsPort}`]);
            return [JSON.stringify(labels), Number(x.value[1])];
          }),
        );
      assertEquals(await values("exec_server_requests_total"), {
        '{"method":"initialize","result":"success"}': 1,
        '{"method":"process/start","result":"success"}': 2,
        '{"method":"unknown","result":"error"}': 1,
        '{"method":"fs/readFile","result":"error"}': 1,
      });
      assertEquals(await values("exec_server_processes_finished_total"), {
        '{"result":"success"}': 1,
        '{"result":"error"}': 1,
      });
      assertEquals(await values('exec_server_connections_total{transport="stdio"}'), {
        '{"transport":"stdio"}': 1,
      });
      assertEquals(await values("exec_server_connections_active"), {
        '{"transport":"stdio"}': 1,
        '{"transport":"websocket"}': 0,
        '{"transport":"relay"}': 0,
      });
      assertEquals(await values("exec_server_processes_active"), { "{}": 0 });
      assertEquals(
        await values('exec_server_request_duration_seconds_count{method="process/start"}'),
        { '{"method":"process/start","result":"success"}': 2 },
      );
      // The histogram's buckets, as Prometheus sees them: the reference's bounds.
      const buckets = await query(
        'exec_server_request_duration_seconds_bucket{method="initialize"}',
      );
      assertEquals(
        buckets.map((b) => b.metric.le === "+Inf" ? Infinity : Number(b.metric.le)).sort((a, b) =>
          a - b
        ),
        [...DURATION_BOUNDS_SECONDS, Infinity],
      );
      // Cumulative: one request, so the +Inf bucket holds it and none holds more.
      assert(buckets.every((b) => ["0", "1"].includes(b.value[1])));
      assertEquals(buckets.find((b) => b.metric.le === "+Inf")?.value[1], "1");
    } finally {
      child.kill("SIGTERM");
      await child.status;
      await logged;
      await Deno.remove(dir, { recursive: true });
    }
  },
});
