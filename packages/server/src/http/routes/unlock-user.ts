import type { components } from '@user-accounts/client';
import { unlockAccount } from '../../accounts/unlock.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type UnlockUserResponse = components['schemas']['UnlockUserResponse'];

export const unlockUser = defineOperation({
  name: 'unlockUser',
  method: 'POST',
  path: '/api/1/user/unlock',
  scope: 'write',
  request: { body: 'UnlockUserRequest' },
  writes: 'unlock',
  parse(c) {
    const fields = validBody(c, 'UnlockUserRequest');
    return { fields, ifMatch: parseIfMatch(c.req.header('if-match')) };
  },
  async handle(c, { fields, ifMatch }) {
    const deps = { ...writeDepsOf(c), lockout: c.get('deps').lockout };
    const { version } = await unlockAccount(writeScopeOf(c), deps, fields._userId, ifMatch);
    c.header('ETag', etagOf(version));
    return c.json({ result: { status: 'user unlocked' } } satisfies UnlockUserResponse, 200);
  },
});
