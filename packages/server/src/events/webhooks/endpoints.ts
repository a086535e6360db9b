// A site's webhook endpoints and their deliveries, as the operator's CLI manages them.
//
// The signing secret is kept sealed (issue 57, G6: it was kept in the clear, and a copy of the
// database forged deliveries every receiver accepted): AES-256-GCM under FACTOR_ENCRYPTION_KEY's
// ring (kernel/secret-box.ts, the endpoint's id in the additional data), as second-factor
// secrets and the access tokens' signing keys are; without a ring (PostgreSQL without the
// variable), under the database's own key, which the start's warning says. A secret kept in the
// clear before, or sealed by the database's own key before the ring was set, is sealed under the
// ring at each server's start (sealStoredSecrets): SQL cannot see the key.
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { type Db, rows } from '../../db/client.ts';
import { sqlArray } from '../../db/sql-array.ts';
import { sealedByRing, sealingRingFor } from '../../kernel/deployment-keys.ts';
import { EVENT_TYPES } from '../../kernel/outbox.ts';
import { type KeyRing, open, seal } from '../../kernel/secret-box.ts';
import { EVENTS_CHANNEL } from '../queue.ts';
import { newWebhookSecret } from './send.ts';

/** `user.created`, `user.*` or `*`. */
export const TYPE_PATTERN = new RegExp(`^(\\*|user\\.\\*|${EVENT_TYPES.map((t) => t.replace('.', '\\.')).join('|')})$`);

export interface Endpoint extends Record<string, unknown> {
  id: string;
  site: string;
  url: string;
  types: string[];
  createdAt: Date | string;
  failingSince: Date | string | null;
  disabledAt: Date | string | null;
  disabledReason: string | null;
  pending: number;
}

/** The additional data of an endpoint's sealed secret: it opens on its own row only. */
const contextOf = (id: string) => `webhook_endpoint ${id}`;

/** The Standard Webhooks secret as it is kept: sealed (`v1.…`), or in the clear (`whsec_…`) as before issue 57. */
export const inTheClear = (stored: string) => stored.startsWith('whsec_');

/** The ring that seals webhook secrets (see the top of this file). */
export const webhookRing = (db: Db, ring: KeyRing | undefined) => sealingRingFor(db, ring, 'webhook_secret');

/** The secret to sign with, from the row's stored form; a SealedSecretError when it does not open here. */
export function openSecret(sealing: KeyRing, id: string, stored: string): string {
  return inTheClear(stored) ? stored : open(sealing, stored, contextOf(id));
}

/**
 * Adds an endpoint. It receives the events committed from now on: its cursor starts at the
 * site's last event (`replay` sends older ones). The secret is returned once, here, and kept
 * sealed under `ring` (FACTOR_ENCRYPTION_KEY's; undefined: the database's own key).
 */
export async function addEndpoint(
  db: Db,
  spec: { site: string; url: string; types: string[] },
  ring?: KeyRing | undefined,
): Promise<{ id: string; secret: string }> {
  const secret = newWebhookSecret();
  const id = randomUUID();
  const sealed = seal(await webhookRing(db, ring), secret, contextOf(id));
  await db.execute(
    sql`insert into webhook_endpoints (id, site, url, types, secret, fanned_seq)
      values (${id}, ${spec.site}, ${spec.url}, ${sqlArray(spec.types, 'text')}, ${sealed},
        coalesce((select last from event_sequences where site = ${spec.site}), 0))`,
  );
  await notifyServers(db);
  return { id, secret };
}

/**
 * Seals under the ring's current key each secret kept in the clear (or, once a ring is set, under
 * the database's own key): a server's start, so that a database upgraded from before issue 57
 * holds none a copy could sign with. Each row is changed only if it is as it was read. Answers
 * how many it sealed.
 */
export async function sealStoredSecrets(db: Db, ring: KeyRing | undefined): Promise<number> {
  const stored = await rows<{ id: string; secret: string }>(
    db,
    sql`select id::text as id, secret from webhook_endpoints
      where secret like 'whsec\_%' or ${ring === undefined ? sql`false` : sql`secret like 'v1.@db.%'`}`,
  );
  if (stored.length === 0) return 0;
  const sealing = await webhookRing(db, ring);
  let sealed = 0;
  for (const row of stored) {
    if (sealedByRing(ring, row.secret)) continue;
    const secret = openSecret(sealing, row.id, row.secret);
    const changed = await rows<{ id: string }>(
      db,
      sql`update webhook_endpoints set secret = ${seal(sealing, secret, contextOf(row.id))}
        where id = ${row.id} and secret = ${row.secret} returning id::text as id`,
    );
    sealed += changed.length;
  }
  return sealed;
}

