// `cli provider set|list|remove` (issue 59, point 1) on a migrated database: what set stores is
// what the API lists (siteProviders), the client secret only sealed (under FACTOR_ENCRYPTION_KEY's
// ring, bound to its row) and never in any output; what it refuses (non-https URLs, wildcards,
// options of the other kind) exits 2 naming the option, and changes nothing.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SealedSecretError } from '../kernel/secret-box.ts';
import { openClientSecret, siteProviders } from '../providers/providers.ts';
import { useCliDatabase } from '../testing/cli-database.ts';
import { inlineClientSecret } from './commands.ts';

const SECRET = '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w-this';
const REDIRECT = 'https://shop.example.com/auth/callback';

describe('cli provider set|list|remove', () => {
  const harness = useCliDatabase({ prefix: 'providers', files: { secret: `${SECRET}\n` } });
  const { ring, newSite } = harness;
  const secretFile = harness.files.secret!;
  const cli = (argv: string[]) => harness.cli(argv);

  it('sets a preset with a name, a client id and secret and the redirect URIs, lists it, and keeps the secret only sealed', async () => {
    const site = newSite();
    const set = await cli(
      inlineClientSecret(
        [
          'provider',
          'set',
          '--site',
          site,
          '--name',
          'google',
          '--client-id',
          'id-1.apps.googleusercontent.com',
          '--client-secret-file',
          secretFile,
          '--redirect-uris',
          `${REDIRECT},http://localhost:3000/callback`,
        ],
        undefined,
      ),
    );
    expect(set, set.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(set.stdout).toContain(
      `Added provider google of site ${site} (OpenID Connect, issuer https://accounts.google.com).`,
    );
    expect(set.stdout).toContain('Scopes openid email profile; 2 redirect URIs; a person new to the site is refused.');
    expect(set.stdout).not.toContain(SECRET);

    expect(await siteProviders(harness.database.db, site)).toEqual([
      {
        name: 'google',
        kind: 'oidc',
        issuer: 'https://accounts.google.com',
        clientId: 'id-1.apps.googleusercontent.com',
        scopes: ['openid', 'email', 'profile'],
        redirectUris: [REDIRECT, 'http://localhost:3000/callback'],
        onNewPerson: 'refuse',
      },
    ]);
    const [row] = await harness.database.sql.unsafe(
      'select row_to_json(p)::text as row from providers p where site = $1',
      [site],
    );
    expect(row!.row).not.toContain(SECRET);
    expect(row!.row).toMatch(/"client_secret_sealed":"v1\.k1\./);
    expect(await openClientSecret(harness.database.db, site, 'google', ring)).toBe(SECRET);
    // Bound to its row: copied onto another provider's, it does not open.
    await cli([
      'provider',
      'set',
      '--site',
      site,
      '--name',
      'gitlab',
      '--client-id',
      'g',
      '--redirect-uris',
      REDIRECT,
      '--client-secret-inline',
      'other',
    ]);
    await harness.database.sql.unsafe(
      `update providers set client_secret_sealed = (select client_secret_sealed from providers where site = $1 and name = 'google') where site = $1 and name = 'gitlab'`,
      [site],
    );
    await expect(openClientSecret(harness.database.db, site, 'gitlab', ring)).rejects.toBeInstanceOf(SealedSecretError);

    for (const argv of [
      ['provider', 'list'],
      ['provider', 'list', '--site', site],
      ['provider', 'list', '--json'],
    ]) {
      const listed = await cli(argv);
      expect(listed.code).toBe(0);
      expect(listed.stdout).not.toContain(SECRET);
      expect(listed.stdout).not.toContain('v1.k1.');
      expect(listed.stdout).toContain('id-1.apps.googleusercontent.com');
    }
    const table = (await cli(['provider', 'list', '--site', site])).stdout;
    expect(table).toMatch(
      /SITE\s+NAME\s+KIND\s+ISSUER OR AUTHORIZATION URL\s+CLIENT ID\s+SCOPES\s+REDIRECT URIS\s+NEW PERSON\s+UPDATED/,
    );
    expect(table).toMatch(new RegExp(`${site}\\s+google\\s+oidc\\s+https://accounts.google.com\\s+id-1`));
    const json = JSON.parse((await cli(['provider', 'list', '--site', site, '--json'])).stdout) as Record<
      string,
      unknown
    >[];
    expect(json.map((p) => p.name)).toEqual(['gitlab', 'google']);
    expect(Object.keys(json[0]!)).not.toContain('clientSecretSealed');
  });

  it('replaces a provider whole, keeping its secret when none is given; a new one needs a secret', async () => {
    const site = newSite();
    const base = [
      'provider',
      'set',
      '--site',
      site,
      '--name',
      'github',
      '--client-id',
      'Iv1.abc',
      '--redirect-uris',
      REDIRECT,
    ];
    const none = await cli(base);
    expect(none).toMatchObject({ code: 1, stdout: '' });
    expect(none.stderr).toContain(`Site ${site} has no provider github yet: give its client secret`);
    expect(await siteProviders(harness.database.db, site)).toEqual([]);

    expect((await cli([...base, '--client-secret-inline', SECRET])).code).toBe(0);
    const replaced = await cli([
      ...base.slice(0, -1),
      'https://shop.example.com/gh',
      '--on-new-person',
      'create',
      '--scopes',
      'read:user',
    ]);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(replaced.stdout).toContain(
      `Replaced provider github of site ${site} (OAuth 2.0, https://github.com/login/oauth/authorize).`,
    );
    expect(replaced.stdout).toContain('Its client secret is kept as it was.');
    expect(await siteProviders(harness.database.db, site)).toEqual([
      {
        name: 'github',
        kind: 'oauth2',
        issuer: null,
        clientId: 'Iv1.abc',
        scopes: ['read:user'],
        redirectUris: ['https://shop.example.com/gh'],
        onNewPerson: 'create',
      },
    ]);
    expect(await openClientSecret(harness.database.db, site, 'github', ring)).toBe(SECRET);
  });

  it('sets a plain OAuth 2.0 provider with its URLs and userinfo mapping, over http on a loopback address', async () => {
    const site = newSite();
    const set = await cli([
      'provider',
      'set',
      '--site',
      site,
      '--name',
      'forge',
      '--client-id',
      'forge-client',
      '--kind',
      'oauth2',
      '--authorization-url',
      'http://127.0.0.1:4000/authorize',
      '--token-url',
      'http://127.0.0.1:4000/token',
      '--userinfo-url',
      'http://127.0.0.1:4000/user',
      '--emails-url',
      'http://127.0.0.1:4000/user/emails',
      '--userinfo-map',
      'subject=/id,name=/name',
      '--redirect-uris',
      'http://[::1]:3000/cb',
      '--client-secret-inline',
      SECRET,
    ]);
    expect(set.code, set.stderr).toBe(0);
    const [row] = await harness.database.sql.unsafe('select endpoints, userinfo_map from providers where site = $1', [
      site,
    ]);
    expect(row).toEqual({
      endpoints: {
        authorization: 'http://127.0.0.1:4000/authorize',
        token: 'http://127.0.0.1:4000/token',
        userinfo: 'http://127.0.0.1:4000/user',
        emails: 'http://127.0.0.1:4000/user/emails',
      },
      userinfo_map: { subject: '/id', name: '/name' },
    });
  });

  it.each([
    [
      'an http issuer away from loopback',
      ['--name', 'acme', '--issuer', 'http://id.acme.example'],
      '--issuer must be https://',
    ],
    [
      'a wildcard redirect URI',
      ['--name', 'google', '--redirect-uris', 'https://*.shop.example.com/cb'],
      'without wildcards',
    ],
    [
      'an http redirect URI',
      ['--name', 'google', '--redirect-uris', 'http://shop.example.com/cb'],
      '--redirect-uris must be https://',
    ],
    [
      'an endpoint of OAuth 2.0 on OpenID Connect',
      ['--name', 'google', '--token-url', 'https://x.example/t'],
      '--token-url is for --kind oauth2',
    ],
    ['an unknown option', ['--name', 'google', '--tenant', 'x'], 'unknown option --tenant'],
    [
      'a bad rule for new people',
      ['--name', 'google', '--on-new-person', 'link'],
      '--on-new-person must be create or refuse',
    ],
    ['no client id', ['--name', 'google', '--client-id'], '--client-id needs a value'],
  ])('refuses %s (exit 2, the option named, nothing stored)', async (_, options, message) => {
    const site = newSite();
    const argv = [
      'provider',
      'set',
      '--site',
      site,
      '--client-id',
      'c',
      '--redirect-uris',
      REDIRECT,
      '--client-secret-inline',
      SECRET,
    ];
    const refused = await cli([...argv, ...options]);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain(message);
    expect(refused.stderr).toContain('Usage: cli provider set');
    expect(refused.stderr).not.toContain(SECRET);
    expect(await siteProviders(harness.database.db, site)).toEqual([]);
  });

  it('removes a provider, and says when there is none of that name', async () => {
    const site = newSite();
    await cli([
      'provider',
      'set',
      '--site',
      site,
      '--name',
      'apple',
      '--client-id',
      'com.shop',
      '--redirect-uris',
      REDIRECT,
      '--client-secret-inline',
      SECRET,
    ]);
    const removed = await cli(['provider', 'remove', '--site', site, '--name', 'apple']);
    expect(removed).toEqual({
      code: 0,
      stdout: `Removed provider apple of site ${site}, and its client secret.\n`,
      stderr: '',
    });
    expect(await siteProviders(harness.database.db, site)).toEqual([]);
    expect(await cli(['provider', 'remove', '--site', site, '--name', 'apple'])).toEqual({
      code: 1,
      stdout: '',
      stderr: `Site ${site} has no provider apple.\n`,
    });
  });
});

describe('inlineClientSecret (the CLI’s own process reads the secret)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'providers-inline-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const set = ['provider', 'set', '--site', 'shop', '--name', 'google'];

  it('reads --client-secret-file, else PROVIDER_CLIENT_SECRET; drops an inline secret typed by the operator', () => {
    const file = join(dir, 'secret');
    writeFileSync(file, 'from-the-file\n');
    expect(inlineClientSecret([...set, '--client-secret-file', file], 'from-env')).toEqual([
      ...set,
      '--client-secret-file',
      file,
      '--client-secret-inline',
      'from-the-file\n',
    ]);
    expect(inlineClientSecret(set, 'from-env')).toEqual([...set, '--client-secret-inline', 'from-env']);
    expect(inlineClientSecret([...set, '--client-secret-inline', 'typed'], undefined)).toEqual(set);
    // A file that is not there is the command's to report; other commands are left as they are.
    const missing = [...set, '--client-secret-file', join(dir, 'none')];
    expect(inlineClientSecret(missing, 'from-env')).toEqual(missing);
    expect(inlineClientSecret(['token', 'list'], 'from-env')).toEqual(['token', 'list']);
  });
});
