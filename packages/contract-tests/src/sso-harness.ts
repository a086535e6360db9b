// What the enterprise sign-in tests (sso.test.ts) start beside the server: a real DNS server on a
// loopback port (dns2) whose TXT records a test sets, and a SAML identity provider built with
// samlify's IdP role, whose signed (and encrypted) responses a test posts as the site's backend would.
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { selfSignedKeyPair } from '@user-accounts/server/sso/certificates';
import dns2 from 'dns2';
import * as samlify from 'samlify';

export interface LocalDns {
  port: number;
  /** Sets the TXT records of a name (replacing any). */
  setTxt(name: string, values: string[]): void;
  /** Adds a TXT record to a name's. */
  addTxt(name: string, value: string): void;
  close(): Promise<void>;
}

export async function startDns(): Promise<LocalDns> {
  const records = new Map<string, string[]>();
  const server = dns2.createServer({
    udp: true,
    handle(request, send) {
      const response = dns2.Packet.createResponseFromRequest(request);
      const [question] = request.questions;
      const values = question === undefined ? undefined : records.get(question.name.toLowerCase());
      if (question !== undefined && values !== undefined && question.type === dns2.Packet.TYPE.TXT) {
        for (const data of values)
          response.answers.push({
            name: question.name,
            type: dns2.Packet.TYPE.TXT,
            class: dns2.Packet.CLASS.IN,
            ttl: 1,
            data,
          } as never);
      } else if (values === undefined) {
        response.header.rcode = 3; // NXDOMAIN
      }
      send(response);
    },
  });
  const addresses = await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  return {
    port: (addresses as { udp: { port: number } }).udp.port,
    setTxt: (name, values) => void records.set(name.toLowerCase(), values),
    addTxt: (name, value) => void records.set(name.toLowerCase(), [...(records.get(name.toLowerCase()) ?? []), value]),
    close: () => server.close(),
  };
}

/** A key and a self-signed certificate (PEM), as an IdP's admin makes them (by the server's own maker). */
export const keyPair = (name: string) =>
  selfSignedKeyPair({
    commonName: name,
    serialNumber: randomBytes(8).toString('hex'),
    validForMs: 365 * 24 * 3600 * 1000,
  });

/** What a response may say otherwise than the IdP would (the refusal tests' forgeries). */
export interface ResponseChanges {
  Audience?: string;
  Destination?: string;
  SubjectRecipient?: string;
  Issuer?: string;
  InResponseTo?: string;
  /** Seconds from now of NotBefore and NotOnOrAfter (both the conditions' and the confirmation's). */
  notBefore?: number;
  notOnOrAfter?: number;
}

export interface LocalIdp {
  baseUrl: string;
  entityId: string;
  metadataUrl: string;
  /** The IdP's metadata as it publishes it now. */
  metadata(): string;
  /** Signs with a new key, publishing the new certificate beside the old (rollover), or alone. */
  rollOver(options?: { dropOld?: boolean }): Promise<void>;
  /**
   * Answers the AuthnRequest of `authorizationUrl` for `email` as the IdP's login page would
   * (after the person signed in there): the SAMLResponse and RelayState its form posts.
   */
  respond(
    authorizationUrl: string,
    email: string,
    options?: { spMetadata?: string; assertionSigned?: boolean; encrypted?: boolean; changes?: ResponseChanges },
  ): Promise<{ samlResponse: string; relayState: string }>;
  /** A response nobody asked for (IdP-initiated). */
  unsolicited(email: string, spMetadata: string, acs: string): Promise<string>;
  /** The AuthnRequests received, parsed: whether each was signed. */
  requests: { signed: boolean; id: string }[];
  close(): Promise<void>;
}

samlify.setSchemaValidator({ validate: async () => 'skipped: the test IdP trusts the server under test' });

