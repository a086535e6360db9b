import type { components } from '@user-accounts/client';
import { listFactors as list } from '../../factors/factors.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/user/factor/list';

type ListFactorsResponse = components['schemas']['ListFactorsResponse'];

export const listFactors = defineOperation({
  name: 'listFactors',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ _userId: string }>(c, PATH),
  async handle(c, { _userId }) {
    const result = await list(c.get('deps').database.db, c.get('token').site, _userId);
    return c.json({ result } satisfies ListFactorsResponse, 200);
  },
});
