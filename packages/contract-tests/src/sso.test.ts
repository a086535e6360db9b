// Enterprise single sign-on per organization (issue 61) through the client, on PGlite and
// PostgreSQL: verified domains against a real DNS server on a loopback port (DNS_RESOLVER), SAML
// connections, and sign-ins through a real SAML identity provider (samlify's IdP role) whose
// responses the test posts as the site's backend forwards them; and every forged or replayed
// response refused with nothing created.
import { randomUUID } from 'node:crypto';
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { DOMParser, XMLSerializer } from '@xmldom/xmldom';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { checkedClient, issuedTicket, useTarget } from './harness.ts';
import { type Person, signInAt, startOidcProvider } from './oauth-peers.ts';
import { type LocalIdp, type ResponseChanges, startDns, startIdp } from './sso-harness.ts';
import {
  embeddedServer,
  postgresTarget,
  serverTarget,
  type TargetSpec,
  TEST_FACTOR_KEY,
  TEST_METRICS_TOKEN,
} from './targets.ts';
import { SoftAuthenticator } from './webauthn/soft-authenticator.ts';

const dns = await startDns();
afterAll(() => dns.close());
const PUBLIC_URL = 'https://accounts.test';
const PASSKEY_ORIGIN = 'http://localhost:5173';
const env = { DNS_RESOLVER: `127.0.0.1:${dns.port}`, PUBLIC_URL };

const problemOf = (answer: { error?: unknown; response: Response }, status: number, code: string) => {
  expect(answer.response.status, JSON.stringify(answer.error)).toBe(status);
  expect((answer.error as Problem).code).toBe(code);
  return answer.error as Problem;
};

/** The site's event feed, read (long-polled) until `done` holds of what came so far. */
async function feedUntil(
  c: UserAccountsClient,
  done: (events: { type: string; data: unknown }[]) => boolean,
): Promise<{ type: string; data: unknown }[]> {
  const events: { type: string; data: unknown }[] = [];
  let after: string | undefined;
  for (let i = 0; i < 20 && !done(events); i++) {
    const { data, error } = await c.GET('/api/1/events', {
      params: { query: { limit: 1000, ...(after === undefined ? {} : { after, wait: 2 }) } },
    });
    expect(error, JSON.stringify(error)).toBeUndefined();
    events.push(...(data!.result.events as { type: string; data: unknown }[]));
    after = data!.result.next;
  }
  return events;
}

const DSIG = 'http://www.w3.org/2000/09/xmldsig#';
const SAMLP = 'urn:oasis:names:tc:SAML:2.0:protocol';
type El = Element;
/** A posted response changed as an attacker would: decoded, its DOM edited, encoded again. */
function forge(samlResponse: string, edit: (doc: Document, response: El) => void): string {
  const doc = new DOMParser().parseFromString(
    Buffer.from(samlResponse, 'base64').toString(),
    'text/xml',
  ) as unknown as Document;
  edit(doc, doc.documentElement as El);
  return Buffer.from(new XMLSerializer().serializeToString(doc as never)).toString('base64');
}
const children = (el: El, local: string) =>
  Array.from(el.childNodes).filter((n) => (n as El).localName === local) as El[];
const child = (el: El, local: string) => children(el, local)[0]!;
const deep = (el: El) => el.cloneNode(true) as El;
const withoutSignature = (el: El) => {
  const copy = deep(el);
  for (const sig of children(copy, 'Signature')) copy.removeChild(sig);
  return copy;
};
/** The assertion saying someone else: another NameID, a new ID (unless kept), no signature of its own. */
function evil(assertion: El, nameId: string, keepId = false): El {
  const copy = withoutSignature(assertion);
  if (!keepId) copy.setAttribute('ID', `_evil${randomUUID().replaceAll('-', '')}`);
  const name = copy.getElementsByTagNameNS('*', 'NameID')[0]!;
  name.textContent = nameId;
  return copy;
}
/** Somorovsky et al.'s eight XML Signature Wrapping variants, by what is signed. */
const XSW: Record<string, { signed: 'response' | 'assertion'; wrap: (doc: Document, r: El, mallory: string) => void }> =
  {
    // 1: the evil Response is the root; the signed original sits inside its Signature.
    XSW1: {
      signed: 'response',
      wrap(doc, r, mallory) {
        const original = withoutSignature(r);
        const sig = child(r, 'Signature');
        r.setAttribute('ID', `_evil${randomUUID().replaceAll('-', '')}`);
        r.replaceChild(evil(child(r, 'Assertion'), mallory), child(r, 'Assertion'));
        sig.appendChild(original);
      },
    },
    // 2: as 1, the signed original a sibling before the Signature (detached).
    XSW2: {
      signed: 'response',
      wrap(doc, r, mallory) {
        const original = withoutSignature(r);
        const sig = child(r, 'Signature');
        r.setAttribute('ID', `_evil${randomUUID().replaceAll('-', '')}`);
        r.replaceChild(evil(child(r, 'Assertion'), mallory), child(r, 'Assertion'));
        r.insertBefore(original, sig);
      },
    },
    // 3: an evil Assertion before the signed one.
    XSW3: {
      signed: 'assertion',
      wrap(doc, r, mallory) {
        const a = child(r, 'Assertion');
        r.insertBefore(evil(a, mallory), a);
      },
    },
    // 4: the evil Assertion in the signed one's place, the signed one inside it.
    XSW4: {
      signed: 'assertion',
      wrap(doc, r, mallory) {
        const a = child(r, 'Assertion');
        const e = evil(a, mallory);
        r.replaceChild(e, a);
        e.appendChild(a);
      },
    },
    // 5: the evil Assertion keeps the Signature (same ID); the original, unsigned, appended to the Response.
    XSW5: {
      signed: 'assertion',
      wrap(doc, r, mallory) {
        const a = child(r, 'Assertion');
        const e = evil(a, mallory, true);
        e.insertBefore(deep(child(a, 'Signature')), child(e, 'Subject'));
        r.replaceChild(e, a);
        r.appendChild(withoutSignature(a));
      },
    },
    // 6: the evil Assertion keeps the Signature; the original inside that Signature.
    XSW6: {
      signed: 'assertion',
      wrap(doc, r, mallory) {
        const a = child(r, 'Assertion');
        const e = evil(a, mallory, true);
        const sig = deep(child(a, 'Signature'));
        e.insertBefore(sig, child(e, 'Subject'));
        sig.appendChild(withoutSignature(a));
        r.replaceChild(e, a);
      },
    },
    // 7: the signed Assertion moved into an Extensions element; the evil one in its place.
    XSW7: {
      signed: 'assertion',
      wrap(doc, r, mallory) {
        const a = child(r, 'Assertion');
        const extensions = doc.createElementNS(SAMLP, 'samlp:Extensions');
        r.insertBefore(extensions, child(r, 'Status'));
        r.replaceChild(evil(a, mallory), a);
        extensions.appendChild(a);
      },
    },
    // 8: the evil Assertion keeps the Signature; the original in a ds:Object inside it.
    XSW8: {
      signed: 'assertion',
      wrap(doc, r, mallory) {
        const a = child(r, 'Assertion');
        const e = evil(a, mallory, true);
        const sig = deep(child(a, 'Signature'));
        e.insertBefore(sig, child(e, 'Subject'));
        const object = doc.createElementNS(DSIG, 'ds:Object');
        object.appendChild(withoutSignature(a));
        sig.appendChild(object);
        r.replaceChild(e, a);
      },
    },
  };

