import type { components } from '@user-accounts/client';
import { setDisabled } from '../../accounts/disable.ts';
import { invalidRequest } from '../../errors.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
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
    // The schema checked the format (RFC 3339 with an offset); an end already past would enable
    // the account at the next housekeeping run, which no caller can mean. (A leap second, which the
    // format admits and Date does not, is refused here too.)
    const until = fields.until === undefined ? null : new Date(fields.until);
    if (until !== null && !(until.getTime() > Date.now()))
      throw invalidRequest('until must be later than now.', [
        { pointer: '/until', code: 'not_allowed', message: 'must be later than now' },
      ]);
    return {
      fields,
      suspension: { until, reason: fields.reason ?? null },
      ifMatch: parseIfMatch(c.req.header('if-match')),
    };
  },
  async handle(c, { fields, suspension, ifMatch }) {
    const { version } = await setDisabled(writeScopeOf(c), writeDepsOf(c), fields._userId, ifMatch, true, suspension);
    c.header('ETag', etagOf(version));
    return c.json({ result: { status: 'user disabled' } } satisfies DisableUserResponse, 200);
  },
});
