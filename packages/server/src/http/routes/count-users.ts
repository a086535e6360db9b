import type { components } from '@user-accounts/client';
import { checkFilters, countQuery, type ListFilters } from '../../accounts/listing.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type CountUsersResponse = components['schemas']['CountUsersResponse'];

const COUNT_USERS_PATH = '/api/1/user/count';

export const countUsers = defineOperation({
  name: 'countUsers',
  method: 'GET',
  path: COUNT_USERS_PATH,
  scope: 'read',
  request: { query: true },
  parse(c) {
    const filters = validQuery<ListFilters>(c, COUNT_USERS_PATH);
    checkFilters(filters);
    return filters;
  },
  async handle(c, filters) {
    const [row] = await countQuery(c.get('deps').database.db, c.get('token').site, filters);
    return c.json({ result: { count: row!.count } } satisfies CountUsersResponse, 200);
  },
});
