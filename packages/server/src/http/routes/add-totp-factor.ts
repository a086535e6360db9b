import type { components } from '@user-accounts/client';
import { addTotp } from '../../factors/factors.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type AddTotpFactorResponse = components['schemas']['AddTotpFactorResponse'];

export const addTotpFactor = defineOperation({
  name: 'addTotpFactor',
  method: 'POST',
  path: '/api/1/user/factor/totp',
  scope: 'write',
  request: { body: 'AddTotpFactorRequest' },
  writes: 'factor_add',
  parse: (c) => validBody(c, 'AddTotpFactorRequest'),
  async handle(c, fields) {
    const { factorKeys } = c.get('deps');
    const added = await addTotp(
      writeScopeOf(c),
      { ...writeDepsOf(c), factorKeys },
      { userId: fields._userId, label: fields.label },
    );
    return c.json({ result: { ...added, status: 'factor pending' } } satisfies AddTotpFactorResponse, 201);
  },
});