/** A SAML identity provider (samlify's IdP role) on a loopback port: its metadata at /metadata. */
export async function startIdp(options: { wantSignedRequests?: boolean; encrypt?: boolean } = {}): Promise<LocalIdp> {
  let keys = [await keyPair('test-idp')];
  let signWith = keys[0]!;
  const server = createHttpServer((request, response) => {
    if (request.url === '/metadata') {
      response.writeHead(200, { 'content-type': 'application/samlmetadata+xml' });
      response.end(metadataXml());
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entityId = `${baseUrl}/entity`;
  const certBody = (pem: string) => pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  const metadataXml = (listed = keys) =>
    `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${entityId}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="${options.wantSignedRequests === true}" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
${listed
  .map(
    (k) =>
      `    <md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${certBody(k.certPem)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`,
  )
  .join('\n')}
    <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${baseUrl}/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>
`;
  const entity = (encrypt: boolean) =>
    samlify.IdentityProvider({
      // The certificate it signs with alone (samlify signs with the one its own metadata names).
      metadata: metadataXml([signWith]),
      privateKey: signWith.keyPem,
      signingCert: signWith.certPem,
      isAssertionEncrypted: encrypt,
      wantAuthnRequestsSigned: options.wantSignedRequests === true,
    });
  const spOf = (metadata: string, assertionSigned: boolean) =>
    samlify.ServiceProvider({
      metadata: assertionSigned
        ? metadata.replace('WantAssertionsSigned="false"', 'WantAssertionsSigned="true"')
        : metadata,
    });
  const requests: { signed: boolean; id: string }[] = [];

  async function build(
    sp: ReturnType<typeof samlify.ServiceProvider>,
    encrypt: boolean,
    email: string,
    inResponseTo: string,
    changes: ResponseChanges,
  ): Promise<string> {
    const now = Date.now();
    const at = (seconds: number) => new Date(now + seconds * 1000).toISOString();
    const acs = /AssertionConsumerService[^>]*Location="([^"]+)"/.exec(sp.entityMeta.getMetadata())?.[1] ?? '';
    const made = await entity(encrypt).createLoginResponse(
      sp,
      { extract: { request: { id: inResponseTo } } },
      'post',
      { email },
      (template: string) => {
        const values = {
          ID: `_${randomBytes(16).toString('hex')}`,
          AssertionID: `_${randomBytes(16).toString('hex')}`,
          Destination: changes.Destination ?? acs,
          Audience: changes.Audience ?? sp.entityMeta.getEntityID(),
          SubjectRecipient: changes.SubjectRecipient ?? changes.Destination ?? acs,
          Issuer: changes.Issuer ?? entityId,
          IssueInstant: at(changes.notBefore ?? 0),
          StatusCode: 'urn:oasis:names:tc:SAML:2.0:status:Success',
          ConditionsNotBefore: at(changes.notBefore ?? -1),
          ConditionsNotOnOrAfter: at(changes.notOnOrAfter ?? 300),
          SubjectConfirmationDataNotOnOrAfter: at(changes.notOnOrAfter ?? 300),
          NameIDFormat: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
          NameID: email,
          InResponseTo: changes.InResponseTo ?? inResponseTo,
          AuthnStatement: `<saml:AuthnStatement AuthnInstant="${at(0)}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`,
          AttributeStatement: '',
        };
        const raw = samlify.SamlLib.replaceTagsByValue(template, values as never);
        // The statement is XML of ours: put it back unescaped.
        const statement = raw.replace(
          samlify.SamlLib.replaceTagsByValue('{AuthnStatement}', { AuthnStatement: values.AuthnStatement }),
          values.AuthnStatement,
        );
        // An unsolicited response answers no request: no InResponseTo at all.
        return {
          id: values.ID,
          context: values.InResponseTo === '' ? statement.replaceAll(' InResponseTo=""', '') : statement,
        };
      },
    );
    return made.context;
  }

  const idp: LocalIdp = {
    baseUrl,
    entityId,
    metadataUrl: `${baseUrl}/metadata`,
    metadata: () => metadataXml(),
    async rollOver({ dropOld = false } = {}) {
      const next = await keyPair('test-idp-next');
      keys = dropOld ? [next] : [...keys, next];
      signWith = next;
    },
    requests,
    async respond(authorizationUrl, email, respondOptions = {}) {
      const url = new URL(authorizationUrl);
      const query = Object.fromEntries(url.searchParams);
      const octetString = url.search
        .slice(1)
        .split('&')
        .filter((p) => !p.startsWith('Signature='))
        .join('&');
      const spMetadata = respondOptions.spMetadata!;
      const sp = spOf(spMetadata, respondOptions.assertionSigned ?? false);
      const parsed = await entity(false).parseLoginRequest(sp, 'redirect', { query, octetString });
      const id = parsed.extract.request!.id as string;
      requests.push({ signed: query.Signature !== undefined, id });
      const samlResponse = await build(sp, respondOptions.encrypted ?? false, email, id, respondOptions.changes ?? {});
      return { samlResponse, relayState: query.RelayState! };
    },
    async unsolicited(email, spMetadata, _acs) {
      return build(spOf(spMetadata, false), false, email, '', {});
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return idp;
}
