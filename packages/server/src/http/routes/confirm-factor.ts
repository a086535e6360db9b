import type { components } from '@user-accounts/client';
import { confirmFactor as confirm } from '../../factors/factors.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type ConfirmFactorResponse = components['schemas']['ConfirmFactorResponse'];

export const confirmFactor = defineOperation({
  name: 'confirmFactor',
  method: 'POST',
  path: '/api/1/user/factor/confirm',
  scope: 'write',
  request: { body: 'ConfirmFactorRequest' },
  writes: 'factor_confirm',
  parse: (c) => validBody(c, 'ConfirmFactorRequest'),
  async handle(c, fields) {
    const { factorKeys } = c.get('deps');
    const { recoveryCodes } = await confirm(
      writeScopeOf(c),
      { ...writeDepsOf(c), factorKeys },
      { userId: fields._userId, factorId: fields.factorId, code: fields.code },
    );
    const result = { status: 'factor enabled' as const, ...(recoveryCodes === undefined ? {} : { recoveryCodes }) };
    return c.json({ result } satisfies ConfirmFactorResponse, 200);
  },
});
