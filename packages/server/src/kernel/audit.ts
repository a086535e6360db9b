// The audit trail: one row per write request that got past authentication and the rate limit.
// It says who (site, token id), what (operation, account id), when, which request, and how it
// ended; never an email, a password, a hash or a token.

import { desc, eq, inArray } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { apiTokens, auditLog } from '../db/schema.ts';
import { isUuid } from './ids.ts';

export type WriteOperation =
  | 'create'
  | 'update'
  | 'delete'
  | 'disable'
  | 'enable'
  | 'unlock'
  | 'restore'
  | 'purge'
  | 'verify'
  | 'import'
  | 'export'
  | 'ticket'
  | 'redeem'
  | 'factor_add'
  | 'factor_confirm'
  | 'factor_remove'
  | 'factor_verify'
  | 'passkey_verify'
  | 'password_breached'
  | 'session_create'
  | 'session_refresh'
  | 'session_revoke'
  | 'session_impersonate'
  | 'identity_create'
  | 'identity_link'
  | 'identity_unlink'
  | 'identity_verify'
  | 'org_create'
  | 'org_update'
  | 'org_delete'
  | 'org_roles'
  | 'org_member_add'
  | 'org_member_update'
  | 'org_member_remove'
  | 'org_invitation_create'
  | 'org_invitation_accept'
  | 'org_invitation_revoke'
  | 'provider_callback'
  | 'org_domain_add'
  | 'org_domain_verify'
  | 'org_domain_remove'
  | 'org_connection_create'
  | 'org_connection_update'
  | 'org_connection_delete'
  | 'sso_callback';

export interface AuditEntry {
  operation: WriteOperation;
  userId: string | undefined;
  status: number;
  /** The status text of a success (`user created`), the problem `code` of a failure. */
  outcome: string;
  /** session_impersonate: who impersonated the account and why (never a token). */
  impersonator?: { actor: string; reason: string } | undefined;
}

/** Who wrote: a token of a site in a request, or the operator's CLI (token id `cli`). */
export interface AuditSource {
  site: string;
  tokenId: string;
  requestId: string;
  /** provider/callback's rows: the provider's name (never a code, token or state). */
  provider?: string | undefined;
}

/** The INSERT of the rows, not yet run: the unit of work runs it in one statement with the write's events. */
export function auditInsert(db: Db, source: AuditSource, entries: AuditEntry[]) {
  return db.insert(auditLog).values(
    entries.map((entry) => ({
      ...source,
      provider: source.provider ?? null,
      operation: entry.operation,
      // Only an id that could name an account: anything else the caller sent stays out of the log.
      userId: entry.userId !== undefined && isUuid(entry.userId) ? entry.userId : null,
      status: entry.status,
      outcome: entry.outcome,
      impersonator: entry.impersonator ?? null,
    })),
  );
}

export async function latestAuditRows(db: Db, options: { limit: number; site?: string | undefined }) {
  return db
    .select()
    .from(auditLog)
    .where(options.site === undefined ? undefined : eq(auditLog.site, options.site))
    .orderBy(desc(auditLog.id))
    .limit(options.limit);
}

/** What an audit row's token id names when it is no stored token's. */
const OWN_LABELS: Record<string, string> = { cli: 'CLI', job: 'housekeeping' };

/**
 * Who acted, for audit rows read back: each token id's label (`Ann Example`), read in
 * one query for the ids of a page (the stored tokens are never deleted, and a label never changes).
 */
export async function tokenLabels(db: Db, tokenIds: string[]): Promise<(tokenId: string) => string> {
  const stored = [...new Set(tokenIds.filter(isUuid))];
  const rows =
    stored.length === 0
      ? []
      : await db
          .select({ id: apiTokens.id, label: apiTokens.label })
          .from(apiTokens)
          .where(inArray(apiTokens.id, stored));
  const labels = new Map(rows.map((row) => [row.id, row.label]));
  return (tokenId) =>
    labels.get(tokenId) ?? OWN_LABELS[tokenId] ?? (tokenId.startsWith('env:') ? 'API_TOKENS' : tokenId);
}
