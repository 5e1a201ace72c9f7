/**
 * Trust material: certificates from the system store, from CA files named
 * by the proxy's startup environment (`CUSTOM_CA_ENV_KEYS`) and from
 * `SSL_CERT_DIR`; the bundle children get (those plus the managed CA, last);
 * and the extra roots for the proxy's own TLS upstreams (the startup CAs;
 * the managed CA is never trusted upstream).
 *
 * @module
 */

import { join } from "node:path";
import { CUSTOM_CA_ENV_KEYS } from "../env.ts";

/** Where distributions keep the system CA bundle. */
export const SYSTEM_BUNDLES: readonly string[] = [
  "/etc/ssl/certs/ca-certificates.crt",
  "/etc/pki/tls/certs/ca-bundle.crt",
  "/etc/ssl/ca-bundle.pem",
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
  "/etc/ssl/cert.pem",
  "/usr/local/etc/openssl/cert.pem",
];

function derLength(der: Uint8Array): number | null {
  if (der[0] !== 0x30) return null;
  const first = der[1]!;
  if (first < 0x80) return 2 + first;
  const n = first & 0x7f;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + der[2 + i]!;
  return 2 + n + len;
}

function pemBlock(der: Uint8Array): string {
  return `-----BEGIN CERTIFICATE-----\n${
    der.toBase64().match(/.{1,64}/g)!.join("\n")
  }\n-----END CERTIFICATE-----\n`;
}

/**
 * The certificates in PEM text: `CERTIFICATE` blocks as they are, OpenSSL
 * `TRUSTED CERTIFICATE` blocks reduced to the certificate; keys and
 * everything else dropped.
 */
export function extractCertificates(text: string): string[] {
  const out: string[] = [];
  const re =
    /-----BEGIN (TRUSTED )?CERTIFICATE-----([\s\S]*?)-----END (?:TRUSTED )?CERTIFICATE-----/g;
  for (const m of text.matchAll(re)) {
    let der: Uint8Array;
    try {
      der = Uint8Array.fromBase64(m[2]!.replace(/\s+/g, ""));
    } catch {
      continue;
    }
    if (m[1]) {
      const len = derLength(der);
      if (len === null || len > der.length) continue;
      der = der.subarray(0, len);
    }
    out.push(pemBlock(der));
  }
  return out;
}

async function readCerts(path: string): Promise<string[]> {
  try {
    return extractCertificates(await Deno.readTextFile(path));
  } catch {
    return [];
  }
}

/** Certificates named by the startup environment (files and `SSL_CERT_DIR`). */
export async function startupCertificates(
  env: (name: string) => string | undefined,
  skip: (path: string) => Promise<boolean> = () => Promise.resolve(false),
): Promise<string[]> {
  const certs: string[] = [];
  for (const key of CUSTOM_CA_ENV_KEYS) {
    const path = env(key);
    if (!path || await skip(path)) continue;
    certs.push(...await readCerts(path));
  }
  for (const dir of (env("SSL_CERT_DIR") ?? "").split(":").filter(Boolean)) {
    try {
      for await (const entry of Deno.readDir(dir)) {
        if (entry.isFile || entry.isSymlink) certs.push(...await readCerts(join(dir, entry.name)));
      }
    } catch { /* missing directory */ }
  }
  return certs;
}

/** The system store's certificates. */
export async function systemCertificates(): Promise<string[]> {
  for (const path of SYSTEM_BUNDLES) {
    const certs = await readCerts(path);
    if (certs.length) return certs;
  }
  return [];
}

/** De-duplicates certificates, dropping `exclude`, keeping order. */
export function uniqueCertificates(
  certs: readonly string[],
  exclude: readonly string[] = [],
): string[] {
  const key = (pem: string) => pem.replace(/-----[^-]+-----|\s+/g, "");
  const seen = new Set(exclude.map(key));
  const out: string[] = [];
  for (const c of certs) {
    const k = key(c);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(c);
  }
  return out;
}
