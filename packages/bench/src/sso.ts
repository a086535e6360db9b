// Enterprise sign-in (issue 61, "Done when"): ours' CPU per SAML callback and per OpenID Connect
// callback, each with the IdP's own time excluded, and sso/start's.
//
// Set up through the API alone, as a site's backend and its customer's IT admin do: a site of the
// bench's own (`sso-bench`, its token minted as `cli token create` does: no HTTP operation makes
// one), its roles, two organizations, each a domain verified by org/domain/verify through a DNS
// server in the bench's process (dns2 on a loopback port, the server's DNS_RESOLVER) that answers
// the TXT record org/domain/add asked for, and a connection each: SAML at an IdP in the bench's
// process (samlify's IdP role; the server reads its metadata from its URL, as it does an IdP's),
// OpenID Connect at providers.ts's stub issuer (discovery, JWKS, a token endpoint answering an RS256
// ID token). Nothing is written to the database behind the server's back but that token.
//
// Every callback is a real one: its state made by sso/start a moment before (single use; SAML: the
// RelayState and the AuthnRequest's id that InResponseTo must name; OIDC: the state, PKCE verifier
// and nonce), and the login of a person whose account exists (200, `created: false`, a session
// issued: `session: {}`). SAML: the IdP parses the AuthnRequest of the start's authorizationUrl and
// signs its response (RSA-SHA256) in the bench's process *before* the timed phase, so that neither
// its signing nor its XML is in the server's CPU nor in the phase's time; the server checks the
// signature with the connection's certificate (node-saml over xml-crypto), the Destination,
// Recipient, Audience, Issuer, times, InResponseTo, the assertion id once (a row), then the
// identity's outcome and the session. OIDC: the callback's time includes the stub's answer at the
// token endpoint (a local RSA signature on the bench's CPU, not the server's). The first callback of
// each person, which makes the account just in time and a member of the organization, is timed
// apart, once. The server's CPU is its process's user + system time from /proc around each phase,
// divided by the phase's requests (its background included: small against a phase).
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { openPostgres } from '@user-accounts/server/db';
import { selfSignedKeyPair } from '@user-accounts/server/sso/certificates';
import { createToken } from '@user-accounts/server/tokens';
import dns2 from 'dns2';
import * as samlify from 'samlify';
import type { LoadResult, Make } from './load-types.ts';
import { cpuMs } from './proc.ts';
import { CLIENT_ID, closedLoop, percentile, startStub } from './providers.ts';
import type { Row } from './report.ts';

export interface SsoBench {
  db: { url: string };
  /** Ours, built, with these variables beside the bench's (DNS_RESOLVER, PUBLIC_URL). */
  ours(env: Record<string, string>): Promise<{ url: string; pid: number; stop(): Promise<void> }>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<LoadResult>;
  log(line: string): void;
  rounds: number;
  seconds: number;
}

const SITE = 'sso-bench';
const PUBLIC_URL = 'https://accounts.bench.example';
const ACS = 'https://shop.example.com/sso/acs';
const OIDC_CALLBACK = 'https://shop.example.com/sso/oidc/callback';
const OIDC_SECRET = 'the organization client secret at its IdP, long enough';
const SAML_DOMAIN = 'saml.sso-bench.example.org';
const OIDC_DOMAIN = 'oidc.sso-bench.example.org';
const CONNECTIONS = 16;
/** People who sign in again and again (each made by its first callback). */
const PEOPLE = 300;
/** States made, and SAML responses signed, this many at a time before a phase (not timed). */
const PREPARE = 8;

// ---- the local DNS server ---------------------------------------------------------------------
// Copied in part from packages/contract-tests/src/sso-harness.ts (startDns; TXT records only): the
// bench does not depend on the test package.

async function startDns() {
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
    addTxt: (name: string, value: string) =>
      void records.set(name.toLowerCase(), [...(records.get(name.toLowerCase()) ?? []), value]),
    close: () => server.close(),
  };
}

// ---- the SAML IdP -----------------------------------------------------------------------------
// Copied in part from packages/contract-tests/src/sso-harness.ts (startIdp; one key, no rollover,
// no encryption, no forged fields): samlify's IdP role, its metadata at /metadata on a loopback port.

