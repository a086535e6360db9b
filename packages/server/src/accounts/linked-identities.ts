// An account's linked identities as its answers show them (get, list, export, a person's data,
// the events' account): read here, beside the account, so that accounts/ imports no domain above
// it. Linking, unlinking and signing in with them are identities/'s (identities/identities.ts).
import type { components } from '@user-accounts/client';
import { asc, inArray, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { userIdentities } from '../db/schema.ts';

export type Identity = components['schemas']['Identity'];

const iso = (column: SQL) => sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The account's identities as the spec's `Identities`, oldest first, for a statement that reads
 * `users` (get, the events' account): a JSON array, `[]` when none. At most MAX_IDENTITIES rows
 * (identities/identities.ts), read through user_identities_user_idx.
 */
// The column qualified by hand: drizzle names a lone table's columns bare, and a bare "id" in the
// subquery would be the identity's own.
export const identitiesJson = (userId: SQL = sql`"users"."id"`) =>
  sql`coalesce((select jsonb_agg(jsonb_build_object('provider', i.provider, 'subject', i.subject,
      'email', i.email, 'emailVerified', i.email_verified, 'linkedAt', ${iso(sql`i.linked_at`)})
      order by i.linked_at, i.id)
    from user_identities i where i.user_id = ${userId}), '[]'::jsonb)`;

/** A JSON value as the driver gave it (text or parsed), parsed. */
export const parsedIdentities = (value: unknown): Identity[] =>
  (typeof value === 'string' ? JSON.parse(value) : (value ?? [])) as Identity[];

/** The identities of each of `userIds` (a page of list, export, a person's data): one statement, bounded by the ids. */
export async function identitiesOf(db: Db, userIds: string[]): Promise<Map<string, Identity[]>> {
  const found = new Map<string, Identity[]>();
  if (userIds.length === 0) return found;
  const rowsRead = await db
    .select({
      userId: userIdentities.userId,
      provider: userIdentities.provider,
      subject: userIdentities.subject,
      email: userIdentities.email,
      emailVerified: userIdentities.emailVerified,
      linkedAt: userIdentities.linkedAt,
    })
    .from(userIdentities)
    .where(inArray(userIdentities.userId, userIds))
    .orderBy(asc(userIdentities.userId), asc(userIdentities.linkedAt), asc(userIdentities.id));
  for (const row of rowsRead) {
    const list = found.get(row.userId) ?? [];
    list.push({
      provider: row.provider,
      subject: row.subject,
      email: row.email,
      emailVerified: row.emailVerified,
      linkedAt: row.linkedAt.toISOString(),
    });
    found.set(row.userId, list);
  }
  return found;
}
