// /docs as a frontend developer uses it: Scalar's "Test Request" on each operation, the token typed
// into its Authentication field, on a server that is not on the spec's :3000. Each request must go
// to the server that served the page (so neither CORS nor the page's connect-src is in the way),
// carry the token, and get an answer the spec documents, which the page then shows.
import { operations } from '@user-accounts/server/operations';
import { DEFAULT_SCOPES } from '@user-accounts/server/tokens';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumUnavailable, launchChromium } from './browser/chromium.ts';
import { createSpecChecker } from './spec-check.ts';
import { embeddedServer, type Target } from './targets.ts';

const checker = createSpecChecker();
const unavailable = chromiumUnavailable();
if (unavailable) console.warn(`\n[contract-tests] /docs Test Request tests SKIPPED: ${unavailable}\n`);

describe.skipIf(unavailable !== undefined)("/docs: Scalar's Test Request on each operation", () => {
  let target: Target;
  beforeAll(async () => {
    target = await embeddedServer();
    // A relying party, as `cli site set --rp-id --origins` makes one, so that the passkey
    // operations answer for their example, not 409 passkeys_not_configured.
    await target.sql(
      `insert into site_settings (site, rp_id, rp_origins) values ('default', 'localhost', '["http://localhost:5173"]')`,
    );
  });
  afterAll(async () => {
    await target?.close();
  });

  /** The operation's request in Scalar's client: its Test Request the first time, then the client's own sidebar. */
  async function openRequest(page: Page, op: (typeof operations)[number], first: boolean) {
    const client = page.getByRole('dialog');
    const spec = checker.spec.paths[op.path][op.method.toLowerCase()];
    if (first) {
      // The address Scalar's sidebar gives the operation; its section is rendered once scrolled to.
      await page.goto(`${target.baseUrl}/docs#tag/${spec.tags[0]}/${op.method}${op.path}`);
      await page.getByRole('button', { name: `Test Request (${op.method.toLowerCase()} ${op.path})` }).click();
      // A developer going from one operation to the next in the client: its sidebar, every group open.
      await client.getByRole('button', { name: 'Show sidebar' }).click();
      const closed = client.getByRole('button', { name: / Open Group$/ });
      while ((await closed.count()) > 0) await closed.first().click();
      return client;
    }
    await client
      .getByRole('complementary')
      // Scalar writes DELETE as DEL there.
      .getByRole('button', {
        name: `${spec.summary} HTTP Method: ${op.method.slice(0, 4).replace('DELE', 'DEL')}`,
        exact: true,
      })
      .click();
    // Its Send button (named by method and address, below) says the client shows the operation chosen.
    return client;
  }

  /** Opens the operation's request, types the token the first time, sends; the request, if one left. */
  async function testRequest(page: Page, op: (typeof operations)[number], typeToken: boolean) {
    const client = await openRequest(page, op, typeToken);
    // Scalar keeps what was typed for the whole page, as a developer going from one operation to the next sees.
    if (typeToken) {
      const field = client.getByRole('textbox', { name: 'Value', exact: true });
      // Empty, with a hint that cannot be mistaken for a token (Scalar's own looks like one).
      expect(await field.inputValue()).toBe('');
      expect(await field.getAttribute('placeholder')).toBe(
        'your API token: ua_…, on a dev server the one in data/dev-token',
      );
      await field.fill(target.token);
    }
    const sent = page
      .waitForRequest((r) => new URL(r.url()).pathname === op.path, { timeout: 10_000 })
      .catch(() => undefined);
    await client
      .getByRole('button', { name: `Send ${op.method.toLowerCase()} request to ${target.baseUrl}${op.path}` })
      .click();
    return { client, request: await sent };
  }

  it('sends each to this server with the token and shows a documented answer', async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      const failed: string[] = [];
      page.on('requestfailed', (r) => failed.push(`${r.url()}: ${r.failure()?.errorText}`));
      const refused: string[] = [];
      page.on('console', (m) => void (/Content Security Policy/i.test(m.text()) && refused.push(m.text())));
      await page.goto(`${target.baseUrl}/docs`);

      for (const [index, op] of operations.entries()) {
        const where = `${op.method} ${op.path}`;
        const { client, request } = await testRequest(page, op, index === 0);
        // A request the CSP refuses never starts: the console says why.
        if (request === undefined) expect.fail(`${where}: nothing was sent. ${refused.join(' ')}`);
        const response = await request.response();
        expect(new URL(request.url()).origin, where).toBe(target.baseUrl);
        expect(request.method(), where).toBe(op.method);
        expect(request.headers().authorization, where).toBe(target.token);
        expect(response, `${where}: no answer`).not.toBeNull();
        const status = response!.status();
        const body = status === 204 ? null : await response!.text();
        const answer = new Response(body, {
          status,
          headers: await response!.allHeaders(),
        });
        expect(await checker.check(op.method, op.path, answer), `${where} conforms to the spec`).toEqual([]);
        // The token accepted; with the operation's scope, the operation's own answer to Scalar's
        // example; without it (export, which a dev token lacks), the documented 403.
        expect(status, where).not.toBe(401);
        if ([op.scope].flat().some((s) => DEFAULT_SCOPES.includes(s))) expect(status, where).not.toBe(403);
        else expect(status, where).toBe(403);
        // As pre-filled, the request is a right one: a success, or the 404 of an example id that
        // names no account here; never 400 (both of get's parameters filled) nor 422 (an
        // Idempotency-Key pre-filled alike for every write).
        // An operation that takes a secret the server issued (a ticket, a passkey's answer to its
        // challenge, a session's token) cannot succeed with an example's: its 422 invalid_ticket
        // (invalid_credentials, invalid_session, a callback's invalid_state) is what the 404 is for an example id.
        const code = status === 422 ? (JSON.parse(body!) as { code?: string }).code : undefined;
        const secretMiss =
          code === 'invalid_ticket' ||
          code === 'invalid_session' ||
          // A callback's state or RelayState is one the server made at the start (provider/start, sso/start).
          (op.name === 'completeProviderSignIn' && code === 'invalid_state') ||
          (op.name === 'finishSso' && (code === 'invalid_state' || code === 'sso_response_invalid')) ||
          // What an example cannot make right: an IdP's metadata at an address of the example's, a TXT record.
          (op.name === 'createOrgConnection' && code === 'idp_metadata_invalid') ||
          (op.name === 'updateOrgConnection' && code === 'idp_metadata_invalid') ||
          (op.name === 'verifyOrgDomain' && code === 'domain_not_verified') ||
          (op.name === 'verifyPasskey' && code === 'invalid_credentials');
        if (status !== 403)
          expect(status < 300 || status === 404 || secretMiss, `${where} answered ${status}`).toBe(true);
        // The page could read it: the client shows the status.
        // biome-ignore lint/performance/useDomNodeTextContent: what is shown, not what is in the DOM
        await expect.poll(() => client.innerText(), { timeout: 10_000 }).toMatch(new RegExp(`\\b${status} [A-Z]`));
      }
      expect(failed).toEqual([]);
      expect(refused).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 300_000);
});
