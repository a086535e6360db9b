import type { components } from '@user-accounts/client';
import { deleteAccount } from '../../accounts/delete.ts';
import { defineOperation } from '../define-operation.ts';
import { parseIfMatch } from '../etag.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type DeleteUserResponse = components['schemas']['DeleteUserResponse'];

export const deleteUser = defineOperation({
  name: 'deleteUser',
  method: 'DELETE',
  path: '/api/1/user/delete',
  scope: 'write',
  request: { body: 'DeleteUserRequest' },
  writes: 'delete',
  parse(c) {
    const fields = validBody(c, 'DeleteUserRequest');
    return { fields, ifMatch: parseIfMatch(c.req.header('if-match')) };
  },
  async handle(c, { fields, ifMatch }) {
    await deleteAccount(writeScopeOf(c), writeDepsOf(c), fields._userId, ifMatch, fields.graceDays);
    return c.json({ result: { status: 'user removed' } } satisfies DeleteUserResponse, 200);
  },
});