function defineSsoSuite(spec: TargetSpec): void {
  if (spec.skip) {
    describe.skip(`${spec.name}: enterprise sign-in (${spec.skip})`, () => {
      it('skipped', () => {});
    });
    return;
  }
  describe(`${spec.name}: enterprise sign-in`, () => {
    const h = useTarget(spec);

    /** A site of the test's own with its roles, and an organization in it. */
    async function site() {
      const name = `sso-${randomUUID().slice(0, 8)}`;
      const { token } = await h.target.createToken({
        site: name,
        scopes: ['read', 'write', 'verify', 'events'],
        label: name,
      });
      const c = h.clientFor(token);
      const roles = await c.POST('/api/1/org/roles', {
        body: {
          roles: [
            { role: 'member', permissions: ['projects:read'] },
            { role: 'admin', permissions: ['projects:read', 'members:invite'] },
          ],
        },
      });
      expect(roles.response.status).toBe(200);
      const org = async (orgName = 'Acme') => {
        const { data, error } = await c.POST('/api/1/org/create', { body: { name: orgName } });
        expect(error, JSON.stringify(error)).toBeUndefined();
        return data!.result.orgId;
      };
      return { name, c, org };
    }

    /** A domain of the test's own, unique so that tests never share a DNS name. */
    const domainOf = () => `acme-${randomUUID().slice(0, 8)}.example`;

    async function verifiedDomain(c: UserAccountsClient, orgId: string, domain = domainOf()) {
      const added = await c.POST('/api/1/org/domain/add', { body: { orgId, domain } });
      expect(added.error, JSON.stringify(added.error)).toBeUndefined();
      dns.addTxt(added.data!.result.txtName, added.data!.result.txtValue);
      const verified = await c.POST('/api/1/org/domain/verify', { body: { orgId, domain } });
      expect(verified.error, JSON.stringify(verified.error)).toBeUndefined();
      return domain;
    }

    const ACS = 'https://shop.example.com/sso/acs';

    /** A site, an organization with a verified domain, a SAML IdP and its connection. */
    async function samlSetup(
      options: { wantSignedRequests?: boolean; allowIdpInitiated?: boolean; enforce?: boolean } = {},
    ) {
      const s = await site();
      const orgId = await s.org();
      const domain = await verifiedDomain(s.c, orgId);
      const idp = await startIdp({ wantSignedRequests: options.wantSignedRequests ?? false });
      idps.push(idp);
      const made = await s.c.POST('/api/1/org/connection/create', {
        body: {
          orgId,
          kind: 'saml',
          saml: { metadataUrl: idp.metadataUrl },
          redirectUris: [ACS],
          defaultRoles: ['member'],
          enforce: options.enforce ?? false,
          allowIdpInitiated: options.allowIdpInitiated ?? false,
        },
      });
      expect(made.error, JSON.stringify(made.error)).toBeUndefined();
      const connection = made.data!.result;
      const spMetadata = await (await fetch(`${h.target.baseUrl}/sso/${connection.connectionId}/metadata`)).text();
      const start = async (email: string) => {
        const started = await s.c.POST('/api/1/sso/start', { body: { email, redirectUri: ACS } });
        expect(started.error, JSON.stringify(started.error)).toBeUndefined();
        return started.data!.result.authorizationUrl;
      };
      const finish = (body: { samlResponse: string; relayState?: string; connectionId?: string }) =>
        s.c.POST('/api/1/sso/callback', { body: { ...body, session: { userAgent: 'test' } } });
      const accounts = async () =>
        Number((await h.target.sql('select count(*)::int as n from users where site = $1', [s.name]))[0]!.n);
      return { ...s, orgId, domain, idp, connection, spMetadata, start, finish, accounts };
    }
    const idps: LocalIdp[] = [];
    afterAll(async () => {
      for (const idp of idps) await idp.close();
    });

    describe('SAML connections', () => {
      it('keeps the IdP’s metadata and publishes ours; other sites see nothing of it', async () => {
        const t = await samlSetup();
        expect(t.connection).toMatchObject({
          orgId: t.orgId,
          kind: 'saml',
          redirectUris: [ACS],
          defaultRoles: ['member'],
          saml: {
            idpEntityId: t.idp.entityId,
            ssoUrl: `${t.idp.baseUrl}/sso`,
            metadataUrl: t.idp.metadataUrl,
            wantsSignedRequests: false,
            spEntityId: `${PUBLIC_URL}/sso/${t.connection.connectionId}/metadata`,
          },
          oidc: null,
        });
        expect(t.connection.saml!.certificates).toHaveLength(1);
        expect(t.spMetadata).toContain(`entityID="${PUBLIC_URL}/sso/${t.connection.connectionId}/metadata"`);
        expect(t.spMetadata).toContain(`Location="${ACS}"`);
        expect(t.spMetadata).toContain('<ds:X509Certificate>');
        expect(t.spMetadata).not.toContain('PRIVATE');
        const row = (
          await h.target.sql('select sp_key_sealed from sso_connections where id = $1', [t.connection.connectionId])
        )[0]!;
        expect(String(row.sp_key_sealed)).toMatch(/^v1\./);
        const listed = await t.c.GET('/api/1/org/connection/list', { params: { query: { orgId: t.orgId } } });
        expect(listed.data!.result.connections.map((c) => c.connectionId)).toEqual([t.connection.connectionId]);

        const other = await site();
        problemOf(
          await other.c.GET('/api/1/org/connection/get', {
            params: { query: { connectionId: t.connection.connectionId } },
          }),
          404,
          'connection_not_found',
        );
        problemOf(
          await other.c.POST('/api/1/org/connection/delete', { body: { connectionId: t.connection.connectionId } }),
          404,
          'connection_not_found',
        );
        problemOf(
          await other.c.POST('/api/1/sso/start', {
            body: { connectionId: t.connection.connectionId, redirectUri: ACS },
          }),
          404,
          'connection_not_found',
        );
        problemOf(
          await other.c.POST('/api/1/sso/start', { body: { email: `ada@${t.domain}`, redirectUri: ACS } }),
          404,
          'connection_not_found',
        );
        // A domain no organization verified: the site falls back to its usual login.
        problemOf(
          await t.c.POST('/api/1/sso/start', { body: { email: 'ada@elsewhere.example', redirectUri: ACS } }),
          404,
          'connection_not_found',
        );
        const wrongUri = await t.c.POST('/api/1/sso/start', {
          body: { email: `ada@${t.domain}`, redirectUri: 'https://evil.example/acs' },
        });
        expect(problemOf(wrongUri, 400, 'invalid_request').errors?.[0]?.pointer).toBe('/redirectUri');
      });

      it('refuses metadata without a signing certificate, and a plain-http metadata URL that is not loopback', async () => {
        const s = await site();
        const orgId = await s.org();
        const bad = await s.c.POST('/api/1/org/connection/create', {
          body: {
            orgId,
            kind: 'saml',
            saml: {
              metadataXml:
                '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="x"><md:IDPSSODescriptor><md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example/sso"/></md:IDPSSODescriptor></md:EntityDescriptor>',
            },
            redirectUris: [ACS],
          },
        });
        expect(problemOf(bad, 422, 'idp_metadata_invalid').detail).toContain('signing certificate');
        const http = await s.c.POST('/api/1/org/connection/create', {
          body: { orgId, kind: 'saml', saml: { metadataUrl: 'http://idp.example/metadata' }, redirectUris: [ACS] },
        });
        problemOf(http, 400, 'invalid_request');
        const role = await s.c.POST('/api/1/org/connection/create', {
          body: { orgId, kind: 'saml', saml: { metadataXml: '<x/>' }, redirectUris: [ACS], defaultRoles: ['nobody'] },
        });
        expect([400, 422]).toContain(role.response.status);
      });
    });

    describe('SAML sign-in', () => {
      it('signs a person in: the account made just in time, a member with the default roles, a session with amr fed and the connection', async () => {
        const t = await samlSetup();
        const email = `ada@${t.domain}`;
        const url = await t.start(email);
        expect(url.startsWith(`${t.idp.baseUrl}/sso?SAMLRequest=`)).toBe(true);
        const posted = await t.idp.respond(url, email, { spMetadata: t.spMetadata });
        const done = await t.finish(posted);
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        const result = done.data!.result;
        expect(result).toMatchObject({
          connectionId: t.connection.connectionId,
          orgId: t.orgId,
          created: true,
          status: 'signed in',
        });
        const session = await t.c.POST('/api/1/session/verify', { body: { token: result.session!.token } });
        expect(session.data!.result).toMatchObject({ _userId: result._userId, amr: ['fed'] });
        const row = (
          await h.target.sql('select connection_id from sessions where id = $1', [result.session!.sessionId])
        )[0]!;
        expect(row.connection_id).toBe(t.connection.connectionId);
        const member = await t.c.GET('/api/1/org/member/check', {
          params: { query: { orgId: t.orgId, _userId: result._userId } },
        });
        expect(member.data!.result).toMatchObject({ member: true, roles: ['member'] });
        const user = await t.c.GET('/api/1/user/get', { params: { query: { _userId: result._userId } } });
        expect(user.data!.result).toMatchObject({ email, emailVerified: true });

        // The second time: a login of the same account, nothing made.
        const again = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(again.data!.result).toMatchObject({ _userId: result._userId, created: false });
        expect(await t.accounts()).toBe(1);
        // No assertion, certificate or key in the audit trail.
        const audit = JSON.stringify(await h.target.sql('select * from audit_log where site = $1', [t.name]));
        expect(audit).not.toContain('Assertion');
        expect(audit).not.toContain('CERTIFICATE');
      });

      it('links the site’s account of that email instead of making another', async () => {
        const t = await samlSetup();
        const email = `grace@${t.domain}`;
        const existing = await t.c.POST('/api/1/user/create', {
          body: { email, password: h.password(), name: 'Grace Hopper' },
        });
        const done = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(done.data!.result).toMatchObject({ _userId: existing.data!.result._userId, created: false });
        expect(await t.accounts()).toBe(1);
      });

      it('answers identity_unlinked for an email outside the organization’s verified domains, making nothing', async () => {
        const t = await samlSetup();
        const done = await t.finish(
          await t.idp.respond(await t.start(`ada@${t.domain}`), 'ada@elsewhere.example', { spMetadata: t.spMetadata }),
        );
        const problem = problemOf(done, 409, 'identity_unlinked') as Problem & {
          linkTicket?: string;
          identity?: { email: string | null; emailVerified: boolean };
        };
        // A link ticket, as provider/callback's: the email not vouched for (outside the verified domains).
        expect(problem.linkTicket).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(problem.identity).toMatchObject({ email: 'ada@elsewhere.example', emailVerified: false });
        expect(await t.accounts()).toBe(0);
      });

      it('signs its AuthnRequests when the IdP wants it, and reads encrypted assertions', async () => {
        const t = await samlSetup({ wantSignedRequests: true });
        expect(t.connection.saml!.wantsSignedRequests).toBe(true);
        const email = `ada@${t.domain}`;
        const url = await t.start(email);
        expect(new URL(url).searchParams.get('Signature')).not.toBeNull();
        const posted = await t.idp.respond(url, email, {
          spMetadata: t.spMetadata,
          assertionSigned: true,
          encrypted: true,
        });
        expect(Buffer.from(posted.samlResponse, 'base64').toString()).toContain('EncryptedAssertion');
        expect(t.idp.requests.at(-1)!.signed).toBe(true);
        const done = await t.finish(posted);
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        expect(done.data!.result.created).toBe(true);
      });

      it('follows a certificate rollover: the new certificate read from the metadata on its first signature, the old one removed by an update', async () => {
        const t = await samlSetup();
        const email = `ada@${t.domain}`;
        await t.idp.rollOver();
        // The metadata was read less than a minute ago: the unknown certificate is refused for now…
        const early = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        problemOf(early, 422, 'sso_response_invalid');
        // …and read again once a minute has passed (as if the connection's metadata were older).
        await h.target.sql(
          "update sso_connections set saml_metadata_refreshed_at = now() - interval '2 minutes' where id = $1",
          [t.connection.connectionId],
        );
        const done = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        const got = await t.c.GET('/api/1/org/connection/get', {
          params: { query: { connectionId: t.connection.connectionId } },
        });
        expect(got.data!.result.saml!.certificates).toHaveLength(2);
        // The IdP drops the old certificate; the admin reads the metadata again (update): one left.
        await t.idp.rollOver({ dropOld: true });
        const updated = await t.c.POST('/api/1/org/connection/update', {
          body: { connectionId: t.connection.connectionId, saml: { metadataUrl: t.idp.metadataUrl } },
        });
        expect(updated.data!.result.saml!.certificates).toHaveLength(1);
        const after = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(after.error, JSON.stringify(after.error)).toBeUndefined();
      });

      it('reads the metadata again when it is a day old', async () => {
        const t = await samlSetup();
        await t.idp.rollOver({ dropOld: true });
        await h.target.sql(
          "update sso_connections set saml_metadata_refreshed_at = now() - interval '25 hours' where id = $1",
          [t.connection.connectionId],
        );
        const email = `ada@${t.domain}`;
        const done = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        const got = await t.c.GET('/api/1/org/connection/get', {
          params: { query: { connectionId: t.connection.connectionId } },
        });
        expect(got.data!.result.saml!.certificates).toHaveLength(1);
        expect(Date.parse(got.data!.result.saml!.metadataRefreshedAt)).toBeGreaterThan(Date.now() - 60_000);
      });
    });

    describe('SAML refusals, with nothing created', () => {
      /** Posts what `make` forges from a fresh sign-in of `email`: 422 sso_response_invalid, no account made. */
      async function refused(
        t: Awaited<ReturnType<typeof samlSetup>>,
        make: (url: string, email: string) => Promise<{ samlResponse: string; relayState: string }>,
        says?: RegExp,
      ) {
        const email = `ada@${t.domain}`;
        const posted = await make(await t.start(email), email);
        const answer = await t.finish(posted);
        const problem = problemOf(answer, 422, 'sso_response_invalid');
        if (says !== undefined) expect(problem.detail).toMatch(says);
        expect(await t.accounts()).toBe(0);
        expect(await h.target.sql('select * from user_identities where site = $1', [t.name])).toEqual([]);
        return problem;
      }

      it('refuses an unsigned response, and one signed by a certificate not the connection’s', async () => {
        const t = await samlSetup();
        await refused(
          t,
          async (url, email) => {
            const p = await t.idp.respond(url, email, { spMetadata: t.spMetadata });
            return {
              ...p,
              samlResponse: forge(p.samlResponse, (doc) => {
                for (const sig of Array.from(doc.getElementsByTagNameNS(DSIG, 'Signature')))
                  sig.parentNode!.removeChild(sig);
              }),
            };
          },
          /signature/i,
        );
        const stranger = await startIdp();
        idps.push(stranger);
        await refused(t, (url, email) => stranger.respond(url, email, { spMetadata: t.spMetadata }), /signature/i);
      });

      for (const [variant, { signed, wrap }] of Object.entries(XSW)) {
        it(`refuses the ${variant} signature wrapping (${signed} signed)`, async () => {
          const t = await samlSetup();
          await refused(t, async (url, email) => {
            const p = await t.idp.respond(url, email, {
              spMetadata: t.spMetadata,
              assertionSigned: signed === 'assertion',
            });
            return { ...p, samlResponse: forge(p.samlResponse, (doc, r) => wrap(doc, r, `mallory@${t.domain}`)) };
          });
          const audit = await h.target.sql(
            "select outcome from audit_log where site = $1 and operation = 'sso_callback'",
            [t.name],
          );
          expect(audit.map((r) => r.outcome)).toContain('sso_response_invalid');
        });
      }

      it('refuses a comment injected into the NameID (signature still valid: comments are not signed)', async () => {
        const t = await samlSetup();
        await refused(
          t,
          async (url) => {
            const p = await t.idp.respond(url, `victim@${t.domain}.evil.example`, {
              spMetadata: t.spMetadata,
              assertionSigned: true,
            });
            const xml = Buffer.from(p.samlResponse, 'base64').toString();
            const injected = xml.replace(
              `victim@${t.domain}.evil.example</`,
              `victim@${t.domain}<!---->.evil.example</`,
            );
            expect(injected).not.toBe(xml);
            return { ...p, samlResponse: Buffer.from(injected).toString('base64') };
          },
          /comment/,
        );
      });

      it('refuses a wrong audience, destination, issuer and InResponseTo, and an expired assertion', async () => {
        const t = await samlSetup();
        const change = (changes: ResponseChanges) => (url: string, email: string) =>
          t.idp.respond(url, email, { spMetadata: t.spMetadata, changes });
        await refused(t, change({ Audience: 'https://another-sp.example/metadata' }), /audience/i);
        await refused(t, change({ Destination: 'https://evil.example/acs' }), /Destination/);
        await refused(t, change({ SubjectRecipient: 'https://evil.example/acs' }), /Recipient/);
        await refused(t, change({ Issuer: 'https://another-idp.example' }), /Issuer|issuer/);
        await refused(t, change({ InResponseTo: '_not-our-request' }), /InResponseTo/);
        await refused(
          t,
          change({ notBefore: -900, notOnOrAfter: -600 }),
          /expired|no longer valid|subject confirmation/i,
        );
        await refused(t, change({ notBefore: 600, notOnOrAfter: 900 }), /not yet valid/i);
      });

      it('refuses a replayed response, and an IdP-initiated one while the connection does not allow them', async () => {
        const t = await samlSetup();
        const email = `ada@${t.domain}`;
        const posted = await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata });
        // Another site's token: the RelayState is not its own (and stays this site's, untaken).
        const other = await site();
        problemOf(await other.c.POST('/api/1/sso/callback', { body: posted }), 422, 'sso_response_invalid');
        expect((await t.finish(posted)).response.status).toBe(200);
        problemOf(await t.finish(posted), 422, 'sso_response_invalid');
        const unsolicited = await t.idp.unsolicited(`grace@${t.domain}`, t.spMetadata, ACS);
        const off = await t.finish({ samlResponse: unsolicited, connectionId: t.connection.connectionId });
        expect(problemOf(off, 422, 'sso_response_invalid').detail).toContain('IdP-initiated');
        expect(await t.accounts()).toBe(1);
      });

      it('takes an IdP-initiated response once where allowed: its assertion ID is refused the second time', async () => {
        const t = await samlSetup({ allowIdpInitiated: true });
        const unsolicited = await t.idp.unsolicited(`grace@${t.domain}`, t.spMetadata, ACS);
        const first = await t.finish({ samlResponse: unsolicited, connectionId: t.connection.connectionId });
        expect(first.error, JSON.stringify(first.error)).toBeUndefined();
        const again = await t.finish({ samlResponse: unsolicited, connectionId: t.connection.connectionId });
        expect(problemOf(again, 422, 'sso_response_invalid').detail).toContain('used already');
      });

      it('refuses an assertion taken on one replica when it comes again to another (PostgreSQL)', async () => {
        const url = process.env.TEST_DATABASE_URL;
        if (spec.name !== 'server on PostgreSQL' || url === undefined) return;
        const t = await samlSetup({ allowIdpInitiated: true });
        const [{ d }] = (await h.target.sql('select current_database() as d')) as [{ d: string }];
        const shared = new URL(url);
        shared.pathname = `/${d}`;
        // A second replica of the service on the same database, as a deployment runs two.
        const replica = await serverTarget({ DATABASE_URL: shared.toString() }, async () => {}, {
          env: { ...env, FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY },
        });
        try {
          const { token } = await h.target.createToken({ site: t.name, scopes: ['verify'], label: 'replica' });
          const other = checkedClient(replica.baseUrl, token);
          const unsolicited = await t.idp.unsolicited(`grace@${t.domain}`, t.spMetadata, ACS);
          const first = await t.finish({ samlResponse: unsolicited, connectionId: t.connection.connectionId });
          expect(first.error, JSON.stringify(first.error)).toBeUndefined();
          const again = await other.POST('/api/1/sso/callback', {
            body: { samlResponse: unsolicited, connectionId: t.connection.connectionId },
          });
          expect(problemOf(again, 422, 'sso_response_invalid').detail).toContain('used already');
          // And a sign-in's response, its RelayState taken on the first replica, on the other.
          const email = `ada@${t.domain}`;
          const posted = await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata });
          expect((await t.finish(posted)).response.status).toBe(200);
          problemOf(await other.POST('/api/1/sso/callback', { body: posted }), 422, 'sso_response_invalid');
        } finally {
          await replica.close();
        }
      });
    });

    describe('OpenID Connect connections', () => {
      const OIDC_CB = 'https://shop.example.com/sso/oidc/callback';
      const OIDC_SECRET = 'an OIDC client secret of the organization, long enough';
      const people = new Map<string, Person>();
      let op: Awaited<ReturnType<typeof startOidcProvider>>;
      beforeAll(async () => {
        op = await startOidcProvider(
          [{ client_id: 'acme-client', client_secret: OIDC_SECRET, redirect_uris: [OIDC_CB] }],
          people,
        );
      }, 60_000);
      afterAll(() => op?.close());

      /** A site, an organization with a verified domain, and its OIDC connection to the real OP. */
      async function oidcSetup(enforce = false) {
        const s = await site();
        const orgId = await s.org();
        const domain = await verifiedDomain(s.c, orgId);
        const made = await s.c.POST('/api/1/org/connection/create', {
          body: {
            orgId,
            kind: 'oidc',
            oidc: { issuer: op.issuer, clientId: 'acme-client', clientSecret: OIDC_SECRET },
            redirectUris: [OIDC_CB],
            defaultRoles: ['member'],
            enforce,
          },
        });
        expect(made.error, JSON.stringify(made.error)).toBeUndefined();
        expect(made.response.status).toBe(201);
        const connection = made.data!.result;
        const person = (local: string, at = domain) => {
          const sub = `${local}-${randomUUID().slice(0, 8)}`;
          people.set(sub, { sub, email: `${local}@${at}`, name: `${local} Person` });
          return { sub, email: `${local}@${at}` };
        };
        const start = async (email: string) => {
          const started = await s.c.POST('/api/1/sso/start', { body: { email, redirectUri: OIDC_CB } });
          expect(started.error, JSON.stringify(started.error)).toBeUndefined();
          expect(started.data!.result.connectionId).toBe(connection.connectionId);
          return started.data!.result.authorizationUrl;
        };
        const finish = (callbackUrl: string, as = s.c) =>
          as.POST('/api/1/sso/callback', { body: { callbackUrl, session: { userAgent: 'test' } } });
        return { ...s, orgId, domain, connection, person, start, finish };
      }

      it('signs a person in through a real OpenID provider: just in time, a member, amr fed; the state single use and the site’s own; events name the connection', async () => {
        const t = await oidcSetup();
        expect(t.connection).toMatchObject({
          kind: 'oidc',
          saml: null,
          oidc: { issuer: op.issuer, clientId: 'acme-client' },
          redirectUris: [OIDC_CB],
        });
        expect(JSON.stringify(t.connection)).not.toContain(OIDC_SECRET);
        const [row] = await h.target.sql('select oidc_client_secret_sealed as s from sso_connections where id = $1', [
          t.connection.connectionId,
        ]);
        expect(String(row!.s)).toMatch(/^v1\./);
        expect(String(row!.s)).not.toContain(OIDC_SECRET);

        const ada = t.person('ada');
        const url = new URL(await t.start(ada.email));
        expect(url.href.startsWith(op.issuer)).toBe(true);
        expect(url.searchParams.get('code_challenge_method')).toBe('S256');
        expect(url.searchParams.get('nonce')).toBeTruthy();
        expect(url.searchParams.get('login_hint')).toBe(ada.email);
        const back = await signInAt(url.href, ada.sub, OIDC_CB);
        // Another site's token: the state is not its own, and stays this site's.
        const other = await site();
        problemOf(await t.finish(back, other.c), 422, 'invalid_state');
        const done = await t.finish(back);
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        const result = done.data!.result;
        expect(result).toMatchObject({ connectionId: t.connection.connectionId, orgId: t.orgId, created: true });
        const session = await t.c.POST('/api/1/session/verify', { body: { token: result.session!.token } });
        expect(session.data!.result).toMatchObject({ _userId: result._userId, amr: ['fed'] });
        const member = await t.c.GET('/api/1/org/member/check', {
          params: { query: { orgId: t.orgId, _userId: result._userId } },
        });
        expect(member.data!.result).toMatchObject({ member: true, roles: ['member'] });
        const user = await t.c.GET('/api/1/user/get', { params: { query: { _userId: result._userId } } });
        expect(user.data!.result).toMatchObject({ email: ada.email, emailVerified: true });
        expect(user.data!.result.identities).toEqual([
          expect.objectContaining({ provider: `sso:${t.connection.connectionId}`, subject: ada.sub }),
        ]);
        // Replayed: the state is spent.
        problemOf(await t.finish(back), 422, 'invalid_state');
        // Again: a login of the same account.
        const again = await t.finish(await signInAt(await t.start(ada.email), ada.sub, OIDC_CB));
        expect(again.data!.result).toMatchObject({ _userId: result._userId, created: false });
        // provider/callback never signs in with a connection's state (which it spends, as any it refuses).
        const misrouted = await signInAt(await t.start(ada.email), ada.sub, OIDC_CB);
        problemOf(
          await t.c.POST('/api/1/provider/callback', { body: { callbackUrl: misrouted } }),
          422,
          'invalid_state',
        );
        problemOf(await t.finish(misrouted), 422, 'invalid_state');
        // A person whose email is outside the verified domains: 409 with a link ticket, nothing made.
        const eve = t.person('eve', 'elsewhere.example');
        const unlinked = await t.finish(await signInAt(await t.start(ada.email), eve.sub, OIDC_CB));
        problemOf(unlinked, 409, 'identity_unlinked');
        expect((await h.target.sql('select count(*)::int as n from users where site = $1', [t.name]))[0]!.n).toBe(1);

        // The connection changed and deleted: the events name it; user.identity_linked names it too.
        const updated = await t.c.POST('/api/1/org/connection/update', {
          body: { connectionId: t.connection.connectionId, oidc: { clientSecret: OIDC_SECRET }, enforce: true },
        });
        expect(updated.error, JSON.stringify(updated.error)).toBeUndefined();
        expect(updated.data!.result.enforce).toBe(true);
        const deleted = await t.c.POST('/api/1/org/connection/delete', {
          body: { connectionId: t.connection.connectionId },
        });
        expect(deleted.error, JSON.stringify(deleted.error)).toBeUndefined();
        const events = await feedUntil(t.c, (all) => all.some((e) => e.type === 'org.connection_deleted'));
        const named = (type: string) => events.filter((e) => e.type === type).map((e) => e.data);
        const ids = { orgId: t.orgId, connectionId: t.connection.connectionId };
        expect(named('org.connection_created')).toEqual([expect.objectContaining({ ...ids, kind: 'oidc' })]);
        expect(named('org.connection_updated')).toEqual([expect.objectContaining(ids)]);
        expect(named('org.connection_deleted')).toEqual([expect.objectContaining(ids)]);
        expect(named('org.domain_verified')).toEqual([expect.objectContaining({ orgId: t.orgId, domain: t.domain })]);
        expect(named('user.identity_linked')).toEqual([
          { _userId: result._userId, provider: `sso:${t.connection.connectionId}`, subject: ada.sub, ...ids },
        ]);
        // Nothing secret in the events, the audit trail or the logs' database rows.
        const kept = JSON.stringify([events, await h.target.sql('select * from audit_log where site = $1', [t.name])]);
        expect(kept).not.toContain(OIDC_SECRET);
        expect(kept).not.toContain(new URL(back).searchParams.get('code')!);
        expect(kept).not.toContain(new URL(back).searchParams.get('state')!);
      });

      it('refuses an issuer whose discovery cannot be read, and settings of the other kind', async () => {
        const s = await site();
        const orgId = await s.org();
        const bad = await s.c.POST('/api/1/org/connection/create', {
          body: {
            orgId,
            kind: 'oidc',
            oidc: { issuer: 'http://127.0.0.1:9/none', clientId: 'x', clientSecret: 'y' },
            redirectUris: [OIDC_CB],
          },
        });
        expect(problemOf(bad, 422, 'idp_metadata_invalid').detail).toContain('discovery');
        const missing = await s.c.POST('/api/1/org/connection/create', {
          body: { orgId, kind: 'oidc', redirectUris: [OIDC_CB] },
        });
        expect(problemOf(missing, 400, 'invalid_request').errors?.[0]?.pointer).toBe('/oidc');
        const mixed = await s.c.POST('/api/1/org/connection/create', {
          body: {
            orgId,
            kind: 'oidc',
            saml: { metadataXml: '<x/>' },
            oidc: { issuer: op.issuer, clientId: 'acme-client', clientSecret: OIDC_SECRET },
            redirectUris: [OIDC_CB],
          },
        });
        expect(problemOf(mixed, 400, 'invalid_request').errors?.[0]?.pointer).toBe('/saml');
        const both = await s.c.POST('/api/1/sso/callback', {
          body: { samlResponse: 'PHg+', callbackUrl: `${OIDC_CB}?code=x&state=y` },
        });
        problemOf(both, 400, 'invalid_request');
        expect(
          (await h.target.sql('select count(*)::int as n from sso_connections where site = $1', [s.name]))[0]!.n,
        ).toBe(0);
      });
    });

    describe('enforcement', () => {
      it('refuses every other login of an account of the verified domain with sso_required; the site still acts on it; SSO signs it in', async () => {
        const t = await samlSetup({ enforce: true });
        await h.target.sql(
          `insert into site_settings (site, rp_id, rp_name, rp_origins) values ($1, 'localhost', 'Example', $2::jsonb)`,
          [t.name, JSON.stringify([PASSKEY_ORIGIN])],
        );
        const email = `ada@${t.domain}`;
        const password = h.password();
        const made = await t.c.POST('/api/1/user/create', { body: { email, password, name: 'Ada' } });
        expect(made.error, JSON.stringify(made.error)).toBeUndefined();
        const userId = made.data!.result._userId;
        const required = (answer: { error?: unknown; response: Response }) =>
          expect((problemOf(answer, 403, 'sso_required') as Problem & { connectionId?: string }).connectionId).toBe(
            t.connection.connectionId,
          );

        // A password: right, refused with the connection; wrong, the usual 422 (no hint).
        required(await t.c.POST('/api/1/user/verify', { body: { email, password } }));
        required(await t.c.POST('/api/1/user/verify', { body: { _userId: userId, password } }));
        problemOf(
          await t.c.POST('/api/1/user/verify', { body: { email, password: `${password}x` } }),
          422,
          'invalid_credentials',
        );
        // A login link: refused, and the ticket stays unused.
        const issued = await t.c.POST('/api/1/user/ticket', { body: { email, purpose: 'login' } });
        expect(issued.error, JSON.stringify(issued.error)).toBeUndefined();
        const ticket = issuedTicket(issued.data!.result);
        required(await t.c.POST('/api/1/user/ticket/redeem', { body: { ticket, purpose: 'login' } }));
        // A passkey (registered by the site's operator, who still acts on the account): refused.
        const authenticator = new SoftAuthenticator(PASSKEY_ORIGIN);
        const options = await t.c.POST('/api/1/user/factor/passkey/options', { body: { _userId: userId } });
        const registered = await t.c.POST('/api/1/user/factor/passkey', {
          body: { _userId: userId, response: authenticator.register(options.data!.result.options) },
        });
        expect(registered.response.status).toBe(201);
        const request = await t.c.POST('/api/1/user/passkey/options', { body: { email } });
        required(
          await t.c.POST('/api/1/user/passkey/verify', {
            body: { response: authenticator.assert(request.data!.result.options) },
          }),
        );
        // The site removes it (a passkey is also a second factor, which every login would then ask for).
        const removed = await t.c.POST('/api/1/user/factor/remove', {
          body: { _userId: userId, factorId: registered.data!.result.factorId },
        });
        expect(removed.error, JSON.stringify(removed.error)).toBeUndefined();
        // An identity at another provider, linked by the site: refused.
        const linked = await t.c.POST('/api/1/user/identity/link', {
          body: { _userId: userId, provider: 'google', subject: 'g-ada', email, emailVerified: true },
        });
        expect(linked.error, JSON.stringify(linked.error)).toBeUndefined();
        required(await t.c.POST('/api/1/user/identity/verify', { body: { provider: 'google', subject: 'g-ada' } }));
        // The site's operators still act on the account.
        const updated = await t.c.POST('/api/1/user/update', { body: { _userId: userId, name: 'Ada L.' } });
        expect(updated.error, JSON.stringify(updated.error)).toBeUndefined();

        // Through the organization's IdP: signed in (the account of that email linked), and its
        // identity of the connection signs in by identity/verify too.
        const done = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        expect(done.data!.result).toMatchObject({ _userId: userId, created: false });
        const viaSso = await t.c.POST('/api/1/user/identity/verify', {
          body: { provider: `sso:${t.connection.connectionId}`, subject: email },
        });
        expect(viaSso.error, JSON.stringify(viaSso.error)).toBeUndefined();

        // An account outside the verified domain signs in as usual.
        const outside = await t.c.POST('/api/1/user/create', {
          body: { email: 'bob@elsewhere.example', password, name: 'Bob' },
        });
        expect(outside.error, JSON.stringify(outside.error)).toBeUndefined();
        expect(
          (await t.c.POST('/api/1/user/verify', { body: { email: 'bob@elsewhere.example', password } })).response
            .status,
        ).toBe(200);

        // Enforcement off: the password and the ticket kept sign in again.
        const off = await t.c.POST('/api/1/org/connection/update', {
          body: { connectionId: t.connection.connectionId, enforce: false },
        });
        expect(off.error, JSON.stringify(off.error)).toBeUndefined();
        expect((await t.c.POST('/api/1/user/verify', { body: { email, password } })).response.status).toBe(200);
        const redeemed = await t.c.POST('/api/1/user/ticket/redeem', { body: { ticket, purpose: 'login' } });
        expect(redeemed.error, JSON.stringify(redeemed.error)).toBeUndefined();
        const audit = await h.target.sql(
          "select outcome from audit_log where site = $1 and operation = 'verify' and outcome = 'sso_required'",
          [t.name],
        );
        expect(audit.length).toBeGreaterThanOrEqual(2);
      });
      it('asks again at the second step: a ticket begun with a password or another provider before enforcement is refused after it, one begun through the connection completes', async () => {
        const t = await samlSetup({ enforce: false });
        const email = `ada@${t.domain}`;
        const password = h.password();
        const made = await t.c.POST('/api/1/user/create', { body: { email, password, name: 'Ada' } });
        expect(made.error, JSON.stringify(made.error)).toBeUndefined();
        const userId = made.data!.result._userId;
        // Its identity of the connection (a sign-in through the IdP, before the factor it would ask for),
        // one at another provider, and a TOTP factor.
        const done = await t.finish(await t.idp.respond(await t.start(email), email, { spMetadata: t.spMetadata }));
        expect(done.error, JSON.stringify(done.error)).toBeUndefined();
        const linked = await t.c.POST('/api/1/user/identity/link', {
          body: { _userId: userId, provider: 'google', subject: 'g-ada', email, emailVerified: true },
        });
        expect(linked.error, JSON.stringify(linked.error)).toBeUndefined();
        const added = (await t.c.POST('/api/1/user/factor/totp', { body: { _userId: userId } })).data!.result;
        const confirmed = await t.c.POST('/api/1/user/factor/confirm', {
          body: { _userId: userId, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
        });
        expect(confirmed.error, JSON.stringify(confirmed.error)).toBeUndefined();
        const [recovery] = confirmed.data!.result.recoveryCodes!;
        const ticketOf = (answer: { error?: unknown; response: Response }) =>
          (problemOf(answer, 403, 'second_factor_required') as Problem & { ticket: string }).ticket;
        const viaSso = { provider: `sso:${t.connection.connectionId}`, subject: email };
        const byPassword = ticketOf(await t.c.POST('/api/1/user/verify', { body: { email, password } }));
        const byGoogle = ticketOf(
          await t.c.POST('/api/1/user/identity/verify', { body: { provider: 'google', subject: 'g-ada' } }),
        );
        const bySso = ticketOf(await t.c.POST('/api/1/user/identity/verify', { body: viaSso }));
        const sessions = async () =>
          Number((await h.target.sql('select count(*)::int as n from sessions where user_id = $1', [userId]))[0]!.n);
        const before = await sessions();

        const enforce = async (on: boolean) => {
          const answer = await t.c.POST('/api/1/org/connection/update', {
            body: { connectionId: t.connection.connectionId, enforce: on },
          });
          expect(answer.error, JSON.stringify(answer.error)).toBeUndefined();
        };
        await enforce(true);
        const code = totpAt(added.secret, nowSeconds() + 30);
        for (const ticket of [byPassword, byGoogle]) {
          const refused = await t.c.POST('/api/1/user/factor/verify', { body: { ticket, code, session: {} } });
          expect((problemOf(refused, 403, 'sso_required') as Problem & { connectionId?: string }).connectionId).toBe(
            t.connection.connectionId,
          );
        }
        expect(await sessions()).toBe(before);
        // Begun through the organization's IdP: it completes, enforced or not.
        const completed = await t.c.POST('/api/1/user/factor/verify', {
          body: { ticket: bySso, code, session: {} },
        });
        expect(completed.error, JSON.stringify(completed.error)).toBeUndefined();
        expect(await sessions()).toBe(before + 1);
        // The refusal was the enforcement's, not a spent ticket's: off again, a password's ticket completes.
        await enforce(false);
        const again = ticketOf(await t.c.POST('/api/1/user/verify', { body: { email, password } }));
        const open = await t.c.POST('/api/1/user/factor/verify', {
          body: { ticket: again, recoveryCode: recovery!, session: {} },
        });
        expect(open.error, JSON.stringify(open.error)).toBeUndefined();
        expect(await sessions()).toBe(before + 2);
      });
    });

    describe('verified domains', () => {
      it('verifies a domain by its TXT record at the local DNS server, and lists it', async () => {
        const s = await site();
        const orgId = await s.org();
        const domain = domainOf();
        const added = await s.c.POST('/api/1/org/domain/add', { body: { orgId, domain } });
        expect(added.response.status).toBe(201);
        const record = added.data!.result;
        expect(record).toMatchObject({
          domain,
          txtName: `_user-accounts-challenge.${domain}`,
          status: 'publish this record',
        });
        expect(record.txtValue).toMatch(/^user-accounts-domain-verification=[A-Za-z0-9_-]{43}$/);
        // Added again: the same record.
        const again = await s.c.POST('/api/1/org/domain/add', { body: { orgId, domain } });
        expect(again.data!.result.txtValue).toBe(record.txtValue);

        // Not published yet: the name does not exist.
        const none = await s.c.POST('/api/1/org/domain/verify', { body: { orgId, domain } });
        const problem = problemOf(none, 422, 'domain_not_verified');
        expect(problem.detail).toContain('NXDOMAIN');
        // Published with another value: what was found is said.
        dns.setTxt(record.txtName, ['v=spf1 -all', 'user-accounts-domain-verification=wrong']);
        const wrong = problemOf(
          await s.c.POST('/api/1/org/domain/verify', { body: { orgId, domain } }),
          422,
          'domain_not_verified',
        );
        expect(wrong.detail).toContain('"v=spf1 -all"');
        let listed = await s.c.GET('/api/1/org/domain/list', { params: { query: { orgId } } });
        expect(listed.data!.result.domains).toEqual([
          expect.objectContaining({ domain, status: 'pending', verifiedAt: null }),
        ]);

        dns.setTxt(record.txtName, ['v=spf1 -all', record.txtValue]);
        const verified = await s.c.POST('/api/1/org/domain/verify', { body: { orgId, domain } });
        expect(verified.error, JSON.stringify(verified.error)).toBeUndefined();
        expect(verified.data!.result).toMatchObject({ domain, status: 'verified' });
        listed = await s.c.GET('/api/1/org/domain/list', { params: { query: { orgId } } });
        expect(listed.data!.result.domains).toEqual([
          expect.objectContaining({ domain, status: 'verified', verifiedAt: verified.data!.result.verifiedAt }),
        ]);
        const audit = await h.target.sql(
          "select operation, outcome from audit_log where site = $1 and operation like 'org_domain%' order by at, id",
          [s.name],
        );
        expect(audit.map((r) => r.operation)).toContain('org_domain_verify');
      });

      it('lets one organization of a site verify a domain: another cannot verify or add it again; another site can', async () => {
        const s = await site();
        const first = await s.org('First');
        const second = await s.org('Second');
        const domain = domainOf();
        const added = await s.c.POST('/api/1/org/domain/add', { body: { orgId: second, domain } });
        expect(added.response.status).toBe(201);
        await verifiedDomain(s.c, first, domain);
        problemOf(await s.c.POST('/api/1/org/domain/verify', { body: { orgId: second, domain } }), 409, 'domain_taken');
        problemOf(await s.c.POST('/api/1/org/domain/add', { body: { orgId: second, domain } }), 409, 'domain_taken');

        // Another site: its own organization may verify the same domain (its own record).
        const other = await site();
        const theirs = await other.org();
        await verifiedDomain(other.c, theirs, domain);
        // And it sees nothing of the first site's.
        problemOf(
          await other.c.GET('/api/1/org/domain/list', { params: { query: { orgId: first } } }),
          404,
          'org_not_found',
        );
        problemOf(
          await other.c.POST('/api/1/org/domain/verify', { body: { orgId: first, domain } }),
          404,
          'domain_not_found',
        );
        problemOf(
          await other.c.POST('/api/1/org/domain/remove', { body: { orgId: first, domain } }),
          404,
          'domain_not_found',
        );

        // Removed: the second organization may verify it now, with its own record published.
        dns.addTxt(added.data!.result.txtName, added.data!.result.txtValue);
        const removed = await s.c.POST('/api/1/org/domain/remove', { body: { orgId: first, domain } });
        expect(removed.data!.result.status).toBe('domain removed');
        const now = await s.c.POST('/api/1/org/domain/verify', { body: { orgId: second, domain } });
        expect(now.error, JSON.stringify(now.error)).toBeUndefined();
      });

      it('refuses a domain that is not a lowercase domain name, at its pointer', async () => {
        const s = await site();
        const orgId = await s.org();
        for (const domain of ['Acme.example', 'acme', 'acme..example', '-acme.example', 'acme.example.']) {
          const answer = await s.c.POST('/api/1/org/domain/add', { body: { orgId, domain } });
          const problem = problemOf(answer, 400, 'invalid_request');
          expect(problem.errors?.[0]?.pointer, domain).toBe('/domain');
        }
      });
    });
  });
}

defineSsoSuite({
  name: 'server on embedded PGlite',
  stateful: true,
  start: () => embeddedServer({ env: { ...env, METRICS_TOKEN: TEST_METRICS_TOKEN } }),
});
defineSsoSuite(await postgresTarget({ env }));
