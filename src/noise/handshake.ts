/**
 * The Noise handshake state machine: any pattern of `patterns.ts`, with
 * X25519, optional ML-KEM-768 halves for hybrid patterns (every `e`/`s`
 * key is then an X25519 key plus an ML-KEM key, sent and hashed in that
 * order), PSKs, and injectable ephemeral keys and encapsulation randomness
 * for test vectors.
 *
 * @module
 */

import type { HandshakePattern } from "./patterns.ts";
import {
  type DhKeyPair,
  type KemKeyPair,
  MLKEM768,
  type NoiseAead,
  TAGLEN,
  X25519,
} from "./primitives.ts";
import { type CipherState, concat, SymmetricState } from "./symmetric_state.ts";

/** A local key: X25519, plus ML-KEM for hybrid patterns. */
export interface LocalKey {
  /** The DH key pair. */
  readonly dh: DhKeyPair;
  /** The KEM key pair (hybrid patterns). */
  readonly kem?: KemKeyPair;
}

/** A remote public key. */
export interface RemoteKey {
  /** X25519 public key. */
  readonly dh: Uint8Array;
  /** ML-KEM-768 public key (hybrid patterns). */
  readonly kem?: Uint8Array;
}

/** How to set up a handshake. */
export interface HandshakeOptions {
  /** Full Noise protocol name (hashed into the initial state). */
  readonly protocolName: string;
  /** Parsed pattern. */
  readonly pattern: HandshakePattern;
  /** Initiator or responder. */
  readonly initiator: boolean;
  /** Prologue. */
  readonly prologue: Uint8Array;
  /** AEAD. */
  readonly aead: NoiseAead;
  /** Hybrid: keys carry ML-KEM halves; `ekem`/`skem` tokens are allowed. */
  readonly hybrid?: boolean;
  /** Local static key. */
  readonly s?: LocalKey;
  /** Local ephemeral key (generated when absent). */
  readonly e?: LocalKey;
  /** Remote static key known in advance. */
  readonly rs?: RemoteKey;
  /** Remote ephemeral key known in advance. */
  readonly re?: RemoteKey;
  /** Pre-shared keys in token order. */
  readonly psks?: readonly Uint8Array[];
  /** Randomness for each encapsulation, in order (tests only). */
  readonly encapsulationRandomness?: () => Uint8Array | undefined;
}

/** A handshake message could not be processed (bad length, failed decryption, wrong turn). */
export class HandshakeError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HandshakeError";
  }
}

/** The Noise maximum message length. */
export const NOISE_MAX_MESSAGE = 65535;

/** See the module documentation. */
export class HandshakeState {
  readonly #o: HandshakeOptions;
  readonly #ss: SymmetricState;
  #s: LocalKey | undefined;
  #e: LocalKey | undefined;
  #rs: RemoteKey | undefined;
  #re: RemoteKey | undefined;
  #psks: Uint8Array[];
  #index = 0;

