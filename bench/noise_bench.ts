// AEAD for bulk Noise records (61 440 bytes) and small ones: noble vs
// WebCrypto, and the hybrid-IK handshake cost per side.
//   deno bench -A bench/noise_bench.ts

import { loadNoiseCrypto } from "../src/noise/primitives.ts";
import { gcm } from "@noble/ciphers/aes.js";
import { aesGcmNonce } from "../src/noise/primitives.ts";
import {
  buildPrologue,
  generateIdentity,
  initiatorHandshake,
  responderHandshake,
} from "../src/noise/hybrid_ik.ts";

const key = crypto.getRandomValues(new Uint8Array(32));
const webKey = await crypto.subtle.importKey("raw", key, "AES-GCM", false, ["encrypt"]);
const big = crypto.getRandomValues(new Uint8Array(61440));
const small = crypto.getRandomValues(new Uint8Array(256));
let n = 0n;

for (const [label, data] of [["61440 B", big], ["256 B", small]] as const) {
  Deno.bench(`noble AES-GCM seal ${label}`, { group: label }, () => {
    gcm(key, aesGcmNonce(n++), new Uint8Array(0)).encrypt(data);
  });
  Deno.bench(`WebCrypto AES-GCM seal ${label}`, { group: label, baseline: true }, async () => {
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv: aesGcmNonce(n++) as Uint8Array<ArrayBuffer>, tagLength: 128 },
      webKey,
      data,
    );
  });
}

await loadNoiseCrypto();
const executor = generateIdentity();
const harness = generateIdentity();
const prologue = buildPrologue("env", "reg", "stream");
const executorKey = { dh: executor.key.dh.publicKey, kem: executor.key.kem.publicKey };
Deno.bench(
  "hybrid IK handshake, initiator side (msg1 write + msg2 read)",
  { group: "handshake" },
  () => {
    const i = initiatorHandshake(harness, executorKey, prologue);
    const r = responderHandshake(executor, prologue);
    const m1 = i.writeMessage(new Uint8Array(64));
    r.readMessage(m1);
    const m2 = r.writeMessage();
    i.readMessage(m2);
  },
);