export async function listEndpoints(db: Db, site?: string): Promise<Endpoint[]> {
  return rows<Endpoint>(
    db,
    sql`select e.id::text as id, e.site, e.url, e.types, e.created_at as "createdAt",
        e.failing_since as "failingSince", e.disabled_at as "disabledAt",
        e.disabled_reason as "disabledReason",
        (select count(*)::int from webhook_deliveries d where d.endpoint_id = e.id and d.state = 'pending') as pending
      from webhook_endpoints e
      where ${site === undefined ? sql`true` : sql`e.site = ${site}`}
      order by e.created_at, e.id`,
  );
}

/** Removes an endpoint and its deliveries; false when there is none with this id. */
export async function removeEndpoint(db: Db, id: string): Promise<boolean> {
  const removed = await rows<{ id: string }>(
    db,
    sql`delete from webhook_endpoints where id = ${id} returning id::text as id`,
  );
  return removed.length > 0;
}

/** What a replay queued, and up to which sequence number the site's events are gone (the retention). */
export interface Replayed {
  made: number;
  prunedThrough: number;
}

/**
 * Sends again the endpoint's events from sequence number `from` up to where it is now, matching
 * its types, delivered before or not, except those still pending (they are on their way: a second
 * delivery would only repeat them). The new deliveries take their place in each account's order
 * (worker.ts): an older event goes before a newer one still pending, so that a receiver applying
 * them as they come ends on the account's latest state. Undefined when there is no such endpoint.
 */
export async function replay(db: Db, id: string, from: number): Promise<Replayed | undefined> {
  const [endpoint] = await rows<{ id: string; pruned: string | null }>(
    db,
    sql`select e.id::text as id, s.pruned_through::text as pruned
      from webhook_endpoints e left join event_sequences s on s.site = e.site where e.id = ${id}`,
  );
  if (endpoint === undefined) return undefined;
  const [made] = await rows<{ n: number }>(
    db,
    sql`with made as (
      insert into webhook_deliveries (endpoint_id, site, seq, subject, type)
      select e.id, e.site, ev.seq, ev.subject, ev.type
      from webhook_endpoints e join events ev on ev.site = e.site and ev.seq >= ${from} and ev.seq <= e.fanned_seq
      where e.id = ${id} and ${typeMatches(sql`ev.type`, sql`e.types`)}
        -- An event still on its way (pending) is not sent twice.
        and not exists (select 1 from webhook_deliveries p where p.endpoint_id = e.id and p.subject = ev.subject
          and p.seq = ev.seq and p.state = 'pending')
      order by ev.seq
      returning 1
    ) select count(*)::int as n from made`,
  );
  // A disabled endpoint is switched back on by a replay: the operator says it works again.
  await db.execute(
    sql`update webhook_endpoints set disabled_at = null, disabled_reason = null, failing_since = null
      where id = ${id} and disabled_at is not null`,
  );
  await notifyServers(db);
  return { made: made!.n, prunedThrough: Number(endpoint.pruned ?? 0) };
}

/**
 * Tells every server's webhook sender to read the endpoints again and look for work now: a
 * notification on the events' channel with no site (worker.ts skips sites it knows no endpoint of).
 */
export async function notifyServers(db: Db): Promise<void> {
  await db.execute(sql`select pg_notify(${EVENTS_CHANNEL}, '')`);
}

/** Whether an event type is among an endpoint's patterns (see TYPE_PATTERN). */
export const typeMatches = (type: ReturnType<typeof sql>, patterns: ReturnType<typeof sql>) =>
  sql`exists (select 1 from unnest(${patterns}) p where p = '*' or p = ${type} or (p like '%.*' and ${type} like left(p, -1) || '%'))`;

export interface Delivery extends Record<string, unknown> {
  id: string;
  endpointId: string;
  site: string;
  seq: string;
  type: string;
  subject: string;
  state: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: Date | string;
  nextAttemptAt: Date | string;
  deliveredAt: Date | string | null;
}

/** The latest deliveries, newest first, of one endpoint or of all. */
export async function latestDeliveries(db: Db, options: { limit: number; endpointId?: string }): Promise<Delivery[]> {
  return rows<Delivery>(
    db,
    sql`select id::text as id, endpoint_id::text as "endpointId", site, seq::text as seq, type, subject::text as subject,
        state, attempts, last_status as "lastStatus", last_error as "lastError", created_at as "createdAt",
        next_attempt_at as "nextAttemptAt", delivered_at as "deliveredAt"
      from webhook_deliveries
      where ${options.endpointId === undefined ? sql`true` : sql`endpoint_id = ${options.endpointId}`}
      order by webhook_deliveries.id desc limit ${options.limit}`,
  );
}
