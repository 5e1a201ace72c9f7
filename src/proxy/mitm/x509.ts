/**
 * Certificates for interception, minted in process with `@peculiar/x509`
 * on WebCrypto (loaded on first use): an ECDSA P-256 CA whose private key is
 * a non-extractable `CryptoKey` (it never leaves memory, let alone reaches
 * disk), and per-host leaf certificates (DNS or IP SAN, serverAuth).
 *
 * @module
 */

import { isIPv4, isIPv6 } from "../../util/host.ts";

type X509 = typeof import("@peculiar/x509");
let loading: Promise<X509> | null = null;

/** Loads the X.509 library (it needs the `reflect-metadata` polyfill first). */
function x509(): Promise<X509> {
  loading ??= (async () => {
    await import("reflect-metadata");
    const lib = await import("@peculiar/x509");
    lib.cryptoProvider.set(crypto);
    return lib;
  })();
  return loading;
}

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY = 24 * 60 * 60 * 1000;

function serial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f; // positive
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = new Uint8Array(der).toBase64();
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)!.join("\n")}\n-----END ${label}-----\n`;
}

/** A certificate authority held in memory. */
export interface MitmCa {
  /** The certificate (PEM). */
  readonly certPem: string;
  /** Mints a leaf for `host`. */
  mintLeaf(host: string): Promise<{ certPem: string; keyPem: string }>;
}

/** Generates a CA (`CN=network_proxy MITM CA`, 10 years). */
export async function generateMitmCa(): Promise<MitmCa> {
  const lib = await x509();
  const keys = await crypto.subtle.generateKey(ALG, false, ["sign", "verify"]) as CryptoKeyPair;
  const now = Date.now();
  const ca = await lib.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: "CN=network_proxy MITM CA",
    notBefore: new Date(now - DAY),
    notAfter: new Date(now + 3650 * DAY),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new lib.BasicConstraintsExtension(true, undefined, true),
      new lib.KeyUsagesExtension(
        lib.KeyUsageFlags.keyCertSign | lib.KeyUsageFlags.cRLSign |
          lib.KeyUsageFlags.digitalSignature |
          lib.KeyUsageFlags.keyEncipherment,
        true,
      ),
      await lib.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const aki = await lib.AuthorityKeyIdentifierExtension.create(keys.publicKey);
  return {
    certPem: ca.toString("pem") + "\n",
    async mintLeaf(host: string) {
      const leafKeys = await crypto.subtle.generateKey(ALG, true, [
        "sign",
        "verify",
      ]) as CryptoKeyPair;
      const ip = isIPv4(host) || isIPv6(host);
      const t = Date.now();
      const leaf = await lib.X509CertificateGenerator.create({
        serialNumber: serial(),
        subject: ip ? "CN=network_proxy MITM" : `CN=${host.replace(/[,+="\\<>;]/g, "")}`,
        issuer: ca.subject,
        notBefore: new Date(t - DAY),
        notAfter: new Date(t + 365 * DAY),
        signingKey: keys.privateKey,
        publicKey: leafKeys.publicKey,
        signingAlgorithm: ALG,
        extensions: [
          new lib.BasicConstraintsExtension(false, undefined, true),
          new lib.KeyUsagesExtension(
            lib.KeyUsageFlags.digitalSignature | lib.KeyUsageFlags.keyEncipherment,
            true,
          ),
          new lib.ExtendedKeyUsageExtension([lib.ExtendedKeyUsage.serverAuth]),
          new lib.SubjectAlternativeNameExtension([{ type: ip ? "ip" : "dns", value: host }]),
          aki,
        ],
      });
      const key = await crypto.subtle.exportKey("pkcs8", leafKeys.privateKey);
      return { certPem: leaf.toString("pem") + "\n", keyPem: pem("PRIVATE KEY", key) };
    },
  };
}
