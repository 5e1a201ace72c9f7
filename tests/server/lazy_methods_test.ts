import { assertEquals, assertRejects } from "../helpers/assert.ts";
import { defineMethods, type HandlerContext, lazyMethods } from "../../src/server/handler.ts";
import { Method } from "../../src/protocol/methods.ts";

const ctx = {} as HandlerContext;

Deno.test("lazy methods: calls made while the handlers load run once they have, in arrival order; later calls directly", async () => {
  const ran: string[] = [];
  let loads = 0;
  const gate = Promise.withResolvers<void>();
  const family = lazyMethods(
    "test",
    [Method.EnvironmentStatus, Method.EnvironmentInfo],
    async () => {
      loads++;
      await gate.promise;
      return defineMethods({
        [Method.EnvironmentStatus]: (() => {
          ran.push("status");
          return { status: "ready" };
        }) as never,
        [Method.EnvironmentInfo]: ((p: { n: number }) => {
          ran.push(`info ${p.n}`);
          return p.n;
        }) as never,
      });
    },
  );
  const info = family.methods[Method.EnvironmentInfo]!;
  const status = family.methods[Method.EnvironmentStatus]!;
  const answers = [info.handle({ n: 1 }, ctx), status.handle({}, ctx), info.handle({ n: 2 }, ctx)];
  assertEquals(ran, [], "nothing runs before the module is there");
  gate.resolve();
  assertEquals(await Promise.all(answers), [1, { status: "ready" }, 2]);
  assertEquals(ran, ["info 1", "status", "info 2"]);
  // Loaded: the handler's own result, synchronously.
  assertEquals(info.handle({ n: 3 }, ctx), 3);
  assertEquals(loads, 1);
  // The decoders are the protocol's, available before loading.
  assertEquals(typeof info.decode, "function");
});

Deno.test("lazy methods: a module that does not implement exactly the declared methods fails every call, naming both lists", async () => {
  const family = lazyMethods(
    "test",
    [Method.EnvironmentStatus, Method.EnvironmentInfo],
    () =>
      Promise.resolve(
        defineMethods({ [Method.EnvironmentStatus]: (() => ({ status: "ready" })) as never }),
      ),
  );
  const error = await assertRejects(
    () => family.methods[Method.EnvironmentStatus]!.handle({}, ctx) as Promise<unknown>,
    Error,
  );
  assertEquals(
    error.message,
    `the test handlers implement ${Method.EnvironmentStatus}, not ${Method.EnvironmentInfo}, ${Method.EnvironmentStatus}`,
  );
  await assertRejects(() => family.load(), Error, "the test handlers implement");
});
