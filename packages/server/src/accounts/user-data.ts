// Everything held about one account, in one answer (issue 30, point 3; GET /api/1/user/data):
// what a site gives a person who asks what it holds about them (GDPR Art. 15) or wants it to
// take elsewhere (Art. 20). Read as of one snapshot (a short REPEATABLE READ), so that the parts
// agree with each other; the events' bulky data after it, in pieces (readEvents, issue 41, F2). Never a secret: no password hash, factor secret, recovery code hash or ticket secret
// is selected at all, so none can slip into the answer. docs/user-data.md says what is left out.

import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { components } from '@user-accounts/client';
import { and, desc, eq, getTableColumns, gt, inArray, type SQL, sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import {
  auditLog,
  eventQueue,
  eventSequences,
  events,
  messages,
  passkeyChallenges,
  recoveryCodes,
  tickets,
  userFactors,
  users,
} from '../db/schema.ts';
import { formatSequence } from '../events/queue.ts';
import { secondFactorLockoutKey } from '../factors/factors.ts';
import { tokenLabels } from '../kernel/audit.ts';
import { emailDeliverableSql } from '../kernel/email-deliverable.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { type LockoutState, type LockoutStore, lockoutKey } from '../limits/lockout.ts';
import { KEPT_DAYS } from '../messages/outbox.ts';
import { identitiesOf } from './linked-identities.ts';
import { toUser } from './to-user.ts';

type Schemas = components['schemas'];
export type UserData = Schemas['UserData'];

/** The shape's name and version (`format`): a member removed or retyped gets a new number. */
export const USER_DATA_FORMAT = 'user-accounts/user-data@1';
/** The newest messages the answer holds (kept 30 days; message/list pages through them all). */
export const MESSAGES_LIMIT = 1000;
/** The newest audit rows the answer holds; older ones are read on with GET /api/1/audit. */
export const AUDIT_LIMIT = 1000;
/** The newest events the answer holds (each may carry 64 KiB of metadata); older ones are in the feed. */
export const EVENTS_LIMIT = 100;
/** Fewer when their data passes this many characters together (issue 41, F2): about 1 MB. */
export const EVENTS_BYTES = 1024 * 1024;
/** Events read at a time: up to 192 KiB of data, a short statement on the one connection of the embedded database. */
const EVENTS_READ = 3;

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
 * out. user-data.integration.test.ts holds this list to the schema: a table that names an account and is not
 * here fails it.
 */
export const ACCOUNT_TABLES: Record<string, { member: keyof UserData } | { leftOut: string }> = {
  users: { member: 'account' },
  // The account's linked identities (issue 44): in the account, as get shows them.
  user_identities: { member: 'account' },
  user_factors: { member: 'factors' },
  recovery_codes: { member: 'recoveryCodes' },
  tickets: { member: 'tickets' },
  passkey_challenges: { member: 'passkeyChallenges' },
  sessions: { member: 'sessions' },
  org_memberships: { member: 'organizations' },
  verify_failures: { member: 'lockout' },
  audit_log: { member: 'audit' },
  events: { member: 'events' },
  event_queue: { member: 'events' },
  webhook_deliveries: {
    leftOut:
      'the delivery state of the events above to the site’s own endpoints (attempts, HTTP status): ' +
      'the site’s operations, nothing about the person that the events do not already say',
  },
  org_invitations: {
    leftOut:
      'an invitation an organization sent to an email address: not the account’s until accepted (then a membership, ' +
      'listed), and gone once accepted, revoked or expired',
  },
  idempotency_keys: {
    leftOut: 'a copy of an answer the site already received (a create’s id), kept 24 hours so that a retry replays it',
  },
  link_tickets: {
    leftOut:
      'provider/callback’s identity_unlinked: an identity no account has yet, and what its provider said of it ' +
      '(email, name), for ten minutes, until the site links it (then an identity of the account, listed)',
  },
  provider_tokens: {
    leftOut:
      'the access and refresh tokens a provider set with --keep-tokens gave at the last sign-in, sealed: credentials ' +
      'for the provider, answered only by provider/tokens (scope export); the identity they belong to is in the account',
  },
  // The messages we sent to the account (issue 60): address, status and dates, never the body.
  messages: { member: 'messages' },
  message_templates: {
    leftOut:
      'a site’s mail templates: its `subject` column is a mail’s subject line, not an account’s identity subject',
  },
};

/**
 * What other domains hold of the account, read in the answer's snapshot (`tx`): each domain says
 * how (sessions/manage.ts sessionsHeldFor, orgs/members.ts membershipsOf), and the composition root
 * hands them in (assemble.ts heldElsewhere), so that accounts/ imports neither.
 */
export interface HeldElsewhere {
  /** Every session held for the account, live or ended, newest first; never a token. */
  sessions(tx: Db, userId: string): Promise<UserData['sessions']>;
  /** The account's memberships, in order of joining. */
  organizations(tx: Db, userId: string): Promise<UserData['organizations']>;
}

/** What the answer is read with. */
export interface UserDataDeps {
  db: Db;
  lockout: LockoutStore;
  heldElsewhere: HeldElsewhere;
}

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
 * The data of an account of `site` in reach (kernel/in-reach.ts); undefined when there is none
 * (another site's, not made through the API, in its grace period, or no account), as for get.
 */
export async function gatherUserData(deps: UserDataDeps, site: string, userId: string): Promise<UserData | undefined> {
  if (!isUuid(userId)) return undefined;
  // A few tries: an event of the snapshot may be pruned (or its account erased) before its data
  // is read; the last try leaves out what is gone.
  for (let attempt = 1; ; attempt++) {
    const snapshot = await readSnapshot(deps, site, userId);
    if (snapshot === undefined) return undefined;
    const read = await readEvents(deps.db, site, userId, snapshot);
    if (read.missing && attempt < 3) continue;
    // After the snapshot, as from Redis (LOCKOUT_STORE) always: three reads fewer that hold the
    // embedded database's connection; a counter says how an attempt went, not a part of the rest.
    const [password, passwordByEmail, secondFactor] = await Promise.all([
      deps.lockout.read(lockoutKey(site, 'id', snapshot.id.toLowerCase())),
      deps.lockout.read(lockoutKey(site, 'email', snapshot.email.toLowerCase())),
      deps.lockout.read(secondFactorLockoutKey(site, snapshot.id)),
    ]);
    const { audit, ...before } = snapshot.answer;
    return {
      ...before,
      lockout: {
        password: counter(password),
        passwordByEmail: counter(passwordByEmail),
        secondFactor: counter(secondFactor),
      },
      audit,
      events: {
        entries: read.rows.map((e) => ({
          id: e.id,
          type: e.type as Schemas['UserDataEvent']['type'],
          time: e.time.toISOString(),
          sequence: e.seq === null ? null : formatSequence(e.seq),
          ...(e.changed === null ? {} : { changedfields: e.changed }),
          data: (typeof e.data === 'string' ? JSON.parse(e.data) : e.data) as Schemas['UserDataEvent']['data'],
        })),
        truncated: read.truncated,
      },
    } satisfies UserData;
  }
}

/** Where each of the answer's events was in the snapshot: queued (`seq` null) or numbered. */
interface EventPlace {
  id: string;
  seq: number | null;
  pos: number;
}

interface Snapshot {
  answer: Omit<UserData, 'events' | 'lockout'>;
  /** The account's id as stored, and its email: the keys of its lockout counters. */
  id: string;
  email: string;
  /** Newest first, EVENTS_LIMIT + 1 at most (one more says there are more). */
  events: EventPlace[];
  /** The site's last sequence number then: an event queued then and numbered since is above it. */
  lastSeq: number;
}

/**
 * Everything but the events' data, in one snapshot (REPEATABLE READ), so that the parts agree: a
 * few short reads. The events' data, up to 100 × 64 KiB, is read after it (readEvents), in pieces
 * that let other queries in between: on the embedded database one connection serves every site,
 * and a snapshot that read it all held that connection for every read (issue 41, F2).
 */
function readSnapshot(deps: UserDataDeps, site: string, userId: string) {
  return deps.db.transaction(
    async (tx) => {
      const [row] = await tx
        .select({ ...getTableColumns(users), emailDeliverable: emailDeliverableSql(sql`"users"."site"`) })
        .from(users)
        .where(and(eq(users.id, userId), inReachOf(site)))
        .limit(1);
      if (row === undefined) return undefined;
      const id = row.id;

      // The columns named one by one: a secret (user_factors.secret, recovery_codes.code_hash,
      // tickets.secret_hash, passkey_challenges.challenge_hash) is never read. The four small
      // parts in one statement: each statement of the snapshot holds the embedded database's one
      // connection. Times as milliseconds (stored to the millisecond).
      const ms = (column: SQL) => sql`(extract(epoch from ${column}) * 1000)::float8`;
      const [small] = await rows<{
        factors: {
          id: string;
          type: string;
          label: string | null;
          createdAt: number;
          enabledAt: number | null;
          lastUsedAt: number | null;
        }[];
        codes: { usedAt: number | null }[];
        held: { purpose: string; newEmail: string | null; tries: number; createdAt: number; expiresAt: number }[];
        challenges: { purpose: string; expiresAt: number }[];
        sent: {
          id: string;
          channel: 'email' | 'sms';
          purpose: Schemas['UserDataMessage']['purpose'];
          address: string;
          status: 'queued' | 'sent' | 'failed';
          attempts: number;
          createdAt: number;
          sentAt: number | null;
        }[];
      }>(
        tx,
        sql`select
          (select coalesce(json_agg(json_build_object('id', f.id, 'type', f.type, 'label', f.label,
              'createdAt', ${ms(sql`f.created_at`)}, 'enabledAt', ${ms(sql`f.enabled_at`)}, 'lastUsedAt', ${ms(sql`f.last_used_at`)})
              order by f.created_at, f.id), '[]'::json)
            from ${userFactors} f where f.user_id = ${id}) as factors,
          (select coalesce(json_agg(json_build_object('usedAt', ${ms(sql`c.used_at`)}) order by c.used_at), '[]'::json)
            from ${recoveryCodes} c where c.user_id = ${id}) as codes,
          (select coalesce(json_agg(json_build_object('purpose', t.purpose, 'newEmail', t.new_email, 'tries', t.tries,
              'createdAt', ${ms(sql`t.created_at`)}, 'expiresAt', ${ms(sql`t.expires_at`)}) order by t.created_at, t.id), '[]'::json)
            from ${tickets} t where t.site = ${site} and t.user_id = ${id}) as held,
          (select coalesce(json_agg(json_build_object('purpose', p.purpose, 'expiresAt', ${ms(sql`p.expires_at`)})
              order by p.expires_at), '[]'::json)
            from ${passkeyChallenges} p where p.site = ${site} and p.user_id = ${id}) as challenges,
          (select coalesce(json_agg(json_build_object('id', m.id, 'channel', m.channel, 'purpose', m.purpose,
              'address', m.recipient, 'status', m.status, 'attempts', m.attempts,
              'createdAt', ${ms(sql`m.created_at`)}, 'sentAt', ${ms(sql`m.sent_at`)}) order by m.id desc), '[]'::json)
            from (select id, channel, purpose, recipient, status, attempts, created_at, sent_at from ${messages} m
              where m.site = ${site} and m.user_id = ${id} and m.created_at > now() - make_interval(days => ${KEPT_DAYS})
              order by m.id desc limit ${MESSAGES_LIMIT}) m) as sent`,
      );
      const date = (at: number | null) => (at === null ? null : new Date(at));
      const factors = small!.factors.map((f) => ({
        ...f,
        createdAt: new Date(f.createdAt),
        enabledAt: date(f.enabledAt),
        lastUsedAt: date(f.lastUsedAt),
      }));
      const codes = small!.codes.map((c) => ({ usedAt: date(c.usedAt) }));
      const held = small!.held.map((t) => ({
        ...t,
        createdAt: new Date(t.createdAt),
        expiresAt: new Date(t.expiresAt),
      }));
      const challenges = small!.challenges.map((c) => ({ ...c, expiresAt: new Date(c.expiresAt) }));
      const sent = small!.sent.map((m) => ({
        messageId: m.id,
        channel: m.channel,
        purpose: m.purpose,
        address: m.address,
        status: m.status,
        attempts: m.attempts,
        createdAt: new Date(m.createdAt).toISOString(),
        sentAt: iso(date(m.sentAt)),
      }));
      // Never token_hash nor previous_token_hash (sessions/manage.ts names its columns).
      const sessionsHeld = await deps.heldElsewhere.sessions(tx, id);
      const identities = (await identitiesOf(tx, [id])).get(id) ?? [];
      const memberships = await deps.heldElsewhere.organizations(tx, id);

      const auditRows = await tx
        .select()
        .from(auditLog)
        .where(and(eq(auditLog.site, site), eq(auditLog.userId, id)))
        .orderBy(desc(auditLog.id))
        .limit(AUDIT_LIMIT + 1);
      const auditShown = auditRows.slice(0, AUDIT_LIMIT);
      const auditTruncated = auditRows.length > AUDIT_LIMIT;
      const labelOf = await tokenLabels(
        tx,
        auditShown.map((a) => a.tokenId),
      );

      // Newest first: those still waiting for their number (a moment after their write), then
      // the numbered ones. Only where each is, in the snapshot: an event is in one table or the
      // other, never both. Their data (up to 64 KiB each) is read after it (readEvents).
      // One statement (each read of the snapshot holds the embedded database's one connection):
      // the newest queued, the newest numbered, and the site's last number (the row without id).
      const placed = await rows<{ id: string | null; seq: string | null; pos: string }>(
        tx,
        sql`select id, null as seq, pos::text as pos from (select ${eventQueue.id}::text as id, ${eventQueue.pos} as pos
            from ${eventQueue} where ${eventQueue.site} = ${site} and ${eventQueue.subject} = ${id}
            order by ${eventQueue.pos} desc limit ${EVENTS_LIMIT + 1}) queued
          union all
          select id, seq::text, seq::text from (select ${events.id}::text as id, ${events.seq} as seq
            from ${events} where ${events.site} = ${site} and ${events.subject} = ${id}
            order by ${events.seq} desc limit ${EVENTS_LIMIT + 1}) numbered
          union all
          select null, null, ${eventSequences.last}::text from ${eventSequences} where ${eventSequences.site} = ${site}`,
      );
      const newest = (a: EventPlace, b: EventPlace) =>
        a.seq === null && b.seq !== null ? -1 : a.seq !== null && b.seq === null ? 1 : b.pos - a.pos;
      const eventPlaces: EventPlace[] = placed
        .flatMap((p) =>
          p.id === null ? [] : [{ id: p.id, seq: p.seq === null ? null : Number(p.seq), pos: Number(p.pos) }],
        )
        .sort(newest)
        .slice(0, EVENTS_LIMIT + 1);
      const lastSeq = Number(placed.find((p) => p.id === null)?.pos ?? 0);

      const answer = {
        format: USER_DATA_FORMAT,
        generatedAt: new Date().toISOString(),
        account: toUser(row, identities),
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
          // A login code is stored as a purpose of its own (accounts/tickets.ts); the API's is `login`.
          purpose: (t.purpose === 'login_code' ? 'login' : t.purpose) as Schemas['TicketPurpose'],
          newEmail: t.newEmail,
          failedTries: t.tries,
          createdAt: t.createdAt.toISOString(),
          expiresAt: t.expiresAt.toISOString(),
        })),
        passkeyChallenges: challenges.map((ch) => ({
          purpose: ch.purpose as 'register' | 'login',
          expiresAt: ch.expiresAt.toISOString(),
        })),
        sessions: sessionsHeld,
        organizations: memberships,
        messages: sent,
        audit: {
          entries: auditShown.map((a) => ({
            at: a.at.toISOString(),
            operation: a.operation as Schemas['AuditEntry']['operation'],
            tokenId: a.tokenId,
            tokenLabel: labelOf(a.tokenId),
            requestId: a.requestId,
            status: a.status,
            outcome: a.outcome,
            ...(a.impersonator !== null && { impersonator: a.impersonator }),
          })),
          truncated: auditTruncated,
          next: auditTruncated ? String(auditShown[auditShown.length - 1]!.id) : null,
        },
      } satisfies Omit<UserData, 'events' | 'lockout'>;
      return { answer, id, email: row.email, events: eventPlaces, lastSeq } satisfies Snapshot;
    },
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  );
}