async function startIdp() {
  samlify.setSchemaValidator({ validate: async () => 'skipped: the bench IdP trusts the server it measures' });
  const key = await selfSignedKeyPair({
    commonName: 'bench-idp',
    serialNumber: randomBytes(8).toString('hex'),
    validForMs: 365 * 24 * 3600 * 1000,
  });
  const certBody = key.certPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  let metadataXml = '';
  const server = createServer((request, response) => {
    if (request.url === '/metadata') {
      response.writeHead(200, { 'content-type': 'application/samlmetadata+xml' });
      response.end(metadataXml);
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entityId = `${baseUrl}/entity`;
  metadataXml = `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${entityId}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${certBody}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${baseUrl}/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>
`;
  const idp = samlify.IdentityProvider({
    metadata: metadataXml,
    privateKey: key.keyPem,
    signingCert: key.certPem,
    isAssertionEncrypted: false,
    wantAuthnRequestsSigned: false,
  });
  let sp: ReturnType<typeof samlify.ServiceProvider> | undefined;
  let acs = '';

  /** A signed response to the request `inResponseTo` saying `email` (the Response signed, RSA-SHA256). */
  async function build(email: string, inResponseTo: string): Promise<string> {
    const now = Date.now();
    const at = (seconds: number) => new Date(now + seconds * 1000).toISOString();
    const made = await idp.createLoginResponse(
      sp!,
      { extract: { request: { id: inResponseTo } } },
      'post',
      { email },
      (template: string) => {
        const values = {
          ID: `_${randomBytes(16).toString('hex')}`,
          AssertionID: `_${randomBytes(16).toString('hex')}`,
          Destination: acs,
          Audience: sp!.entityMeta.getEntityID(),
          SubjectRecipient: acs,
          Issuer: entityId,
          IssueInstant: at(0),
          StatusCode: 'urn:oasis:names:tc:SAML:2.0:status:Success',
          ConditionsNotBefore: at(-1),
          ConditionsNotOnOrAfter: at(300),
          SubjectConfirmationDataNotOnOrAfter: at(300),
          NameIDFormat: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
          NameID: email,
          InResponseTo: inResponseTo,
          AuthnStatement: `<saml:AuthnStatement AuthnInstant="${at(0)}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`,
          AttributeStatement: '',
        };
        const raw = samlify.SamlLib.replaceTagsByValue(template, values as never);
        // The statement is XML of ours: put it back unescaped.
        const context = raw.replace(
          samlify.SamlLib.replaceTagsByValue('{AuthnStatement}', { AuthnStatement: values.AuthnStatement }),
          values.AuthnStatement,
        );
        return { id: values.ID, context };
      },
    );
    return made.context;
  }

  return {
    metadataUrl: `${baseUrl}/metadata`,
    /** Our SP's metadata, as the IT admin gives it to the IdP (once, before any response). */
    trust(spMetadata: string) {
      sp = samlify.ServiceProvider({ metadata: spMetadata });
      acs = /AssertionConsumerService[^>]*Location="([^"]+)"/.exec(spMetadata)?.[1] ?? '';
    },
    /** Answers the AuthnRequest of `authorizationUrl` for `email` (the person signed in at the IdP). */
    async respond(authorizationUrl: string, email: string): Promise<{ samlResponse: string; relayState: string }> {
      const url = new URL(authorizationUrl);
      const query = Object.fromEntries(url.searchParams);
      const octetString = url.search
        .slice(1)
        .split('&')
        .filter((p) => !p.startsWith('Signature='))
        .join('&');
      const parsed = await idp.parseLoginRequest(sp!, 'redirect', { query, octetString });
      const samlResponse = await build(email, parsed.extract.request!.id as string);
      return { samlResponse, relayState: query.RelayState! };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// ---- the bench --------------------------------------------------------------------------------

interface Phase {
  rps: number;
  p50: number;
  p99: number;
  cpu: number;
  bad: number;
}

const b64u = (data: string) => Buffer.from(data).toString('base64url');

export async function ssoRows(b: SsoBench): Promise<{ rows: Row[]; notes: string[] }> {
  const loadBefore = loadavg();
  const dns = await startDns();
  const idp = await startIdp();
  const stub = await startStub({ emailDomain: OIDC_DOMAIN });
  const notes: string[] = [];
  const samlStarts: Phase[] = [];
  const oidcStarts: Phase[] = [];
  const samlCallbacks: Phase[] = [];
  const oidcCallbacks: Phase[] = [];
  let samlCreateCpu = 0;
  let oidcCreateCpu = 0;
  let server: Awaited<ReturnType<SsoBench['ours']>> | undefined;
  try {
    const database = await openPostgres(b.db.url);
    let token: string;
    try {
      ({ token } = await createToken(database.db, { site: SITE, scopes: ['read', 'write', 'verify'], label: SITE }));
    } finally {
      await database.close();
    }
    const ours = await b.ours({ DNS_RESOLVER: `127.0.0.1:${dns.port}`, PUBLIC_URL });
    server = ours;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const call = async <T>(path: string, body: unknown, expect = [200, 201]): Promise<T> => {
      const res = await fetch(`${ours.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
      const answer = (await res.json()) as { result: T };
      if (!expect.includes(res.status)) throw new Error(`${path}: ${res.status} ${JSON.stringify(answer)}`);
      return answer.result;
    };

    // The site's roles; per kind, an organization, its domain verified, its connection.
    await call('/api/1/org/roles', { roles: [{ role: 'member', permissions: ['projects:read'] }] });
    const organization = async (name: string, domain: string) => {
      const { orgId } = await call<{ orgId: string }>('/api/1/org/create', { name });
      const added = await call<{ txtName: string; txtValue: string }>('/api/1/org/domain/add', { orgId, domain });
      dns.addTxt(added.txtName, added.txtValue);
      await call('/api/1/org/domain/verify', { orgId, domain });
      return orgId;
    };
    const samlOrg = await organization('Acme (SAML)', SAML_DOMAIN);
    const oidcOrg = await organization('Globex (OIDC)', OIDC_DOMAIN);
    const samlConnection = await call<{ connectionId: string }>('/api/1/org/connection/create', {
      orgId: samlOrg,
      kind: 'saml',
      saml: { metadataUrl: idp.metadataUrl },
      redirectUris: [ACS],
      defaultRoles: ['member'],
    });
    await call('/api/1/org/connection/create', {
      orgId: oidcOrg,
      kind: 'oidc',
      oidc: { issuer: stub.issuer, clientId: CLIENT_ID, clientSecret: OIDC_SECRET },
      redirectUris: [OIDC_CALLBACK],
      defaultRoles: ['member'],
    });
    idp.trust(await (await fetch(`${ours.url}/sso/${samlConnection.connectionId}/metadata`)).text());

    const samlEmail = (i: number) => `p${i % PEOPLE}@${SAML_DOMAIN}`;
    const oidcSub = (i: number) => `p${i % PEOPLE}`;
    const start = (email: string, redirectUri: string) =>
      call<{ authorizationUrl: string }>('/api/1/sso/start', { email, redirectUri }).then((r) => r.authorizationUrl);
    /** `n` SAML sign-ins ready to finish: started, answered and signed by the IdP (not timed). */
    const samlReady = async (n: number, from: number) => {
      const ready: { samlResponse: string; relayState: string }[] = [];
      await closedLoop(
        Array.from({ length: n }, (_, i) => samlEmail(from + i)),
        PREPARE,
        async (email) => {
          ready.push(await idp.respond(await start(email, ACS), email));
          return true;
        },
      );
      return ready;
    };
    /** `n` OIDC sign-ins ready for the callback: started, the person's code (the stub's) made. */
    let seq = 0;
    const oidcReady = async (n: number, from: number) => {
      const ready: string[] = [];
      await closedLoop(
        Array.from({ length: n }, (_, i) => oidcSub(from + i)),
        PREPARE,
        async (sub) => {
          const url = new URL(await start(`${sub}@${OIDC_DOMAIN}`, OIDC_CALLBACK));
          const code = `${b64u(JSON.stringify({ sub, nonce: url.searchParams.get('nonce') }))}.${seq++}`;
          ready.push(
            `${OIDC_CALLBACK}?code=${code}&state=${url.searchParams.get('state')}&iss=${encodeURIComponent(stub.issuer)}`,
          );
          return true;
        },
      );
      return ready;
    };
    /** One callback: 200, signed in, a session issued, and made (or not) as `created` says. */
    const finish = (created: boolean) => async (body: Record<string, string>) => {
      try {
        const res = await fetch(`${ours.url}/api/1/sso/callback`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ ...body, session: {} }),
        });
        const answer = (await res.json()) as { result?: { created: boolean; session?: { token: string } } };
        return res.status === 200 && answer.result?.created === created && answer.result.session !== undefined;
      } catch {
        return false; // counted with the other failures
      }
    };
    /** A timed phase of callbacks at 16 connections: throughput, latency, the server's CPU per callback. */
    const phase = async <T>(items: T[], one: (item: T) => Promise<boolean>): Promise<Phase> => {
      const c0 = cpuMs(ours.pid);
      const run = await closedLoop(items, CONNECTIONS, one);
      return {
        rps: (items.length * 1000) / run.ms,
        p50: percentile(run.latencies, 50),
        p99: percentile(run.latencies, 99),
        cpu: (cpuMs(ours.pid) - c0) / items.length,
        bad: run.bad,
      };
    };

    // Each person's first callback makes the account (just in time, a member): timed apart, once.
    const samlFirst = await phase(await samlReady(PEOPLE, 0), finish(true));
    if (samlFirst.bad > 0) throw new Error(`${samlFirst.bad} of the first SAML callbacks failed`);
    samlCreateCpu = samlFirst.cpu;
    const oidcFirst = await phase(
      (await oidcReady(PEOPLE, 0)).map((callbackUrl) => ({ callbackUrl })),
      finish(true),
    );
    if (oidcFirst.bad > 0) throw new Error(`${oidcFirst.bad} of the first OIDC callbacks failed`);
    oidcCreateCpu = oidcFirst.cpu;
    b.log(
      `  ${PEOPLE} accounts made by their first callback each way: SAML ${samlCreateCpu.toFixed(2)} ms CPU each, OIDC ${oidcCreateCpu.toFixed(2)} ms`,
    );

    const startLoad = async (email: string, redirectUri: string): Promise<Phase> => {
      const body = JSON.stringify({ email, redirectUri });
      const c0 = cpuMs(ours.pid);
      const run = await b.load(ours.url, CONNECTIONS, b.seconds, () => ({
        method: 'POST',
        path: '/api/1/sso/start',
        body,
        headers: { authorization: `Bearer ${token}` },
      }));
      return {
        rps: run.rps,
        p50: run.p50,
        p99: run.p99,
        cpu: (cpuMs(ours.pid) - c0) / Math.max(1, run.requests),
        bad: run.bad,
      };
    };
    let samlRate = 100;
    let oidcRate = 100;
    for (let r = 0; r < b.rounds; r++) {
      samlStarts.push(await startLoad(samlEmail(r), ACS));
      oidcStarts.push(await startLoad(`${oidcSub(r)}@${OIDC_DOMAIN}`, OIDC_CALLBACK));

      // As many callbacks as the last round's rate fills the round's seconds with (200 at least).
      const samlPool = await samlReady(Math.max(200, Math.round(samlRate * b.seconds)), r * 37);
      samlCallbacks.push(await phase(samlPool, finish(false)));
      samlRate = samlCallbacks.at(-1)!.rps;
      const oidcPool = (await oidcReady(Math.max(200, Math.round(oidcRate * b.seconds)), r * 37)).map(
        (callbackUrl) => ({ callbackUrl }),
      );
      oidcCallbacks.push(await phase(oidcPool, finish(false)));
      oidcRate = oidcCallbacks.at(-1)!.rps;
      const s = samlCallbacks.at(-1)!;
      const o = oidcCallbacks.at(-1)!;
      b.log(
        `  round ${r + 1}: sso/start SAML ${samlStarts.at(-1)!.rps.toFixed(0)} req/s ${samlStarts.at(-1)!.cpu.toFixed(2)} ms CPU, OIDC ${oidcStarts.at(-1)!.rps.toFixed(0)} req/s ${oidcStarts.at(-1)!.cpu.toFixed(2)} ms; callback SAML ${s.rps.toFixed(0)} req/s ${s.cpu.toFixed(2)} ms CPU (p50 ${s.p50.toFixed(1)} ms), OIDC ${o.rps.toFixed(0)} req/s ${o.cpu.toFixed(2)} ms CPU (p50 ${o.p50.toFixed(1)} ms)`,
      );
    }
  } finally {
    await server?.stop();
    await stub.close();
    await idp.close();
    await dns.close();
  }
  const loadAfter = loadavg();

  const g = 'sso';
  const kindRows = (kind: string, starts: Phase[], callbacks: Phase[], createCpu: number, excluded: string): Row[] => [
    {
      group: g,
      name: `sso/start (${kind}) @${CONNECTIONS}: req/s`,
      ours: starts.map((s) => s.rps),
      unit: 'req/s',
      lowerIsBetter: false,
    },
    { group: g, name: `sso/start (${kind}) p50`, ours: starts.map((s) => s.p50), unit: 'ms' },
    { group: g, name: `sso/start (${kind}) p99`, ours: starts.map((s) => s.p99), unit: 'ms' },
    { group: g, name: `sso/start (${kind}): server CPU per request`, ours: starts.map((s) => s.cpu), unit: 'ms' },
    {
      group: g,
      name: `sso/callback (${kind}) @${CONNECTIONS} (a login, a session issued): req/s`,
      ours: callbacks.map((c) => c.rps),
      unit: 'req/s',
      lowerIsBetter: false,
    },
    { group: g, name: `sso/callback (${kind}) p50`, ours: callbacks.map((c) => c.p50), unit: 'ms' },
    { group: g, name: `sso/callback (${kind}) p99`, ours: callbacks.map((c) => c.p99), unit: 'ms' },
    {
      group: g,
      name: `sso/callback (${kind}): server CPU per callback (${excluded})`,
      ours: callbacks.map((c) => c.cpu),
      unit: 'ms',
    },
    {
      group: g,
      name: `sso/callback (${kind}) making the account just in time, server CPU per callback (${PEOPLE}, once)`,
      ours: [createCpu],
      unit: 'ms',
    },
    {
      group: g,
      name: `sso/start and sso/callback (${kind}) answers other than a 200 login (of every round)`,
      ours: starts.map((s, i) => s.bad + callbacks[i]!.bad),
      unit: 'count',
      target: '0',
      ok: [...starts, ...callbacks].every((p) => p.bad === 0),
    },
  ];
  const rows = [
    ...kindRows('SAML', samlStarts, samlCallbacks, samlCreateCpu, "the IdP's signing excluded"),
    ...kindRows('OIDC', oidcStarts, oidcCallbacks, oidcCreateCpu, "the issuer's time excluded"),
  ];
  notes.push(
    '## Enterprise sign-in (issue 61)',
    `\`./pnpmw bench --only sso\` (sso.ts). One server (the built one, the rate limits lifted as in the rest of the bench, \`PUBLIC_URL\` set, \`DNS_RESOLVER\` at a DNS server in the bench's process) on the local PostgreSQL, whose database holds the bench's 100,000 accounts of site \`default\` besides. Set up through the API alone, as a site's backend does: a site \`${SITE}\` (its token minted as \`cli token create\` mints one, the only write of the bench's own), a role, two organizations, each with a domain verified by org/domain/verify (the TXT record org/domain/add answered, served by that DNS server), a SAML connection (its metadata read by the server from the IdP's URL) and an OpenID Connect one (its discovery read at create). The IdPs run in the bench's process: a SAML IdP on samlify's IdP role (copied in part from contract-tests' sso-harness.ts) and providers.ts's stub OpenID Connect issuer. The server's CPU per request is its process's user + system time (/proc) over a phase, divided by the phase's requests: ours alone, the IdPs' and the load generator's time on the bench's CPU.`,
    `Each callback is a whole one, at ${CONNECTIONS} connections (closed loops): a state made by sso/start a moment before (single use), a person whose account exists (200, \`created: false\`), and a session issued (\`session: {}\`); any other answer counts in the row of answers. SAML: the IdP answers the start's AuthnRequest with a signed Response (RSA-SHA256, the NameID the email) before the timed phase, so that its signing is in neither the server's CPU nor the latencies; the server checks the signature with the connection's certificate (node-saml), InResponseTo, Destination, Recipient, Audience, Issuer, the times, the assertion id once (a row), then the identity's login and the session. OIDC: the code exchanged with PKCE by openid-client at the stub's token endpoint, the ID token checked (signature, iss, aud, nonce, exp, RFC 9207's iss), the login and the session; its latencies include the stub's answer (a local RSA signature). The ${PEOPLE} people of each kind were made by their first callback (the account just in time, a member of the organization with its default role); that callback's CPU is its own row, measured once. sso/start is autocannon's load at ${CONNECTIONS} connections for ${b.seconds} s, one email of the verified domain: the connection found by the domain, the state kept, the IdP's URL made (SAML: the AuthnRequest, deflated, unsigned: the IdP does not ask for signed requests).`,
    `**The machine** (2 cores, shared with other work): load average (1, 5, 15 min) before ${loadBefore.map((l) => l.toFixed(2)).join(', ')}; after ${loadAfter.map((l) => l.toFixed(2)).join(', ')}. The bench's own process (the load generator, the OIDC stub's signatures during its phase) shares the cores with the server: the throughputs are those of that machine; the CPU per request is the steadier figure.`,
  );
  return { rows, notes };
}