  /** Initialises (prologue and pre-messages mixed in). */
  constructor(options: HandshakeOptions) {
    this.#o = options;
    this.#ss = new SymmetricState(options.protocolName, options.aead);
    this.#s = options.s;
    this.#e = options.e;
    this.#rs = options.rs;
    this.#re = options.re;
    this.#psks = [...(options.psks ?? [])];
    this.#ss.mixHash(options.prologue);
    const mixKey = (pub: RemoteKey, isEphemeral: boolean) => {
      this.#ss.mixHash(pub.dh);
      if (isEphemeral && options.pattern.psk) this.#ss.mixKey(pub.dh);
      if (options.hybrid) {
        if (!pub.kem) throw new HandshakeError("hybrid pre-message key lacks its ML-KEM half");
        this.#ss.mixHash(pub.kem);
      }
    };
    const pub = (k: LocalKey | undefined): RemoteKey => {
      if (!k) throw new HandshakeError("a pre-message key is missing");
      return { dh: k.dh.publicKey, ...(k.kem ? { kem: k.kem.publicKey } : {}) };
    };
    for (const t of options.pattern.preInitiator) {
      const key = options.initiator
        ? pub(t === "s" ? this.#s : this.#e)
        : (t === "s" ? this.#rs : this.#re);
      if (!key) throw new HandshakeError("a pre-message key is missing");
      mixKey(key, t === "e");
    }
    for (const t of options.pattern.preResponder) {
      const key = options.initiator
        ? (t === "s" ? this.#rs : this.#re)
        : pub(t === "s" ? this.#s : this.#e);
      if (!key) throw new HandshakeError("a pre-message key is missing");
      mixKey(key, t === "e");
    }
  }

  /** The handshake hash so far. */
  get handshakeHash(): Uint8Array {
    return this.#ss.h;
  }

  /** The remote static key once learned. */
  get remoteStatic(): RemoteKey | undefined {
    return this.#rs;
  }

  /** True when all messages have been processed. */
  get finished(): boolean {
    return this.#index >= this.#o.pattern.messages.length;
  }

  /** True when it is our turn to write. */
  get myTurn(): boolean {
    return (this.#index % 2 === 0) === this.#o.initiator;
  }

  #dh(local: LocalKey | undefined, remote: RemoteKey | undefined): Uint8Array {
    if (!local || !remote) throw new HandshakeError("a key needed for DH is missing");
    try {
      return X25519.dh(local.dh.secretKey, remote.dh);
    } catch (error) {
      throw new HandshakeError("invalid X25519 shared secret", { cause: error });
    }
  }

  #generateEphemeral(): LocalKey {
    return { dh: X25519.keyPair(), ...(this.#o.hybrid ? { kem: MLKEM768.keyPair() } : {}) };
  }

  #dhToken(t: "ee" | "es" | "se" | "ss"): Uint8Array {
    const i = this.#o.initiator;
    switch (t) {
      case "ee":
        return this.#dh(this.#e, this.#re);
      case "ss":
        return this.#dh(this.#s, this.#rs);
      case "es":
        return i ? this.#dh(this.#e, this.#rs) : this.#dh(this.#s, this.#re);
      case "se":
        return i ? this.#dh(this.#s, this.#re) : this.#dh(this.#e, this.#rs);
    }
  }

  /** Writes the next message carrying `payload`. */
  writeMessage(payload: Uint8Array = new Uint8Array(0)): Uint8Array {
    if (this.finished || !this.myTurn) {
      throw new HandshakeError("not our turn to write a handshake message");
    }
    const out: Uint8Array[] = [];
    const ss = this.#ss;
    for (const t of this.#o.pattern.messages[this.#index]!) {
      switch (t) {
        case "e": {
          this.#e ??= this.#generateEphemeral();
          out.push(this.#e.dh.publicKey);
          ss.mixHash(this.#e.dh.publicKey);
          if (this.#o.pattern.psk) ss.mixKey(this.#e.dh.publicKey);
          if (this.#o.hybrid) {
            out.push(this.#e.kem!.publicKey);
            ss.mixHash(this.#e.kem!.publicKey);
          }
          break;
        }
        case "s": {
          if (!this.#s) throw new HandshakeError("no local static key");
          out.push(ss.encryptAndHash(this.#s.dh.publicKey));
          if (this.#o.hybrid) out.push(ss.encryptAndHash(this.#s.kem!.publicKey));
          break;
        }
        case "psk": {
          const psk = this.#psks.shift();
          if (!psk) throw new HandshakeError("missing pre-shared key");
          ss.mixKeyAndHash(psk);
          break;
        }
        case "ekem": {
          if (!this.#re?.kem) throw new HandshakeError("no remote ephemeral KEM key");
          const { ciphertext, sharedSecret } = MLKEM768.encapsulate(
            this.#re.kem,
            this.#o.encapsulationRandomness?.(),
          );
          out.push(ciphertext);
          ss.mixHash(ciphertext);
          ss.mixKey(sharedSecret);
          break;
        }
        case "skem": {
          if (!this.#rs?.kem) throw new HandshakeError("no remote static KEM key");
          const { ciphertext, sharedSecret } = MLKEM768.encapsulate(
            this.#rs.kem,
            this.#o.encapsulationRandomness?.(),
          );
          out.push(ss.encryptAndHash(ciphertext));
          ss.mixKeyAndHash(sharedSecret);
          break;
        }
        default:
          ss.mixKey(this.#dhToken(t));
      }
    }
    out.push(ss.encryptAndHash(payload));
    const message = concat(...out);
    if (message.length > NOISE_MAX_MESSAGE) {
      throw new HandshakeError("handshake payload is too large");
    }
    this.#index++;
    return message;
  }

  /** Reads the next message; returns its payload. */
  readMessage(message: Uint8Array): Uint8Array {
    if (this.finished || this.myTurn) {
      throw new HandshakeError("not our turn to read a handshake message");
    }
    if (message.length > NOISE_MAX_MESSAGE) {
      throw new HandshakeError("handshake message is too large");
    }
    const ss = this.#ss;
    let at = 0;
    const take = (n: number) => {
      if (at + n > message.length) throw new HandshakeError("handshake message is truncated");
      const part = message.subarray(at, at + n);
      at += n;
      return part;
    };
    const sealed = (n: number) => n + (ss.cipher.hasKey ? TAGLEN : 0);
    try {
      for (const t of this.#o.pattern.messages[this.#index]!) {
        switch (t) {
          case "e": {
            const dh = take(32).slice();
            ss.mixHash(dh);
            if (this.#o.pattern.psk) ss.mixKey(dh);
            let kem: Uint8Array | undefined;
            if (this.#o.hybrid) {
              kem = take(MLKEM768.publicKeyBytes).slice();
              ss.mixHash(kem);
            }
            this.#re = { dh, ...(kem ? { kem } : {}) };
            break;
          }
          case "s": {
            const dh = ss.decryptAndHash(take(sealed(32))).slice();
            const kem = this.#o.hybrid
              ? ss.decryptAndHash(take(sealed(MLKEM768.publicKeyBytes))).slice()
              : undefined;
            this.#rs = { dh, ...(kem ? { kem } : {}) };
            break;
          }
          case "psk": {
            const psk = this.#psks.shift();
            if (!psk) throw new HandshakeError("missing pre-shared key");
            ss.mixKeyAndHash(psk);
            break;
          }
          case "ekem": {
            const ct = take(MLKEM768.ciphertextBytes);
            ss.mixHash(ct);
            if (!this.#e?.kem) throw new HandshakeError("no local ephemeral KEM key");
            ss.mixKey(MLKEM768.decapsulate(ct, this.#e.kem.secretKey));
            break;
          }
          case "skem": {
            const ct = ss.decryptAndHash(take(sealed(MLKEM768.ciphertextBytes)));
            if (!this.#s?.kem) throw new HandshakeError("no local static KEM key");
            ss.mixKeyAndHash(MLKEM768.decapsulate(ct, this.#s.kem.secretKey));
            break;
          }
          default:
            ss.mixKey(this.#dhToken(t));
        }
      }
      const payload = ss.decryptAndHash(message.subarray(at));
      this.#index++;
      return payload;
    } catch (error) {
      if (error instanceof HandshakeError) throw error;
      throw new HandshakeError(`handshake message rejected: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** After the last message: `[send, receive]` cipher states for this side. */
  split(): { send: CipherState; receive: CipherState; handshakeHash: Uint8Array } {
    if (!this.finished) throw new HandshakeError("the handshake is not finished");
    const [c1, c2] = this.#ss.split();
    return this.#o.initiator
      ? { send: c1, receive: c2, handshakeHash: this.#ss.h }
      : { send: c2, receive: c1, handshakeHash: this.#ss.h };
  }
}
