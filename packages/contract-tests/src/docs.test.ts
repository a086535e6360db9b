// The contract as the server serves it, and the reference page in a real browser: all four
// operations and the error model shown, and no request leaving the server.
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { chromiumUnavailable, launchChromium } from './browser/chromium.ts';
import { SPEC_FILE } from './spec-check.ts';
import { embeddedServer, type Target } from './targets.ts';

// UPDATE_SCREENSHOTS=1 refreshes the README's picture; otherwise the screenshot goes to a temporary folder.
const SCREENSHOT = process.env.UPDATE_SCREENSHOTS
  ? fileURLToPath(new URL('../../../docs/api-reference.png', import.meta.url))
  : join(tmpdir(), `ua-api-reference-${process.pid}.png`);

let target: Target;
beforeAll(async () => {
  target = await embeddedServer();
});
afterAll(async () => {
  await target?.close();
});

describe('the contract, served', () => {
  it('serves /openapi.yaml as the repository holds it, and /openapi.json as the same document', async () => {
    const yaml = await fetch(`${target.baseUrl}/openapi.yaml`);
    expect(yaml.headers.get('content-type')).toMatch(/^application\/yaml/);
    expect(await yaml.text()).toBe(readFileSync(SPEC_FILE, 'utf8'));
    const json = await fetch(`${target.baseUrl}/openapi.json`);
    expect(await json.json()).toEqual(parse(readFileSync(SPEC_FILE, 'utf8')));
  });
});

const unavailable = chromiumUnavailable();
if (unavailable) console.warn(`\n[contract-tests] browser tests SKIPPED: ${unavailable}\n`);

describe.skipIf(unavailable !== undefined)('/docs in Chromium', () => {
  it('shows the four operations and the error model, offline: no request leaves the server', async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const elsewhere: string[] = [];
      page.on('request', (request) => {
        const url = request.url();
        if (!url.startsWith(target.baseUrl) && !url.startsWith('data:') && !url.startsWith('blob:'))
          elsewhere.push(url);
      });
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
      const response = await page.goto(`${target.baseUrl}/docs`);
      expect(response?.status()).toBe(200);
      const shows = (text: string) =>
        // biome-ignore lint/performance/useDomNodeTextContent: what is shown, not what is in the DOM
        page.waitForFunction((t) => document.body.innerText.includes(t), text, { timeout: 20_000 });
      for (const text of ['Get one account', 'Create an account', 'Update an account profile', 'Delete an account'])
        await shows(text);
      // The error model: the Problem schema, with its stable codes.
      await page.getByText('Models', { exact: true }).first().click();
      await shows('Problem');
      await page.getByText('Problem', { exact: true }).first().click();
      await shows('requestId');
      await shows('invalid_json'); // the first of its stable codes
      mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT });
      expect(elsewhere).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
