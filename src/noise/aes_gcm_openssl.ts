/**
 * AES-256-GCM from the system's OpenSSL (libcrypto 3) through `Deno.dlopen`,
 * for bulk transport records.
 *
 * Why: WebCrypto in Deno runs each `encrypt`/`decrypt` on a worker thread;
 * measured here on 61 440-byte records it costs ~250 µs of CPU per record
 * (~230 MiB/s per core, most of it thread hand-off), and `node:crypto`
 * ~800 µs. The same record through libcrypto, called synchronously, takes
 * ~30 µs sealed in place (~2 GB/s; ~55 µs with a fresh output buffer),
 * with no hand-off. The relay path spends a record's worth of AES per
 * 60 KiB on both sides, so this was most of its CPU.
 *
 * Used only when FFI is already granted (never prompts) and libcrypto loads;
 * otherwise {@linkcode loadOpenSslAesGcm} returns null and callers use
 * WebCrypto. `EXEC_SERVER_NATIVE_AES=0` turns it off. The bytes are the
 * same either way (a test seals and opens across all implementations).
 *
 * Two cipher contexts per process (one sealing, one opening) are set up once
 * with the cipher and re-keyed per call; JavaScript is single-threaded, so a
 * call always runs to completion before the next one starts.
 *
 * @module
 */

import { grantedEnv } from "../util/env.ts";

