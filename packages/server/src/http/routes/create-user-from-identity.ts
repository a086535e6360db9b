import type { components } from '@user-accounts/client';
import { checkPhoneVerified } from '../../accounts/contacts.ts';
import { checkMetadata } from '../../accounts/metadata.ts';
import { createFromIdentity } from '../../identities/identities.ts';
import { defineOperation } from '../define-operation.ts';
import { answerWith, jsonAnswer, writeDepsOf, writeScopeOf } from '../run-write.ts';
import { GET_USER_PATH } from './get-user.ts';
import { validBody } from './shared.ts';

type CreateUserResponse = components['schemas']['CreateUserResponse'];

export const createUserFromIdentity = defineOperation({
  name: 'createUserFromIdentity',
  method: 'POST',
  path: '/api/1/user/identity/create',
  scope: 'write',
  request: { body: 'CreateUserFromIdentityRequest' },
  idempotent: true,
  writes: 'identity_create',
  parse(c) {
    const input = validBody(c, 'CreateUserFromIdentityRequest');
    if (input.metadata !== undefined) checkMetadata(input.metadata);
    checkPhoneVerified(input, true);
    return input;
  },
  async handle(c, input) {
    const answer = (id: string) =>
      jsonAnswer({ result: { _userId: id, status: 'user created' } } satisfies CreateUserResponse, {
        location: `${GET_USER_PATH}?_userId=${id}`,
      });
    const id = await createFromIdentity(
      writeScopeOf(c),
      { ...writeDepsOf(c), maxAccountsPerSite: c.get('deps').maxAccountsPerSite },
      input,
      answer,
    );
    return answerWith(c, 201, answer(id));
  },
});
