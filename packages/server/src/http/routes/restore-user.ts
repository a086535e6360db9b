import type { components } from '@user-accounts/client';
import { restoreAccount } from '../../accounts/delete.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type RestoreUserResponse = components['schemas']['RestoreUserResponse'];

export const restoreUser = defineOperation({
  name: 'restoreUser',
  method: 'POST',
  path: '/api/1/user/restore',
  scope: 'write',
  request: { body: 'RestoreUserRequest' },
  writes: 'restore',
  parse(c) {
    return validBody(c, 'RestoreUserRequest');
  },
  async handle(c, fields) {
    await restoreAccount(writeScopeOf(c), writeDepsOf(c), fields._userId);
    return c.json({ result: { status: 'user restored' } } satisfies RestoreUserResponse, 200);
  },
});
