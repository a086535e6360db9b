// GET /api/1/provider/list: the token's site's sign-in providers, by name, never their secrets.
import type { components } from '@user-accounts/client';
import { siteProviders } from '../../providers/providers.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type ListProvidersResponse = components['schemas']['ListProvidersResponse'];

const PATH = '/api/1/provider/list';

export const listProviders = defineOperation({
  name: 'listProviders',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  // No parameters: an unknown one is refused as everywhere.
  parse: (c) => validQuery<Record<string, never>>(c, PATH),
  async handle(c) {
    const providers = await siteProviders(c.get('deps').database.db, c.get('token').site);
    return c.json({ result: { providers } } satisfies ListProvidersResponse, 200);
  },
});
