// The console's accessibility as Lighthouse scores it (issue 64, point 2: "axe clean, Lighthouse
// accessibility 100"): Lighthouse itself (the npm package, its accessibility category only) in
// snapshot mode over a Debian Chromium driven by puppeteer-core, on every screen a person looks
// after accounts with: the sign-in screen, the accounts list, each of an account's five tabs, the
// organizations, live events, webhooks and sign-in providers. The score must be 1 on each; a miss
// names the failing audits and their first elements. Against the real server on the embedded
// database (console-browser.timed.test.ts covers both databases and the actions).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createClient } from '@user-accounts/client';
import { snapshot } from 'lighthouse';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, chromiumUnavailable } from './browser/chromium.ts';
import { pgliteTarget, type Target } from './targets.ts';

const CONSOLE = fileURLToPath(new URL('../../console/', import.meta.url));
const unavailable = chromiumUnavailable();
if (unavailable) console.warn(`\n[contract-tests] /console Lighthouse audit SKIPPED: ${unavailable}\n`);

/** Lighthouse's accessibility score of the page as it is now, and its failing audits, one line each. */
async function accessibility(page: Page): Promise<{ score: number | null; failing: string[] }> {
  const result = await snapshot(page, {
    config: { extends: 'lighthouse:default', settings: { onlyCategories: ['accessibility'] } },
  });
  const lhr = result!.lhr;
  const failing = Object.values(lhr.audits)
    .filter((a) => a.score !== null && a.score < 1 && a.scoreDisplayMode !== 'informative')
    .map((a) => {
      const items = (a.details as { items?: { node?: { selector?: string } }[] } | undefined)?.items ?? [];
      return `${a.id}: ${items
        .map((i) => i.node?.selector)
        .filter(Boolean)
        .slice(0, 3)
        .join(', ')}`;
    });
  return { score: lhr.categories.accessibility?.score ?? null, failing };
}

describe.skipIf(unavailable !== undefined)('/console under Lighthouse, server on embedded PGlite', () => {
  let target: Target;
  let browser: Browser;
  let userId: string;

  beforeAll(async () => {
    const built = spawnSync(process.execPath, ['build-if-stale.ts'], { cwd: CONSOLE, encoding: 'utf8' });
    expect(built.status, built.stderr + built.stdout).toBe(0);
    target = await pgliteTarget.start();
    const api = createClient({ baseUrl: target.baseUrl, token: target.token });
    const made = await api.POST('/api/1/user/create', {
      body: { email: 'ada@example.org', name: 'Ada Lovelace', password: 'a long and unusual passphrase' },
    });
    expect(made.error).toBeUndefined();
    userId = made.data!.result._userId;
    // Something in each tab: a session, an organization membership, an audit trail.
    await api.POST('/api/1/user/verify', {
      body: { email: 'ada@example.org', password: 'a long and unusual passphrase', session: { userAgent: 'test' } },
    });
    const org = await api.POST('/api/1/org/create', { body: { name: 'Acme' } });
    await api.POST('/api/1/org/roles', { body: { roles: [{ role: 'member', permissions: ['projects:read'] }] } });
    await api.POST('/api/1/org/member/add', {
      body: { orgId: org.data!.result.orgId, _userId: userId, roles: ['member'] },
    });
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await target?.close();
  });

  it('scores 100 for accessibility on the sign-in screen and every screen after it', async () => {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    const heading = (text: string) =>
      page.waitForFunction(
        (t) => [...document.querySelectorAll('h1, h2')].some((h) => h.textContent?.trim() === t),
        { timeout: 10_000 },
        text,
      );
    const scores: Record<string, number | null> = {};
    const failures: string[] = [];
    const audit = async (screen: string) => {
      const { score, failing } = await accessibility(page);
      scores[screen] = score;
      if (score !== 1) failures.push(`${screen} (${score}): ${failing.join('; ')}`);
    };

    await page.goto(`${target.baseUrl}/console`);
    await heading('Accounts console');
    await audit('sign-in');
    // Signed in as `cli console` signs in: the token in the address's fragment, which the page forgets.
    // (A new document: from /console, only the fragment would change, and the page reads it at load.)
    await page.goto('about:blank');
    await page.goto(`${target.baseUrl}/console#token=${target.token}`);
    await heading('Accounts');
    await audit('accounts');
    for (const tab of ['profile', 'security', 'sessions', 'organizations', 'activity']) {
      await page.evaluate((hash) => {
        location.hash = hash;
      }, `#/accounts/${userId}/${tab}`);
      await page.waitForFunction(
        (name) =>
          (document.querySelector('[role="tab"][aria-selected="true"]')?.textContent ?? '')
            .trim()
            .toLowerCase()
            .startsWith(name),
        { timeout: 10_000 },
        tab,
      );
      await audit(`account ${tab}`);
    }
    for (const [hash, title] of [
      ['#/orgs', 'Organizations'],
      ['#/events', 'Live events'],
      ['#/webhooks', 'Webhooks'],
      ['#/providers', 'Sign-in providers'],
    ] as const) {
      await page.evaluate((h) => {
        location.hash = h;
      }, hash);
      await heading(title);
      await audit(title.toLowerCase());
    }
    console.info(`[console] Lighthouse accessibility: ${JSON.stringify(scores)}`);
    expect(failures).toEqual([]);
    await page.close();
  }, 300_000);
});
