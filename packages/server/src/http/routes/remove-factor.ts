import type { components } from '@user-accounts/client';
import { removeFactor as remove } from '../../factors/factors.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type RemoveFactorResponse = components['schemas']['RemoveFactorResponse'];

export const removeFactor = defineOperation({
  name: 'removeFactor',
  method: 'POST',
  path: '/api/1/user/factor/remove',
  scope: 'write',
  request: { body: 'RemoveFactorRequest' },
  writes: 'factor_remove',
  parse: (c) => validBody(c, 'RemoveFactorRequest'),
  async handle(c, fields) {
    const { factorKeys } = c.get('deps');
    await remove(
      writeScopeOf(c),
      { ...writeDepsOf(c), factorKeys },
      { userId: fields._userId, factorId: fields.factorId },
    );
    return c.json({ result: { status: 'factor removed' } } satisfies RemoveFactorResponse, 200);
  },
});
