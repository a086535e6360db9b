import type { components } from '@user-accounts/client';
import { listSessions as list } from '../../sessions/manage.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/session/list';

type ListSessionsResponse = components['schemas']['ListSessionsResponse'];

export const listSessions = defineOperation({
  name: 'listSessions',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ _userId: string }>(c, PATH),
  async handle(c, { _userId }) {
    const result = await list(c.get('deps').database.db, c.get('token').site, _userId);
    return c.json({ result } satisfies ListSessionsResponse, 200);
  },
});
