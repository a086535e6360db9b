// GET /api/1/audit?_userId=…: one account's audit rows, newest first, for the people who support
// it (the console's account screen). A read: it names the account as get does, and answers as get
// does when the account is out of reach, except for an account its own site deleted, whose trail
// (who deleted it, and when) is what one then asks for.
import type { components } from '@user-accounts/client';
import { and, desc, eq, lt } from 'drizzle-orm';
import { auditLog, users } from '../../db/schema.ts';
import { userNotFound } from '../../errors.ts';
import { tokenLabels } from '../../kernel/audit.ts';
import { isUuid } from '../../kernel/ids.ts';
import { inReachOf } from '../../kernel/in-reach.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type AuditTrailResponse = components['schemas']['AuditTrailResponse'];
type AuditEntry = components['schemas']['AuditEntry'];

export const GET_AUDIT_TRAIL_PATH = '/api/1/audit';
const DEFAULT_LIMIT = 50;

export const getAuditTrail = defineOperation({
  name: 'getAuditTrail',
  method: 'GET',
  path: GET_AUDIT_TRAIL_PATH,
  scope: 'read',
  request: { query: true },
  parse(c): { _userId: string; limit?: number; before?: string } {
    return validQuery<{ _userId: string; limit?: number; before?: string }>(c, GET_AUDIT_TRAIL_PATH);
  },
  async handle(c, { _userId: id, limit = DEFAULT_LIMIT, before }) {
    const { db } = c.get('deps').database;
    const site = c.get('token').site;
    if (!isUuid(id)) throw userNotFound();
    const ofThisAccount = and(eq(auditLog.site, site), eq(auditLog.userId, id));
    const [account] = await db
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.id, id), inReachOf(site)))
      .limit(1);
    if (account === undefined) {
      // Gone: still this site's to read if this site deleted it. Another site's account, one not
      // made through the API, or no account at all, answers as get does.
      const [deleted] = await db
        .select({ id: auditLog.id })
        .from(auditLog)
        .where(and(ofThisAccount, eq(auditLog.operation, 'delete'), lt(auditLog.status, 300)))
        .limit(1);
      if (deleted === undefined) throw userNotFound();
    }
    const rows = await db
      .select()
      .from(auditLog)
      .where(before === undefined ? ofThisAccount : and(ofThisAccount, lt(auditLog.id, Number(before))))
      .orderBy(desc(auditLog.id))
      .limit(limit + 1);
    const page = rows.slice(0, limit);
    const labelOf = await tokenLabels(
      db,
      page.map((row) => row.tokenId),
    );
    const entries = page.map(
      (row): AuditEntry => ({
        at: row.at.toISOString(),
        operation: row.operation as AuditEntry['operation'],
        tokenId: row.tokenId,
        tokenLabel: labelOf(row.tokenId),
        requestId: row.requestId,
        status: row.status,
        outcome: row.outcome,
        ...(row.impersonator !== null && { impersonator: row.impersonator }),
      }),
    );
    const next = rows.length > limit ? String(page[page.length - 1]!.id) : null;
    return c.json({ result: { entries, next } } satisfies AuditTrailResponse, 200);
  },
});
