import type { components } from '@user-accounts/client';
import { rolesOf } from '../../orgs/roles.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/roles';

type GetOrgRolesResponse = components['schemas']['GetOrgRolesResponse'];

export const getOrgRoles = defineOperation({
  name: 'getOrgRoles',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<Record<string, never>>(c, PATH),
  async handle(c) {
    const roles = await rolesOf(c.get('deps').database.db, c.get('token').site);
    return c.json({ result: { roles } } satisfies GetOrgRolesResponse, 200);
  },
});
