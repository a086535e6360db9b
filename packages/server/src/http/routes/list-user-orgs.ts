import type { components } from '@user-accounts/client';
import { orgsOfAccount } from '../../orgs/members.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/user/orgs';

type ListUserOrgsResponse = components['schemas']['ListUserOrgsResponse'];

export const listUserOrgs = defineOperation({
  name: 'listUserOrgs',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ _userId: string }>(c, PATH),
  async handle(c, { _userId }) {
    const orgs = await orgsOfAccount(c.get('deps').database.db, c.get('token').site, _userId);
    return c.json({ result: { orgs } } satisfies ListUserOrgsResponse, 200);
  },
});
