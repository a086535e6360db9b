import type { components } from '@user-accounts/client';
import { verifyDomain } from '../../sso/domains.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { ssoDepsOf, validBody } from './shared.ts';

type VerifyOrgDomainResponse = components['schemas']['VerifyOrgDomainResponse'];

export const verifyOrgDomain = defineOperation({
  name: 'verifyOrgDomain',
  method: 'POST',
  path: '/api/1/org/domain/verify',
  scope: 'write',
  request: { body: 'OrgDomainRequest' },
  writes: 'org_domain_verify',
  parse: (c) => validBody(c, 'OrgDomainRequest'),
  async handle(c, input) {
    const verifiedAt = await verifyDomain(writeScopeOf(c), { ...writeDepsOf(c), sso: ssoDepsOf(c) }, input);
    return c.json(
      {
        result: { domain: input.domain, verifiedAt: verifiedAt.toISOString(), status: 'verified' },
      } satisfies VerifyOrgDomainResponse,
      200,
    );
  },
});
