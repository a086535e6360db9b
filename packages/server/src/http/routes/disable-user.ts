import type { components } from '@user-accounts/client';
import { setDisabled } from '../../accounts/disable.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
import { defineOperation } from '../operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type DisableUserResponse = components['schemas']['DisableUserResponse'];

export const disableUser = defineOperation({
  name: 'disableUser',
  method: 'POST',
  path: '/api/1/user/disable',
  scope: 'write',
  request: { body: 'DisableUserRequest' },
  writes: 'disable',
  parse(c) {
    const fields = validBody(c, 'DisableUserRequest');
    return { fields, ifMatch: parseIfMatch(c.req.header('if-match')) };
  },
  async handle(c, { fields, ifMatch }) {
    const { version } = await setDisabled(writeScopeOf(c), writeDepsOf(c), fields._userId, ifMatch, true);
    c.header('ETag', etagOf(version));
    return c.json({ result: { status: 'user disabled' } } satisfies DisableUserResponse, 200);
  },
});
