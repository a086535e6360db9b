// An organization's verified domains (issue 61, point 1): the organization claims a domain, the
// customer's IT admin publishes a TXT record with the value we made, and verify looks it up
// (through DNS_RESOLVER's servers in tests and private networks). A domain is verified by at most
// one organization of a site: the partial unique index org_domains_site_verified_key settles two
// verifications at once. The value is no secret (DNS is public): kept as is.
import { randomBytes } from 'node:crypto';
import { and, asc, count, eq, isNotNull, ne } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orgDomains, orgs } from '../db/schema.ts';
import { ApiError, sqlState } from '../errors.ts';
import { isUuid } from '../kernel/ids.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { lockOrg } from '../orgs/members.ts';
import { orgNotFound } from '../orgs/rules.ts';
import type { SsoDeps } from './deps.ts';

/** The domains an organization may claim. */
export const MAX_DOMAINS_PER_ORG = 100;
const TXT_PREFIX = '_user-accounts-challenge.';
const VALUE_PREFIX = 'user-accounts-domain-verification=';

export const domainNotFound = () =>
  new ApiError('domain_not_found', 'This organization has not added this domain (org/domain/add).');
const domainTaken = () => new ApiError('domain_taken', 'Another organization of this site has verified this domain.');

export const txtNameOf = (domain: string) => `${TXT_PREFIX}${domain}`;
const txtValueOf = (token: string) => `${VALUE_PREFIX}${token}`;

/** Whether another organization of the site has verified the domain. */
async function verifiedElsewhere(db: Db, site: string, orgId: string, domain: string): Promise<boolean> {
  const [row] = await db
    .select({ orgId: orgDomains.orgId })
    .from(orgDomains)
    .where(
      and(
        eq(orgDomains.site, site),
        eq(orgDomains.domain, domain),
        isNotNull(orgDomains.verifiedAt),
        ne(orgDomains.orgId, orgId),
      ),
    )
    .limit(1);
  return row !== undefined;
}

export interface AddedDomain {
  domain: string;
  txtName: string;
  txtValue: string;
}

/** org/domain/add: the TXT record to publish (the same one again for a domain already added). */
export async function addDomain(
  scope: WriteScope,
  deps: WriteDeps,
  input: { orgId: string; domain: string },
): Promise<AddedDomain> {
  const { orgId, domain } = input;
  const token = randomBytes(32).toString('base64url');
  const done = { userId: undefined, status: 201, outcome: 'publish this record' };
  const kept = await inWrite(scope, deps, 'org_domain_add', done, async (tx) => {
    await lockOrg(tx, scope.site, orgId);
    if (await verifiedElsewhere(tx, scope.site, orgId, domain)) throw domainTaken();
    const [held] = await tx
      .select({ token: orgDomains.token })
      .from(orgDomains)
      .where(and(eq(orgDomains.orgId, orgId), eq(orgDomains.domain, domain)));
    if (held !== undefined) return held.token;
    const [has] = await tx.select({ n: count() }).from(orgDomains).where(eq(orgDomains.orgId, orgId));
    if (has!.n >= MAX_DOMAINS_PER_ORG)
      throw new ApiError(
        'invalid_request',
        `An organization has at most ${MAX_DOMAINS_PER_ORG} domains; remove one (org/domain/remove) first.`,
        { errors: [{ pointer: '/domain', code: 'not_allowed', message: `is one more than ${MAX_DOMAINS_PER_ORG}` }] },
      );
    await tx.insert(orgDomains).values({ orgId, site: scope.site, domain, token });
    return token;
  });
  return { domain, txtName: txtNameOf(domain), txtValue: txtValueOf(kept!) };
}

/** What a TXT lookup found, said in a sentence for domain_not_verified's detail. */
async function lookUp(sso: SsoDeps, name: string): Promise<{ values: string[]; said: string }> {
  try {
    const records = await sso.resolveTxt(name);
    // A TXT record may be split in strings of 255 bytes: its value is their concatenation.
    const values = records.map((strings) => strings.join(''));
    const shown = values.slice(0, 5).map((v) => JSON.stringify(v.length > 120 ? `${v.slice(0, 119)}…` : v));
    return {
      values,
      said:
        values.length === 0
          ? 'no TXT record'
          : `${values.length} TXT record${values.length === 1 ? '' : 's'}: ${shown.join(', ')}${values.length > 5 ? ', …' : ''}`,
    };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const said =
      code === 'ENOTFOUND'
        ? 'no such name (NXDOMAIN)'
        : code === 'ENODATA'
          ? 'no TXT record'
          : `no answer (${typeof code === 'string' ? code : 'lookup failed'}; try again later)`;
    return { values: [], said };
  }
}

