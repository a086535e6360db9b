import type { components } from '@user-accounts/client';
import { checkRoleSet, setRoles } from '../../orgs/roles.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type SetOrgRolesResponse = components['schemas']['SetOrgRolesResponse'];

export const setOrgRoles = defineOperation({
  name: 'setOrgRoles',
  method: 'POST',
  path: '/api/1/org/roles',
  scope: 'write',
  request: { body: 'SetOrgRolesRequest' },
  writes: 'org_roles',
  parse(c) {
    const input = validBody(c, 'SetOrgRolesRequest');
    checkRoleSet(input.roles);
    return input;
  },
  async handle(c, { roles }) {
    await setRoles(writeScopeOf(c), writeDepsOf(c), roles);
    return c.json({ result: { status: 'roles set' } } satisfies SetOrgRolesResponse, 200);
  },
});
