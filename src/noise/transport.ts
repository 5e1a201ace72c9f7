/**
 * The transport phase: one Noise record per relay Data frame, AES-256-GCM
 * with an empty AD and an implicit nonce (4 zero bytes + big-endian u64)
 * that advances by one per record; at most 61 440 plaintext bytes per
 * record, enforced by receivers; ciphertext shorter than the tag or longer
 * than 65 535 rejected before decryption; no nonce reuse and no wrap.
 *
 * Records go through the system's libcrypto when FFI is granted (synchronous,
 * ~4.5× WebCrypto's throughput and no worker-thread hand-off, see
 * aes_gcm_openssl.ts), else through WebCrypto (measured faster than the
 * pure-JS AEAD for large records, see bench/noise_bench.ts); all produce
 * identical bytes.
 *
 * @module
 */

import type { CipherState } from "./symmetric_state.ts";
import { aesGcmNonce, TAGLEN } from "./primitives.ts";
import { loadOpenSslAesGcm, type NativeAesGcm } from "./aes_gcm_openssl.ts";

/** Most plaintext bytes in one record. */
export const MAX_RECORD_PLAINTEXT = 61440;
/** Most bytes of any Noise message. */
export const MAX_NOISE_MESSAGE = 65535;

/** A record was refused. */
export class RecordError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "RecordError";
  }
}

/** One direction of the transport. */
export class RecordCipher {
  readonly #state: CipherState;
  #webKey: Promise<CryptoKey> | null = null;
  /** Use WebCrypto for records of at least this many bytes (else noble). */
  readonly webCryptoThreshold: number;
  readonly #native: NativeAesGcm | null;

  /**
   * Wraps a split cipher state. `native: false` keeps records off libcrypto
   * (WebCrypto and noble only).
   */
  constructor(
    state: CipherState,
    options: { webCryptoThreshold?: number; native?: boolean } = {},
  ) {
    this.#state = state;
    this.webCryptoThreshold = options.webCryptoThreshold ?? 0;
    this.#native = options.native === false || state.aead.name !== "AESGCM"
      ? null
      : loadOpenSslAesGcm();
  }

  /** Whether records go through the system's libcrypto. */
  get native(): boolean {
    return this.#native !== null;
  }

  #key(): Promise<CryptoKey> {
    this.#webKey ??= crypto.subtle.importKey(
      "raw",
      this.#state.key as Uint8Array<ArrayBuffer>,
      "AES-GCM",
      false,
      [
        "encrypt",
        "decrypt",
      ],
    );
    return this.#webKey;
  }

  /** Encrypts one record (≤ 61 440 bytes) with the next nonce. */
  async seal(plaintext: Uint8Array): Promise<Uint8Array> {
    if (plaintext.length > MAX_RECORD_PLAINTEXT) {
      throw new RecordError("Noise relay plaintext record exceeds maximum length");
    }
    const n = this.#state.nextNonce();
    if (this.#native) return this.#native.seal(this.#state.key, aesGcmNonce(n), plaintext);
    if (plaintext.length < this.webCryptoThreshold) {
      return this.#state.aead.encrypt(this.#state.key, n, new Uint8Array(0), plaintext);
    }
    const sealed = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv: aesGcmNonce(n) as Uint8Array<ArrayBuffer>, tagLength: 128 },
      await this.#key(),
      plaintext as Uint8Array<ArrayBuffer>,
    );
    return new Uint8Array(sealed);
  }

  /**
   * Encrypts one record (≤ 61 440 bytes) with the next nonce straight into
   * `out` (`plaintext.length + 16` bytes). Synchronous, so only with
   * {@linkcode native} records; use {@linkcode seal} otherwise.
   */
  sealInto(plaintext: Uint8Array, out: Uint8Array): void {
    if (!this.#native) throw new Error("sealInto needs libcrypto records (see native)");
    if (plaintext.length > MAX_RECORD_PLAINTEXT) {
      throw new RecordError("Noise relay plaintext record exceeds maximum length");
    }
    if (out.length !== plaintext.length + TAGLEN) {
      throw new RangeError("sealInto: out must be the plaintext length plus the tag");
    }
    const n = this.#state.nextNonce();
    this.#native.sealInto(this.#state.key, aesGcmNonce(n), plaintext, out);
  }

  /**
   * Decrypts the next record, taking its nonce now (so several can be in
   * flight and complete in parallel); any failure is fatal for the stream.
   */
  openNext(ciphertext: Uint8Array): Promise<Uint8Array> {
    checkCiphertext(ciphertext);
    return this.#decrypt(this.#state.nextNonce(), ciphertext);
  }

  /**
   * Decrypts the next record synchronously into `scratch` (at least the
   * record's plaintext length) and returns the plaintext view of it;
   * libcrypto records only (see {@linkcode native}). The nonce is taken
   * either way; any failure throws {@linkcode RecordError}.
   */
  openNextInto(ciphertext: Uint8Array, scratch: Uint8Array): Uint8Array {
    if (!this.#native) throw new Error("openNextInto needs libcrypto records (see native)");
    checkCiphertext(ciphertext);
    const n = this.#state.nextNonce();
    const length = ciphertext.length - TAGLEN;
    if (length > MAX_RECORD_PLAINTEXT) {
      throw new RecordError("Noise relay plaintext record exceeds maximum length");
    }
    const out = scratch.subarray(0, length);
    let ok = false;
    try {
      ok = this.#native.openInto(this.#state.key, aesGcmNonce(n), ciphertext, out);
    } catch { /* reported below */ }
    if (!ok) throw new RecordError("Noise record failed to decrypt");
    return out;
  }

  /**
   * Decrypts the next record; the nonce advances only on success. Throws
   * {@linkcode RecordError} on any failure.
   */
  async open(ciphertext: Uint8Array): Promise<Uint8Array> {
    checkCiphertext(ciphertext);
    const plaintext = await this.#decrypt(this.#state.nonce, ciphertext);
    this.#state.nextNonce();
    return plaintext;
  }

  async #decrypt(n: bigint, ciphertext: Uint8Array): Promise<Uint8Array> {
    let plaintext: Uint8Array | null;
    try {
      plaintext = this.#native
        ? this.#native.open(this.#state.key, aesGcmNonce(n), ciphertext)
        : ciphertext.length < this.webCryptoThreshold
        ? this.#state.aead.decrypt(this.#state.key, n, new Uint8Array(0), ciphertext)
        : new Uint8Array(
          await crypto.subtle.decrypt(
            { name: "AES-GCM", iv: aesGcmNonce(n) as Uint8Array<ArrayBuffer>, tagLength: 128 },
            await this.#key(),
            ciphertext as Uint8Array<ArrayBuffer>,
          ),
        );
    } catch {
      plaintext = null;
    }
    if (plaintext === null) throw new RecordError("Noise record failed to decrypt");
    if (plaintext.length > MAX_RECORD_PLAINTEXT) {
      throw new RecordError("Noise relay plaintext record exceeds maximum length");
    }
    return plaintext;
  }
}

function checkCiphertext(ciphertext: Uint8Array): void {
  if (ciphertext.length < TAGLEN) throw new RecordError("Noise record is shorter than its tag");
  if (ciphertext.length > MAX_NOISE_MESSAGE) {
    throw new RecordError("Noise record exceeds 65535 bytes");
  }
}