/**
 * The data of the snapshot's events, newest first, EVENTS_READ at a time, each piece one
 * statement (so the piece agrees with itself), the event loop's other work let in before the
 * next. An event queued in the snapshot may have been numbered since: it is looked for in both
 * tables, in the same statement, so it is found once, and answered as the snapshot saw it
 * (unnumbered), like every other part. Kept to EVENTS_BYTES of data: 100 events of 63 KiB made
 * an answer of 6 MB read in one piece (issue 41, F2). `missing`: an event of the snapshot is gone.
 */
async function readEvents(
  db: Db,
  site: string,
  subject: string,
  snapshot: Snapshot,
): Promise<{ rows: EventRow[]; truncated: boolean; missing: boolean }> {
  const places = snapshot.events.slice(0, EVENTS_LIMIT);
  const eventRows: EventRow[] = [];
  let eventBytes = 0;
  let missing = false;
  const fieldsOf = (t: typeof events | typeof eventQueue) => ({
    id: sql<string>`${t.id}::text`,
    type: t.type,
    time: t.time,
    changed: t.changed,
    data: t.data,
  });
  const any = <T>(values: T[], match: (values: T[]) => SQL) => (values.length === 0 ? sql`false` : match(values));
  for (let from = 0; from < places.length; ) {
    await yieldToLoop();
    // No more than the bytes left take at the weight so far (and one to see that the next is too many).
    const fit =
      eventRows.length === 0 ? EVENTS_READ : Math.ceil((EVENTS_BYTES - eventBytes) / (eventBytes / eventRows.length));
    const piece = places.slice(from, from + Math.max(1, Math.min(EVENTS_READ, fit)));
    from += piece.length;
    const numbered = piece.flatMap((p) => (p.seq === null ? [] : [p.seq]));
    const queued = piece.filter((p) => p.seq === null);
    const read = await db
      .select(fieldsOf(events))
      .from(events)
      .where(
        and(
          eq(events.site, site),
          eq(events.subject, subject),
          any(numbered, (v) => inArray(events.seq, v)),
        ),
      )
      .unionAll(
        db
          .select(fieldsOf(eventQueue))
          .from(eventQueue)
          .where(
            and(
              eq(eventQueue.site, site),
              any(
                queued.map((p) => p.pos),
                (v) => inArray(eventQueue.pos, v),
              ),
            ),
          ),
      )
      .unionAll(
        db
          .select(fieldsOf(events))
          .from(events)
          .where(
            and(
              eq(events.site, site),
              eq(events.subject, subject),
              gt(events.seq, snapshot.lastSeq),
              any(
                queued.map((p) => p.id),
                (v) => inArray(events.id, v),
              ),
            ),
          ),
      );
    const byId = new Map(read.map((r) => [r.id, r]));
    for (const place of piece) {
      const row = byId.get(place.id);
      if (row === undefined) {
        missing = true;
        continue;
      }
      const size = JSON.stringify(row.data).length;
      if (eventRows.length > 0 && eventBytes + size > EVENTS_BYTES)
        return { rows: eventRows, truncated: true, missing };
      eventRows.push({ ...row, seq: place.seq, pos: place.pos });
      eventBytes += size;
    }
  }
  return { rows: eventRows, truncated: snapshot.events.length > EVENTS_LIMIT, missing };
}
