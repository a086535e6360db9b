// A key pair and a self-signed certificate (PEM), made with @peculiar/x509 over WebCrypto: our
// service provider's per SAML connection (connections.ts), and, in the tests, an IdP's as its
// admin makes one (contract-tests' sso-harness.ts). One maker for both, so that the certificates
// the tests trust are made as ours are.
import { webcrypto } from 'node:crypto';
// @peculiar/x509 reads its classes' metadata through tsyringe, which needs this polyfill of Reflect.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const RSA_SHA256 = {
  name: 'RSASSA-PKCS1-v1_5',
  hash: 'SHA-256',
  publicExponent: new Uint8Array([1, 0, 1]),
  modulusLength: 2048,
};

/** An RSA-2048 key (PKCS #8 PEM) and its self-signed SHA-256 certificate, valid from a minute ago. */
export async function selfSignedKeyPair(options: {
  commonName: string;
  /** Hex, at most 16 digits. */
  serialNumber: string;
  validForMs: number;
}): Promise<{ certPem: string; keyPem: string }> {
  const keys = (await webcrypto.subtle.generateKey(RSA_SHA256, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: options.serialNumber,
    name: `CN=${options.commonName}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + options.validForMs),
    signingAlgorithm: RSA_SHA256,
    keys,
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey as webcrypto.CryptoKey));
  const keyPem = `-----BEGIN PRIVATE KEY-----\n${pkcs8
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END PRIVATE KEY-----\n`;
  return { certPem: cert.toString('pem'), keyPem };
}
