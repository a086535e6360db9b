// SAML metadata (issue 61, point 2): the IdP's, read for what a connection needs (its entity id,
// its HTTP-Redirect single sign-on URL, whether it wants signed requests, its signing
// certificates), and ours, written for the IdP (entity id, assertion consumer URLs, our
// certificate). Reading metadata is reading plain XML: no signature is parsed or checked here
// (a response's signatures are node-saml's, saml.ts). A document with a DOCTYPE is refused
// (no entity of any kind is expanded).
import { X509Certificate } from 'node:crypto';
import { DOMParser } from '@xmldom/xmldom';
import xpath from 'xpath';
import { ApiError } from '../errors.ts';
import { urlProblem } from '../providers/options.ts';

export interface IdpMetadata {
  entityId: string;
  ssoUrl: string;
  wantsSignedRequests: boolean;
  /** PEM, each once, in the document's order. */
  certs: string[];
}

const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
export const MAX_METADATA_BYTES = 200_000;
const FETCH_TIMEOUT_MS = 5000;

export const metadataInvalid = (detail: string) => new ApiError('idp_metadata_invalid', detail);

/** A DER certificate (base64, as X509Certificate holds it) in PEM. */
export function pemOf(base64: string): string {
  const body = base64.replace(/\s+/g, '');
  return `-----BEGIN CERTIFICATE-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/** The IdP's metadata, checked; 422 idp_metadata_invalid saying what is missing or wrong. */
export function parseIdpMetadata(xml: string): IdpMetadata {
  if (xml.length > MAX_METADATA_BYTES) throw metadataInvalid(`The metadata is over ${MAX_METADATA_BYTES} characters.`);
  if (/<!DOCTYPE/i.test(xml)) throw metadataInvalid('The metadata has a DOCTYPE, which is refused.');
  let doc: Document;
  try {
    doc = new DOMParser({
      onError: (level, message) => {
        if (level !== 'warning') throw new Error(message);
      },
    }).parseFromString(xml, 'text/xml') as unknown as Document;
  } catch (error) {
    throw metadataInvalid(`The metadata is not well-formed XML (${(error as Error).message.slice(0, 200)}).`);
  }
  const select = (path: string, node: Node = doc) => xpath.select(path, node) as Node[];
  const idps = select("//*[local-name()='IDPSSODescriptor']");
  if (idps.length !== 1) throw metadataInvalid(`The metadata must have one IDPSSODescriptor (it has ${idps.length}).`);
  const idp = idps[0] as Element;
  const entity = idp.parentNode as Element | null;
  const entityId = entity?.getAttribute?.('entityID') ?? '';
  if (entityId === '' || entityId.length > 1024) throw metadataInvalid('The EntityDescriptor has no entityID.');
  const sso = (select("./*[local-name()='SingleSignOnService']", idp) as Element[]).find(
    (e) => e.getAttribute('Binding') === REDIRECT,
  );
  const ssoUrl = sso?.getAttribute('Location') ?? '';
  if (ssoUrl === '') throw metadataInvalid('The IdP has no SingleSignOnService of the HTTP-Redirect binding.');
  const wrong = urlProblem(ssoUrl, 'The SingleSignOnService Location');
  if (wrong !== undefined) throw metadataInvalid(`${wrong}.`);
  const keys = select("./*[local-name()='KeyDescriptor']", idp) as Element[];
  const certs: string[] = [];
  for (const key of keys) {
    const use = key.getAttribute('use');
    if (use !== null && use !== '' && use !== 'signing') continue;
    for (const cert of select(".//*[local-name()='X509Certificate']", key)) {
      const pem = pemOf(cert.textContent ?? '');
      try {
        new X509Certificate(pem);
      } catch {
        throw metadataInvalid('A signing X509Certificate of the metadata is not a certificate.');
      }
      if (!certs.includes(pem)) certs.push(pem);
    }
  }
  if (certs.length === 0) throw metadataInvalid('The IdP has no signing certificate (KeyDescriptor use="signing").');
  if (certs.length > 10) throw metadataInvalid('The IdP lists more than 10 signing certificates.');
  return { entityId, ssoUrl, wantsSignedRequests: idp.getAttribute('WantAuthnRequestsSigned') === 'true', certs };
}

/** The IdP's metadata at `url` (https, or http to loopback), at most 5 s and 200 kB, no redirects. */
export async function fetchIdpMetadata(url: string): Promise<IdpMetadata> {
  const wrong = urlProblem(url, 'saml.metadataUrl');
  if (wrong !== undefined) throw metadataInvalid(`${wrong}.`);
  let text: string;
  try {
    const response = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (!response.ok) throw new Error(`it answered ${response.status}`);
    const declared = Number(response.headers.get('content-length') ?? 0);
    if (declared > MAX_METADATA_BYTES) throw new Error(`it is over ${MAX_METADATA_BYTES} bytes`);
    text = await response.text();
  } catch (error) {
    throw metadataInvalid(`The metadata at ${url} could not be fetched: ${(error as Error).message.slice(0, 200)}.`);
  }
  return parseIdpMetadata(text);
}

const escapeXml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Our service provider's metadata for a connection. */
export function spMetadataXml(input: { entityId: string; acsUrls: readonly string[]; certPem: string }): string {
  const cert = input.certPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  const keyInfo = `<ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>`;
  const acs = input.acsUrls
    .map(
      (url, i) =>
        `    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="${escapeXml(url)}" index="${i}"${i === 0 ? ' isDefault="true"' : ''}/>`,
    )
    .join('\n');
  return `<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${escapeXml(input.entityId)}">
  <md:SPSSODescriptor AuthnRequestsSigned="true" WantAssertionsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing">${keyInfo}</md:KeyDescriptor>
    <md:KeyDescriptor use="encryption">${keyInfo}</md:KeyDescriptor>
    <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
${acs}
  </md:SPSSODescriptor>
</md:EntityDescriptor>
`;
}
