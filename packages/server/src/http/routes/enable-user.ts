import type { components } from '@user-accounts/client';
import { setDisabled } from '../../accounts/disable.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type EnableUserResponse = components['schemas']['EnableUserResponse'];

export const enableUser = defineOperation({
  name: 'enableUser',
  method: 'POST',
  path: '/api/1/user/enable',
  scope: 'write',
  request: { body: 'EnableUserRequest' },
  writes: 'enable',
  parse(c) {
    const fields = validBody(c, 'EnableUserRequest');
    return { fields, ifMatch: parseIfMatch(c.req.header('if-match')) };
  },
  async handle(c, { fields, ifMatch }) {
    const { version } = await setDisabled(writeScopeOf(c), writeDepsOf(c), fields._userId, ifMatch, false);
    c.header('ETag', etagOf(version));
    return c.json({ result: { status: 'user enabled' } } satisfies EnableUserResponse, 200);
  },
});
