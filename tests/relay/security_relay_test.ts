// An attacker's suite against the relay (registry + rendezvous): burning
// another environment's single-use harness authorization, and rewriting a
// signed rendezvous URL so that it still verifies (as another grant, or
// without its token tag); plus the families that held: token roles,
// expired and tampered URLs.

import { nullLogger } from "../../src/log/logger.ts";
import { generateIdentity } from "../../src/noise/hybrid_ik.ts";
import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import { startRelayServer } from "../../src/relay/server/relay_server.ts";
import {
  RendezvousRejection,
  signRendezvousUrl,
  verifyRendezvousUrl,
} from "../../src/relay/server/signing.ts";
import { ExecServer } from "../../src/server/exec_server.ts";
import { assert, assertEquals, assertRejects } from "../helpers/assert.ts";

await loadNoiseCrypto();

async function post(url: string, bearer: string, body: unknown) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: await response.json().catch(() => null) };
}

Deno.test("security relay: an executor of another environment cannot burn a harness authorization", async () => {
  const relay = await startRelayServer({ port: 0, logger: nullLogger });
  const execA = await relay.store.createToken("executor", "envA");
  const execB = await relay.store.createToken("executor", "envB");
  const harnessA = await relay.store.createToken("harness", "envA");
  const server = new ExecServer({ logger: nullLogger });
  const executor = await RemoteExecutor.start({
    registry: { url: relay.url, bearer: execA },
    environmentId: "envA",
    server,
    logger: nullLogger,
  });
  try {
    await executor.connected;
    const harness = generateIdentity();
    const connect = await post(`${relay.url}/cloud/environment/envA/connect`, harnessA, {
      harness_public_key: harness.publicKey,
    });
    assertEquals(connect.status, 200);
    const authorization = connect.json.harness_key_authorization as string;
    const registrationA = connect.json.executor_registration_id as string;
    // envB's executor asks about envA's authorization, twice, both ways.
    for (const reg of [registrationA, "reg_of_b"]) {
      const burn = await post(`${relay.url}/cloud/environment/envB/validate`, execB, {
        harness_key_authorization: authorization,
        harness_public_key: harness.publicKey,
        executor_registration_id: reg,
      });
      assertEquals(burn.json, { valid: false });
    }
    // envB's token cannot pose as envA either.
    const posing = await post(`${relay.url}/cloud/environment/envA/validate`, execB, {
      harness_key_authorization: authorization,
      harness_public_key: harness.publicKey,
      executor_registration_id: registrationA,
    });
    assert(posing.status === 401 || posing.status === 403, JSON.stringify(posing));
    // envA's own executor still can, once.
    const own = {
      harness_key_authorization: authorization,
      harness_public_key: harness.publicKey,
      executor_registration_id: registrationA,
    };
    const first = await post(`${relay.url}/cloud/environment/envA/validate`, execA, own);
    assertEquals(first.json, { valid: true });
    const again = await post(`${relay.url}/cloud/environment/envA/validate`, execA, own);
    assertEquals(again.json, { valid: false });
  } finally {
    await executor.close();
    await server.close();
    await relay.close();
  }
});

const SECRET = crypto.getRandomValues(new Uint8Array(32));

async function reason(target: string): Promise<string> {
  const error = await assertRejects(() => verifyRendezvousUrl(SECRET, target), RendezvousRejection);
  return (error as RendezvousRejection).reason;
}

Deno.test("security relay: a signed URL verifies only exactly as issued", async () => {
  const url = await signRendezvousUrl(
    SECRET,
    "http://relay.test",
    { role: "harness", environmentId: "env-1", registrationId: "reg_1", tokenTag: "abcd" },
    60_000,
  );
  const target = url.slice(url.indexOf("/ws/"));
  const grant = await verifyRendezvousUrl(SECRET, target);
  assertEquals(grant, {
    role: "harness",
    environmentId: "env-1",
    registrationId: "reg_1",
    tokenTag: "abcd",
  });
  const params = new URL(url).searchParams;
  const tok = params.get("tok")!;
  const sig = params.get("sig")!;
  // Folding `tok` into another value (the old signed string joined decoded
  // values with "&"): the grant would lose its token tag.
  const folded = target.replace(`&v=1&tok=${tok}`, `&v=1%26tok%3D${tok}`);
  assert(folded !== target);
  assertEquals(await reason(folded), "malformed_query");
  // Moving tok before v, re-encoding, repeating, adding.
  assertEquals(await reason(target.replace("v=1", "v=%31")), "malformed_query");
  assertEquals(await reason(`${target}&tok=${tok}`), "malformed_query");
  assertEquals(await reason(`${target}&x=1`), "extra_query_param");
  assertEquals(await reason(target.replace(`&tok=${tok}`, "")), "invalid_signature");
  assertEquals(await reason(target.replace("/harness/", "/environment/")), "invalid_role");
  assertEquals(await reason(target.replace("env-1", "env-2")), "invalid_signature");
  assertEquals(await reason(target.replace("env-1", "env%2D1")), "invalid_signature");
  assertEquals(await reason(target.replace(sig, sig.slice(0, -2) + "AA")), "invalid_signature");
  assertEquals(await reason(target.replace("v=1", "v=2")), "invalid_version");
  assertEquals(await reason(`${target}#frag`), "malformed_query");
  // An environment URL cannot be replayed as a harness one, nor expired.
  const expired = await signRendezvousUrl(
    SECRET,
    "http://relay.test",
    { role: "environment", environmentId: "env-1", registrationId: "reg_1" },
    -120_000,
  );
  assertEquals(await reason(expired.slice(expired.indexOf("/ws/"))), "expired");
});
