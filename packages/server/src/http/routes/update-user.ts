import type { components } from '@user-accounts/client';
import { checkPhoneVerified } from '../../accounts/contacts.ts';
import { checkMetadata } from '../../accounts/metadata.ts';
import { weakPassword } from '../../accounts/new-password.ts';
import { updateAccount } from '../../accounts/update.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
import { answerWith, jsonAnswer, writeScopeOf } from '../run-write.ts';
import { newPasswordDepsOf, validBody } from './shared.ts';

type UpdateUserResponse = components['schemas']['UpdateUserResponse'];

export const updateUser = defineOperation({
  name: 'updateUser',
  method: 'POST',
  path: '/api/1/user/update',
  scope: 'write',
  request: { body: 'UpdateUserRequest' },
  idempotent: true,
  writes: 'update',
  parse(c) {
    const fields = validBody(c, 'UpdateUserRequest');
    const ifMatch = parseIfMatch(c.req.header('if-match'));
    // What can be told without the account: a common password, or one equal to the new name or
    // email. The account's email and name are compared once it is read.
    if (fields.password !== undefined) {
      const reason = weakPasswordReason(fields.password, { name: fields.name, email: fields.email });
      if (reason !== undefined) throw weakPassword(reason);
    }
    if (fields.metadata !== undefined) checkMetadata(fields.metadata);
    checkPhoneVerified(fields, false);
    return { fields, ifMatch };
  },
  async handle(c, { fields, ifMatch }) {
    const answer = (version: number) =>
      jsonAnswer({ result: { status: 'user updated' } } satisfies UpdateUserResponse, { etag: etagOf(version) });
    const version = await updateAccount(writeScopeOf(c), newPasswordDepsOf(c), fields, ifMatch, answer);
    return answerWith(c, 200, answer(version));
  },
});
