import type { components } from '@user-accounts/client';
import { checkPhoneVerified } from '../../accounts/contacts.ts';
import { createAccount } from '../../accounts/create.ts';
import { checkMetadata } from '../../accounts/metadata.ts';
import { weakPassword } from '../../accounts/new-password.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { defineOperation } from '../define-operation.ts';
import { answerWith, jsonAnswer, writeScopeOf } from '../run-write.ts';
import { GET_USER_PATH } from './get-user.ts';
import { newPasswordDepsOf, validBody } from './shared.ts';

type CreateUserResponse = components['schemas']['CreateUserResponse'];

export const createUser = defineOperation({
  name: 'createUser',
  method: 'POST',
  path: '/api/1/user/create',
  scope: 'write',
  request: { body: 'CreateUserRequest' },
  budget: 'hash',
  idempotent: true,
  writes: 'create',
  parse(c) {
    const input = validBody(c, 'CreateUserRequest');
    const reason = weakPasswordReason(input.password, { email: input.email, name: input.name });
    if (reason !== undefined) throw weakPassword(reason);
    if (input.metadata !== undefined) checkMetadata(input.metadata);
    checkPhoneVerified(input, true);
    return input;
  },
  async handle(c, input) {
    const answer = (id: string) =>
      jsonAnswer({ result: { _userId: id, status: 'user created' } } satisfies CreateUserResponse, {
        location: `${GET_USER_PATH}?_userId=${id}`,
      });
    const id = await createAccount(
      writeScopeOf(c),
      { ...newPasswordDepsOf(c), maxAccountsPerSite: c.get('deps').maxAccountsPerSite },
      input,
      answer,
    );
    return answerWith(c, 201, answer(id));
  },
});