const SYMBOLS = {
  EVP_CIPHER_CTX_new: { parameters: [], result: "pointer" },
  EVP_aes_256_gcm: { parameters: [], result: "pointer" },
  EVP_EncryptInit_ex: {
    parameters: ["pointer", "pointer", "pointer", "buffer", "buffer"],
    result: "i32",
  },
  EVP_EncryptUpdate: {
    parameters: ["pointer", "buffer", "buffer", "buffer", "i32"],
    result: "i32",
  },
  EVP_EncryptFinal_ex: { parameters: ["pointer", "buffer", "buffer"], result: "i32" },
  EVP_DecryptInit_ex: {
    parameters: ["pointer", "pointer", "pointer", "buffer", "buffer"],
    result: "i32",
  },
  EVP_DecryptUpdate: {
    parameters: ["pointer", "buffer", "buffer", "buffer", "i32"],
    result: "i32",
  },
  EVP_DecryptFinal_ex: { parameters: ["pointer", "buffer", "buffer"], result: "i32" },
  EVP_CIPHER_CTX_ctrl: { parameters: ["pointer", "i32", "i32", "buffer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

const EVP_CTRL_GCM_GET_TAG = 0x10;
const EVP_CTRL_GCM_SET_TAG = 0x11;
const TAG = 16;
const TC14 = "cea7403d4d606b6e074ec5d3baf39d18" + "d0d1c8a799996bf0265b98b5d48ab919";

/** Synchronous AES-256-GCM with a 12-byte nonce, empty AD and a 16-byte tag. */
export interface NativeAesGcm {
  /** `plaintext` sealed: ciphertext followed by the tag. */
  seal(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array): Uint8Array;
  /** Seals into `out` (exactly `plaintext.length + 16` bytes). */
  sealInto(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, out: Uint8Array): void;
  /** The plaintext, or null when the tag does not verify. */
  open(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array): Uint8Array | null;
  /**
   * Opens into `out` (exactly `sealed.length - 16` bytes); false (and `out`
   * zeroed) when the tag does not verify.
   */
  openInto(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array, out: Uint8Array): boolean;
}

const CANDIDATES: Partial<Record<typeof Deno.build.os, string[]>> = {
  linux: ["libcrypto.so.3", "libcrypto.so"],
  darwin: [
    "/opt/homebrew/opt/openssl@3/lib/libcrypto.3.dylib",
    "/usr/local/opt/openssl@3/lib/libcrypto.3.dylib",
  ],
};

let loaded: NativeAesGcm | null | undefined;

/** Loads libcrypto once; null when disabled, not permitted or missing. */
export function loadOpenSslAesGcm(): NativeAesGcm | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (grantedEnv("EXEC_SERVER_NATIVE_AES") === "0") return null;
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
  for (const name of CANDIDATES[Deno.build.os] ?? []) {
    let library: Deno.DynamicLibrary<typeof SYMBOLS>;
    try {
      library = Deno.dlopen(name, SYMBOLS);
    } catch {
      continue;
    }
    loaded = bind(library.symbols);
    if (loaded) break;
    library.close();
  }
  return loaded;
}

function bind(s: Deno.DynamicLibrary<typeof SYMBOLS>["symbols"]): NativeAesGcm | null {
  const cipher = s.EVP_aes_256_gcm();
  const sealCtx = s.EVP_CIPHER_CTX_new();
  const openCtx = s.EVP_CIPHER_CTX_new();
  if (cipher === null || sealCtx === null || openCtx === null) return null;
  if (
    s.EVP_EncryptInit_ex(sealCtx, cipher, null, null, null) !== 1 ||
    s.EVP_DecryptInit_ex(openCtx, cipher, null, null, null) !== 1
  ) return null;
  const outLength = new Uint8Array(4);
  const tagCopy = new Uint8Array(TAG);
  const fail = (what: string): never => {
    throw new Error(`libcrypto ${what} failed`);
  };
  const aes: NativeAesGcm = {
    seal(key, nonce, plaintext) {
      const out = new Uint8Array(plaintext.length + TAG);
      aes.sealInto(key, nonce, plaintext, out);
      return out;
    },
    sealInto(key, nonce, plaintext, out) {
      checkKey(key, nonce);
      if (out.length !== plaintext.length + TAG) {
        throw new RangeError("sealInto: out must be the plaintext length plus the tag");
      }
      const tag = out.subarray(plaintext.length);
      if (s.EVP_EncryptInit_ex(sealCtx, null, null, key, nonce) !== 1) fail("EncryptInit");
      if (
        plaintext.length > 0 &&
        s.EVP_EncryptUpdate(sealCtx, out, outLength, plaintext, plaintext.length) !== 1
      ) fail("EncryptUpdate");
      if (s.EVP_EncryptFinal_ex(sealCtx, tag, outLength) !== 1) fail("EncryptFinal");
      if (s.EVP_CIPHER_CTX_ctrl(sealCtx, EVP_CTRL_GCM_GET_TAG, TAG, tag) !== 1) fail("GET_TAG");
    },
    open(key, nonce, sealed) {
      if (sealed.length < TAG) return null;
      const out = new Uint8Array(sealed.length - TAG);
      return aes.openInto(key, nonce, sealed, out) ? out : null;
    },
    openInto(key, nonce, sealed, out) {
      checkKey(key, nonce);
      if (sealed.length < TAG) return false;
      const length = sealed.length - TAG;
      if (out.length !== length) {
        throw new RangeError("openInto: out must be the sealed length minus the tag");
      }
      // The tag is copied: OpenSSL takes a non-const pointer for it.
      tagCopy.set(sealed.subarray(length));
      if (s.EVP_DecryptInit_ex(openCtx, null, null, key, nonce) !== 1) fail("DecryptInit");
      if (
        length > 0 &&
        s.EVP_DecryptUpdate(openCtx, out, outLength, sealed.subarray(0, length), length) !== 1
      ) fail("DecryptUpdate");
      if (s.EVP_CIPHER_CTX_ctrl(openCtx, EVP_CTRL_GCM_SET_TAG, TAG, tagCopy) !== 1) {
        fail("SET_TAG");
      }
      // Final verifies the tag (GCM writes no bytes here).
      if (s.EVP_DecryptFinal_ex(openCtx, tagCopy, outLength) !== 1) {
        out.fill(0);
        return false;
      }
      return true;
    },
  };
  // Known answer (GCM spec test case 14: AES-256, zero key and nonce, one
  // zero block) and a tampered tag, before trusting the binding.
  const zero = new Uint8Array(32);
  const sealed = aes.seal(zero, zero.subarray(0, 12), new Uint8Array(16));
  if (sealed.toHex() !== TC14) return null;
  if (aes.open(zero, zero.subarray(0, 12), sealed)?.toHex() !== "00".repeat(16)) return null;
  sealed[31]! ^= 1;
  if (aes.open(zero, zero.subarray(0, 12), sealed) !== null) return null;
  return aes;
}

function checkKey(key: Uint8Array, nonce: Uint8Array): void {
  if (key.length !== 32) throw new RangeError("AES-256-GCM needs a 32-byte key");
  if (nonce.length !== 12) throw new RangeError("AES-256-GCM needs a 12-byte nonce");
}
