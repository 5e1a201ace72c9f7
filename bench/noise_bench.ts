// AEAD for bulk Noise records (61 440 bytes) and small ones: the system's
// libcrypto through FFI vs noble vs WebCrypto, and the hybrid-IK handshake
// cost per side.
//   deno bench -A bench/noise_bench.ts

import { loadNoiseCrypto } from "../src/noise/primitives.ts";
import { gcm } from "@noble/ciphers/aes.js";
import { aesGcmNonce } from "../src/noise/primitives.ts";
import { loadOpenSslAesGcm } from "../src/noise/aes_gcm_openssl.ts";
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
const native = loadOpenSslAesGcm();

for (const [label, data] of [["61440 B", big], ["256 B", small]] as const) {
  Deno.bench(`noble AES-GCM seal ${label}`, { group: label }, () => {
    gcm(key, aesGcmNonce(n++), new Uint8Array(0)).encrypt(data);
  });
  if (native) {
    const out = new Uint8Array(data.length + 16);
    Deno.bench(`libcrypto (FFI) AES-GCM seal ${label}`, { group: label }, () => {
      native.sealInto(key, aesGcmNonce(n++), data, out);
    });
  }
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
