// A scripted stand-in for the OpenAI Responses API (`POST /v1/responses`,
// server-sent events), so the real `codex exec` can be driven in tests: each
// request gets the next scripted turn (tool calls, then a final message),
// and every request body is recorded (it carries the tool outputs Codex
// shows its model).

// deno-lint-ignore no-explicit-any
export type Json = any;

/** One turn of the model: the tool calls it makes (none: it just answers). */
export type Turn =
  | { readonly call: "exec_command"; readonly cmd: string; readonly workdir?: string }
  | { readonly call: "apply_patch"; readonly patch: string }
  | { readonly message: string };

export interface FakeModel {
  /** `http://127.0.0.1:PORT/v1` */
  readonly baseUrl: string;
  /** Request bodies in arrival order. */
  readonly requests: Json[];
  [Symbol.asyncDispose](): Promise<void>;
}

function event(type: string, body: Json): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
}

function itemFor(turn: Turn, n: number): Json {
  if ("message" in turn) {
    return {
      type: "message",
      role: "assistant",
      id: `msg_${n}`,
      content: [{ type: "output_text", text: turn.message }],
    };
  }
  if (turn.call === "exec_command") {
    const args = { cmd: turn.cmd, ...(turn.workdir ? { workdir: turn.workdir } : {}) };
    return {
      type: "function_call",
      id: `fc_${n}`,
      call_id: `call_${n}`,
      name: "exec_command",
      arguments: JSON.stringify(args),
    };
  }
  return {
    type: "custom_tool_call",
    id: `ctc_${n}`,
    call_id: `call_${n}`,
    name: "apply_patch",
    input: turn.patch,
  };
}

/** Serves `turns` in order (after the last, it keeps answering "done"). */
export function fakeModel(turns: Turn[]): FakeModel {
  const requests: Json[] = [];
  let next = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    if (req.method !== "POST" || url.pathname !== "/v1/responses") {
      return new Response("not found", { status: 404 });
    }
    requests.push(await req.json());
    const n = next++;
    const turn = turns[n] ?? { message: "done" };
    const id = `resp_${n}`;
    const body = event("response.created", { response: { id } }) +
      event("response.output_item.done", { item: itemFor(turn, n) }) +
      event("response.completed", {
        response: {
          id,
          usage: {
            input_tokens: 0,
            input_tokens_details: null,
            output_tokens: 0,
            output_tokens_details: null,
            total_tokens: 0,
          },
        },
      });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  return {
    baseUrl: `http://127.0.0.1:${server.addr.port}/v1`,
    requests,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/** The outputs of tool calls in a request body, by call id (what the model was shown). */
export function toolOutputs(request: Json): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of request.input ?? []) {
    if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
      out[item.call_id] = typeof item.output === "string"
        ? item.output
        : JSON.stringify(item.output);
    }
  }
  return out;
}

/**
 * Runs the real `codex exec` (the pinned reference at `codex`) once in `ws`
 * against `model` and the exec-server at `serverUrl`, with Codex's home at
 * `home` (its config.toml written here: the fake provider, and
 * `otel` lines when given); fails with Codex's stderr unless it exits 0.
 */
export async function codexExecOnce(options: {
  readonly codex: string;
  readonly home: string;
  readonly ws: string;
  readonly model: FakeModel;
  readonly serverUrl: string;
  readonly otel?: readonly string[];
}): Promise<void> {
  await Deno.writeTextFile(
    `${options.home}/config.toml`,
    [
      'model = "gpt-5.5"',
      'model_provider = "fake"',
      ...(options.otel ? ["[otel]", ...options.otel] : []),
      "[model_providers.fake]",
      'name = "fake"',
      `base_url = "${options.model.baseUrl}"`,
      'wire_api = "responses"',
      'env_key = "FAKE_MODEL_KEY"',
    ].join("\n") + "\n",
  );
  const run = await new Deno.Command(options.codex, {
    args: ["exec", "--skip-git-repo-check", "-C", options.ws, "do the scripted work"],
    env: {
      CODEX_HOME: options.home,
      FAKE_MODEL_KEY: "test-key",
      CODEX_EXEC_SERVER_URL: options.serverUrl,
    },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  if (run.code !== 0) {
    throw new Error(
      `codex exec exited ${run.code}: ${new TextDecoder().decode(run.stderr).slice(-2000)}`,
    );
  }
}
