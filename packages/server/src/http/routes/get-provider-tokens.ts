// GET /api/1/provider/tokens (issue 59, point 3): the provider's tokens of an account's identity,
// kept only for a provider set with --keep-tokens; scope export.
import type { components } from '@user-accounts/client';
import { readProviderTokens } from '../../providers/sign-in.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type ProviderTokensResponse = components['schemas']['ProviderTokensResponse'];

const PATH = '/api/1/provider/tokens';

export const getProviderTokens = defineOperation({
  name: 'getProviderTokens',
  method: 'GET',
  path: PATH,
  scope: 'export',
  request: { query: true },
  parse: (c) => validQuery<{ _userId: string; provider: string }>(c, PATH),
  async handle(c, query) {
    const deps = c.get('deps');
    const tokens = await readProviderTokens(
      deps.database.db,
      deps.factorKeys,
      c.get('token').site,
      query._userId,
      query.provider,
    );
    return c.json(
      { result: { ...tokens, updatedAt: tokens.updatedAt.toISOString() } } satisfies ProviderTokensResponse,
      200,
    );
  },
});