/** org/domain/verify: verified now (or already), or 422 domain_not_verified saying what was found. */
export async function verifyDomain(
  scope: WriteScope,
  deps: WriteDeps & { sso: SsoDeps },
  input: { orgId: string; domain: string },
): Promise<Date> {
  const { orgId, domain } = input;
  if (!isUuid(orgId)) throw domainNotFound();
  const [row] = await deps.db
    .select({ token: orgDomains.token, verifiedAt: orgDomains.verifiedAt })
    .from(orgDomains)
    .where(and(eq(orgDomains.orgId, orgId), eq(orgDomains.domain, domain), eq(orgDomains.site, scope.site)));
  if (row === undefined) throw domainNotFound();
  if (row.verifiedAt !== null) return row.verifiedAt;
  if (await verifiedElsewhere(deps.db, scope.site, orgId, domain)) throw domainTaken();
  const name = txtNameOf(domain);
  const expected = txtValueOf(row.token);
  const found = await lookUp(deps.sso, name);
  if (!found.values.includes(expected))
    throw new ApiError(
      'domain_not_verified',
      `No TXT record at ${name} holds the value org/domain/add answered; found: ${found.said}.`,
    );
  const done = {
    userId: undefined,
    status: 200,
    outcome: 'verified',
    moreEvents: [{ type: 'org.domain_verified' as const, userId: orgId, data: { orgId, domain } }],
  };
  try {
    const at = await inWrite(scope, deps, 'org_domain_verify', done, async (tx) => {
      const [marked] = await tx
        .update(orgDomains)
        .set({ verifiedAt: new Date() })
        .where(and(eq(orgDomains.orgId, orgId), eq(orgDomains.domain, domain)))
        .returning({ verifiedAt: orgDomains.verifiedAt });
      if (marked === undefined) throw domainNotFound();
      return marked.verifiedAt!;
    });
    return at!;
  } catch (error) {
    // Another organization's verification committed first: the partial unique index refused ours.
    if (sqlState(error) === '23505') throw domainTaken();
    throw error;
  }
}

/** org/domain/list: pending and verified, in the order added. */
export async function listDomains(db: Db, site: string, orgId: string) {
  if (!isUuid(orgId)) throw orgNotFound();
  const [org] = await db
    .select({ id: orgs.id })
    .from(orgs)
    .where(and(eq(orgs.id, orgId), eq(orgs.site, site)));
  if (org === undefined) throw orgNotFound();
  const rows = await db
    .select()
    .from(orgDomains)
    .where(eq(orgDomains.orgId, orgId))
    .orderBy(asc(orgDomains.createdAt), asc(orgDomains.domain))
    .limit(MAX_DOMAINS_PER_ORG);
  return rows.map((d) => ({
    domain: d.domain,
    status: d.verifiedAt === null ? ('pending' as const) : ('verified' as const),
    txtName: txtNameOf(d.domain),
    txtValue: txtValueOf(d.token),
    createdAt: d.createdAt.toISOString(),
    verifiedAt: d.verifiedAt?.toISOString() ?? null,
  }));
}

/** org/domain/remove. */
export async function removeDomain(
  scope: WriteScope,
  deps: WriteDeps,
  input: { orgId: string; domain: string },
): Promise<void> {
  if (!isUuid(input.orgId)) throw domainNotFound();
  const done = { userId: undefined, status: 200, outcome: 'domain removed' };
  const gone = await inWrite(scope, deps, 'org_domain_remove', done, async (tx) => {
    const [row] = await tx
      .delete(orgDomains)
      .where(
        and(eq(orgDomains.orgId, input.orgId), eq(orgDomains.domain, input.domain), eq(orgDomains.site, scope.site)),
      )
      .returning({ domain: orgDomains.domain });
    return row;
  });
  if (gone === undefined) throw domainNotFound();
}

/**
 * The organization that has verified the email's domain, if any (sso/start by email, the
 * just-in-time membership, enforcement).
 */
export async function orgOfVerifiedDomain(db: Db, site: string, email: string): Promise<string | undefined> {
  const at = email.lastIndexOf('@');
  if (at < 0) return undefined;
  const domain = email.slice(at + 1).toLowerCase();
  const [row] = await db
    .select({ orgId: orgDomains.orgId })
    .from(orgDomains)
    .where(and(eq(orgDomains.site, site), eq(orgDomains.domain, domain), isNotNull(orgDomains.verifiedAt)))
    .limit(1);
  return row?.orgId;
}
