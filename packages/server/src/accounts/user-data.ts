// Everything held about one account, in one answer (issue 30, point 3; GET /api/1/user/data):
// what a site gives a person who asks what it holds about them (GDPR Art. 15) or wants it to
// take elsewhere (Art. 20). Read in one snapshot (REPEATABLE READ), so that the parts agree with
// each other. Never a secret: no password hash, factor secret, recovery code hash or ticket secret
// is selected at all, so none can slip into the answer. docs/user-data.md says what is left out.
import type { components } from '@user-accounts/client';
import { and, asc, desc, eq, lt, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import {
  auditLog,
  eventQueue,
  events,
  passkeyChallenges,
  recoveryCodes,
  tickets,
  userFactors,
  users,
} from '../db/schema.ts';
import { formatSequence } from '../events/queue.ts';
import { secondFactorLockoutKey } from '../factors/factors.ts';
import { type LockoutState, type LockoutStore, lockoutKey } from '../limits/lockout.ts';
import { isUuid } from './ids.ts';
import { inReachOf } from './in-reach.ts';
import { toUser } from './to-user.ts';

type Schemas = components['schemas'];
export type UserData = Schemas['UserData'];

/** The shape's name and version (`format`): a member removed or retyped gets a new number. */
export const USER_DATA_FORMAT = 'user-accounts/user-data@1';
/** The newest audit rows the answer holds; older ones are read on with GET /api/1/audit. */
export const AUDIT_LIMIT = 1000;
/** The newest events the answer holds (each may carry 64 KiB of metadata); older ones are in the feed. */
export const EVENTS_LIMIT = 100;
/** Fewer when their data passes this many characters together (issue 41, F2): about 1 MB. */
export const EVENTS_BYTES = 1024 * 1024;
/** Events read at a time. */
const EVENTS_READ = 10;

interface EventRow {
  id: string;
  type: string;
  time: Date;
  changed: string | null;
  data: unknown;
  seq: number | null;
  pos: number;
}

/**
 * Every table of db/schema.ts that names an account (by a column, or by a digest or a copy of
 * its id or email), and the member of the answer that holds its rows, or why the answer leaves it
 * out. user-data.test.ts holds this list to the schema: a table that names an account and is not
 * here fails it.
 */
export const ACCOUNT_TABLES: Record<string, { member: keyof UserData } | { leftOut: string }> = {
  users: { member: 'account' },
  user_factors: { member: 'factors' },
  recovery_codes: { member: 'recoveryCodes' },
  tickets: { member: 'tickets' },
  passkey_challenges: { member: 'passkeyChallenges' },
  verify_failures: { member: 'lockout' },
  audit_log: { member: 'audit' },
  events: { member: 'events' },
  event_queue: { member: 'events' },
  webhook_deliveries: {
    leftOut:
      'the delivery state of the events above to the site’s own endpoints (attempts, HTTP status): ' +
      'the site’s operations, nothing about the person that the events do not already say',
  },
  idempotency_keys: {
    leftOut: 'a copy of an answer the site already received (a create’s id), kept 24 hours so that a retry replays it',
  },
};

const iso = (at: Date | null): string | null => at?.toISOString() ?? null;

const counter = (state: LockoutState | undefined): Schemas['LockoutCounter'] =>
  state === undefined
    ? null
    : {
        failures: state.failures,
        lastFailureAt: state.lastFailureAt.toISOString(),
        lockedUntil: iso(state.lockedUntil),
      };

/**
 * The data of an account of `site` in reach (accounts/in-reach.ts); undefined when there is none
 * (another site's, not made through the API, in its grace period, or no account), as for get.
 */
export async function gatherUserData(
  deps: { db: Db; lockout: LockoutStore },
  site: string,
  userId: string,
): Promise<UserData | undefined> {
  if (!isUuid(userId)) return undefined;
  return deps.db.transaction(
    async (tx) => {
      const [row] = await tx
        .select()
        .from(users)
        .where(and(eq(users.id, userId), inReachOf(site)))
        .limit(1);
      if (row === undefined) return undefined;
      const id = row.id;

      // The columns named one by one: a secret (user_factors.secret, recovery_codes.code_hash,
      // tickets.secret_hash, passkey_challenges.challenge_hash) is never read.
      const factors = await tx
        .select({
          id: userFactors.id,
          type: userFactors.type,
          label: userFactors.label,
          createdAt: userFactors.createdAt,
          enabledAt: userFactors.enabledAt,
          lastUsedAt: userFactors.lastUsedAt,
        })
        .from(userFactors)
        .where(eq(userFactors.userId, id))
        .orderBy(asc(userFactors.createdAt), asc(userFactors.id));
      const codes = await tx
        .select({ usedAt: recoveryCodes.usedAt })
        .from(recoveryCodes)
        .where(eq(recoveryCodes.userId, id))
        .orderBy(asc(recoveryCodes.usedAt));
      const held = await tx
        .select({
          purpose: tickets.purpose,
          newEmail: tickets.newEmail,
          tries: tickets.tries,
          createdAt: tickets.createdAt,
          expiresAt: tickets.expiresAt,
        })
        .from(tickets)
        .where(and(eq(tickets.site, site), eq(tickets.userId, id)))
        .orderBy(asc(tickets.createdAt), asc(tickets.id));

      const challenges = await tx
        .select({ purpose: passkeyChallenges.purpose, expiresAt: passkeyChallenges.expiresAt })
        .from(passkeyChallenges)
        .where(and(eq(passkeyChallenges.site, site), eq(passkeyChallenges.userId, id)))
        .orderBy(asc(passkeyChallenges.expiresAt));

      const auditRows = await tx
        .select()
        .from(auditLog)
        .where(and(eq(auditLog.site, site), eq(auditLog.userId, id)))
        .orderBy(desc(auditLog.id))
        .limit(AUDIT_LIMIT + 1);
      const auditShown = auditRows.slice(0, AUDIT_LIMIT);
      const auditTruncated = auditRows.length > AUDIT_LIMIT;

      // Newest first: those still waiting for their number (a moment after their write), then
      // the numbered ones. One snapshot: an event is in one table or the other, never both.
      const fieldsOf = (t: typeof events | typeof eventQueue) => ({
        id: sql<string>`${t.id}::text`,
        type: t.type,
        time: t.time,
        changed: t.changed,
        data: t.data,
      });
      // Read a few at a time and kept to EVENTS_BYTES of data: 100 events of 63 KiB made an
      // answer of 6 MB read in one piece (issue 41, F2).
      const eventRows: EventRow[] = [];
      let eventBytes = 0;
      let eventsLeft = false;
      const take = (rows: EventRow[], batch: number): boolean => {
        for (const row of rows.slice(0, batch)) {
          const size = JSON.stringify(row.data).length;
          if (eventRows.length >= EVENTS_LIMIT || (eventRows.length > 0 && eventBytes + size > EVENTS_BYTES)) {
            eventsLeft = true;
            return false;
          }
          eventRows.push(row);
          eventBytes += size;
        }
        return rows.length > batch;
      };
      for (let before: number | undefined, more = true; more; ) {
        const rows = await tx
          .select({ ...fieldsOf(eventQueue), seq: sql<number | null>`null`, pos: eventQueue.pos })
          .from(eventQueue)
          .where(
            and(
              eq(eventQueue.site, site),
              eq(eventQueue.subject, id),
              before === undefined ? undefined : lt(eventQueue.pos, before),
            ),
          )
          .orderBy(desc(eventQueue.pos))
          .limit(EVENTS_READ + 1);
        more = take(rows, EVENTS_READ);
        before = rows.at(Math.min(rows.length, EVENTS_READ) - 1)?.pos;
      }
      for (let before: number | undefined, more = !eventsLeft; more; ) {
        const rows = await tx
          .select({ ...fieldsOf(events), seq: events.seq, pos: events.seq })
          .from(events)
          .where(
            and(
              eq(events.site, site),
              eq(events.subject, id),
              before === undefined ? undefined : lt(events.seq, before),
            ),
          )
          .orderBy(desc(events.seq))
          .limit(EVENTS_READ + 1);
        more = take(rows, EVENTS_READ);
        before = rows.at(Math.min(rows.length, EVENTS_READ) - 1)?.pos;
      }

      const lockout = deps.lockout.inTransaction?.(tx) ?? deps.lockout;
      const [password, passwordByEmail, secondFactor] = await Promise.all([
        lockout.read(lockoutKey(site, 'id', id.toLowerCase())),
        lockout.read(lockoutKey(site, 'email', row.email.toLowerCase())),
        lockout.read(secondFactorLockoutKey(site, id)),
      ]);

      return {
        format: USER_DATA_FORMAT,
        generatedAt: new Date().toISOString(),
        account: toUser(row),
        factors: factors.map((f) => ({
          factorId: f.id,
          type: f.type as 'totp' | 'passkey',
          label: f.label,
          status: f.enabledAt === null ? ('pending' as const) : ('enabled' as const),
          createdAt: f.createdAt.toISOString(),
          enabledAt: iso(f.enabledAt),
          lastUsedAt: iso(f.lastUsedAt),
        })),
        recoveryCodes: codes.map((c) => ({ usedAt: iso(c.usedAt) })),
        tickets: held.map((t) => ({
          purpose: t.purpose as Schemas['TicketPurpose'],
          newEmail: t.newEmail,
          failedTries: t.tries,
          createdAt: t.createdAt.toISOString(),
          expiresAt: t.expiresAt.toISOString(),
        })),
        passkeyChallenges: challenges.map((ch) => ({
          purpose: ch.purpose as 'register' | 'login',
          expiresAt: ch.expiresAt.toISOString(),
        })),
        lockout: {
          password: counter(password),
          passwordByEmail: counter(passwordByEmail),
          secondFactor: counter(secondFactor),
        },
        audit: {
          entries: auditShown.map((a) => ({
            at: a.at.toISOString(),
            operation: a.operation as Schemas['AuditEntry']['operation'],
            tokenId: a.tokenId,
            requestId: a.requestId,
            status: a.status,
            outcome: a.outcome,
          })),
          truncated: auditTruncated,
          next: auditTruncated ? String(auditShown[auditShown.length - 1]!.id) : null,
        },
        events: {
          entries: eventRows.map((e) => ({
            id: e.id,
            type: e.type as Schemas['UserDataEvent']['type'],
            time: e.time.toISOString(),
            sequence: e.seq === null ? null : formatSequence(e.seq),
            ...(e.changed === null ? {} : { changedfields: e.changed }),
            data: (typeof e.data === 'string' ? JSON.parse(e.data) : e.data) as Schemas['UserDataEvent']['data'],
          })),
          truncated: eventsLeft,
        },
      } satisfies UserData;
    },
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  );
}
