// A site's sign-in providers through the client (issue 59, point 1): GET /api/1/provider/list
// answers the token's site's providers by name, as the operator configured them (stored here as
// `cli provider set` stores them, through providers/), without their client secrets, and never
// another site's. Server targets only: Prism answers the spec's examples.
import { checkProvider } from '@user-accounts/server/providers/options';
import { setProvider } from '@user-accounts/server/providers/providers';
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

const SECRET = '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lds';

export function defineProvidersSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: the site's sign-in providers`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async (scopes: ('read' | 'write' | 'verify')[] = ['read']) => {
      const site = `providers-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes, label: 'providers' });
      return { site, client: h.clientFor(token) };
    };
    const configure = async (site: string, options: Record<string, string>) => {
      const deps = h.target.deps!();
      const config = checkProvider({
        site,
        name: options.name!,
        clientId: `${options.name}-client`,
        redirectUris: 'https://shop.example.com/auth/callback',
        ...options,
      });
      await setProvider(deps.database.db, config, `${SECRET}-${options.name}`, deps.factorKeys);
    };

    it('lists the site’s providers by name, as configured, with their client ids and never a secret', async () => {
      const { site, client } = await newSite();
      await configure(site, { name: 'google', onNewPerson: 'create' });
      await configure(site, {
        name: 'forge',
        kind: 'oauth2',
        authorizationUrl: 'http://127.0.0.1:4000/authorize',
        tokenUrl: 'http://127.0.0.1:4000/token',
        userinfoUrl: 'http://127.0.0.1:4000/user',
        userinfoMap: 'subject=/id,email=/email',
        scopes: 'profile',
        redirectUris: 'http://localhost:3000/cb,https://shop.example.com/cb',
      });
      const { data, error, response } = await client.GET('/api/1/provider/list');
      expect(error).toBeUndefined();
      expect(response.status).toBe(200);
      expect(data!.result.providers).toEqual([
        {
          name: 'forge',
          kind: 'oauth2',
          issuer: null,
          clientId: 'forge-client',
          scopes: ['profile'],
          redirectUris: ['http://localhost:3000/cb', 'https://shop.example.com/cb'],
          onNewPerson: 'refuse',
        },
        {
          name: 'google',
          kind: 'oidc',
          issuer: 'https://accounts.google.com',
          clientId: 'google-client',
          scopes: ['openid', 'email', 'profile'],
          redirectUris: ['https://shop.example.com/auth/callback'],
          onNewPerson: 'create',
        },
      ]);
      expect(JSON.stringify(data)).not.toContain(SECRET);
      // Nor the sealed form, nor where the secret is in the log of the request.
      expect(JSON.stringify(data)).not.toMatch(/"v1\./);
      expect(h.target.logs.join('\n')).not.toContain(SECRET);
    });

    it('shows no other site’s providers: a site without any gets an empty list', async () => {
      const other = await newSite();
      await configure(other.site, { name: 'github' });
      await configure(other.site, { name: 'oidc:acme', issuer: 'https://id.acme.example' });
      const { site, client } = await newSite();
      await configure(site, { name: 'apple' });
      const mine = await client.GET('/api/1/provider/list');
      expect(mine.data!.result.providers.map((p) => p.name)).toEqual(['apple']);
      const empty = await (await newSite()).client.GET('/api/1/provider/list');
      expect(empty.response.status).toBe(200);
      expect(empty.data).toEqual({ result: { providers: [] } });
      const theirs = await other.client.GET('/api/1/provider/list');
      expect(theirs.data!.result.providers.map((p) => p.name)).toEqual(['github', 'oidc:acme']);
    });

    it('needs the read scope, and takes no parameter', async () => {
      const { client } = await newSite(['verify']);
      const refused = await client.GET('/api/1/provider/list');
      expect(refused.response.status).toBe(403);
      expect(refused.error?.code).toBe('forbidden');
      const { client: reader } = await newSite();
      const unknown = await reader.GET('/api/1/provider/list', { params: { query: { site: 'other' } as never } });
      expect(unknown.response.status).toBe(400);
      expect(unknown.error?.code).toBe('invalid_request');
    });
  });
}
