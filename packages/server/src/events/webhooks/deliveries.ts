// A site's webhooks as the public API shows them (GET /api/1/webhooks, …/deliveries, …/replay):
// its endpoints without their secrets, an endpoint's deliveries a page at a time, and a replay of
// one delivery. Every function takes the site and answers only what is that site's: another
// site's endpoint or delivery is as absent as one that never existed.
import { and, count, desc, eq, lt, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { auditLog, events, webhookDeliveries, webhookEndpoints } from '../../db/schema.ts';
import { listEndpoints, notifyServers } from './endpoints.ts';

/**
 * The most deliveries a site may have pending for a replay to be taken: a replay adds to the
 * queue every site's webhooks share (fairly, worker.ts), so one site's replays are bounded.
 */
export const MAX_PENDING_FOR_REPLAY = 1000;

export type DeliveryState = 'pending' | 'delivered' | 'failed';

export interface SiteEndpoint {
  endpointId: string;
  url: string;
  types: string[];
  createdAt: string;
  failingSince: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
  pending: number;
}

export interface SiteDelivery {
  deliveryId: string;
  endpointId: string;
  eventId: string | null;
  sequence: string;
  type: string;
  _userId: string;
  state: DeliveryState;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
}

const iso = (value: Date | string | null): string | null => (value === null ? null : new Date(value).toISOString());

/**
 * An endpoint's URL as the API shows it: without credentials, and its query as `?…`. A receiver
 * may put its own secret there (a token in the query), which a token that reads the feed need not
 * see; the operator's `cli webhook list` shows it whole.
 */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}${parsed.search === '' ? '' : '?…'}`;
  } catch {
    return '(not a URL)';
  }
}

/** The site's endpoints, oldest first; never a secret (listEndpoints does not read it). */
export async function siteEndpoints(db: Db, site: string): Promise<SiteEndpoint[]> {
  return (await listEndpoints(db, site)).map((e) => ({
    endpointId: e.id,
    url: shownUrl(e.url),
    types: e.types,
    createdAt: iso(e.createdAt)!,
    failingSince: iso(e.failingSince),
    disabledAt: iso(e.disabledAt),
    disabledReason: e.disabledReason,
    pending: e.pending,
  }));
}

const deliveryColumns = {
  id: webhookDeliveries.id,
  endpointId: webhookDeliveries.endpointId,
  eventId: events.id,
  seq: webhookDeliveries.seq,
  type: webhookDeliveries.type,
  subject: webhookDeliveries.subject,
  state: webhookDeliveries.state,
  attempts: webhookDeliveries.attempts,
  lastStatus: webhookDeliveries.lastStatus,
  lastError: webhookDeliveries.lastError,
  createdAt: webhookDeliveries.createdAt,
  nextAttemptAt: webhookDeliveries.nextAttemptAt,
  deliveredAt: webhookDeliveries.deliveredAt,
};

interface DeliveryRow {
  id: number;
  endpointId: string;
  eventId: string | null;
  seq: number;
  type: string;
  subject: string;
  state: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: Date;
  nextAttemptAt: Date;
  deliveredAt: Date | null;
}

function toDelivery(row: DeliveryRow): SiteDelivery {
  return {
    deliveryId: String(row.id),
    endpointId: row.endpointId,
    eventId: row.eventId,
    sequence: String(row.seq).padStart(20, '0'),
    type: row.type,
    _userId: row.subject,
    state: row.state as DeliveryState,
    attempts: row.attempts,
    lastStatus: row.lastStatus,
    lastError: row.lastError,
    createdAt: row.createdAt.toISOString(),
    nextAttemptAt: row.state === 'pending' ? row.nextAttemptAt.toISOString() : null,
    deliveredAt: iso(row.deliveredAt),
  };
}

/** The delivery with its event's id (null once the retention removed the event). */
const selectDeliveries = (db: Db) =>
  db
    .select(deliveryColumns)
    .from(webhookDeliveries)
    .leftJoin(events, and(eq(events.site, webhookDeliveries.site), eq(events.seq, webhookDeliveries.seq)));

/** Whether the site has this endpoint. */
async function hasEndpoint(db: Db, site: string, endpointId: string): Promise<boolean> {
  const [found] = await db
    .select({ id: webhookEndpoints.id })
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, endpointId), eq(webhookEndpoints.site, site)))
    .limit(1);
  return found !== undefined;
}

/**
 * A page of an endpoint's deliveries, newest first (keyset on the delivery's id); undefined when
 * the site has no such endpoint.
 */
export async function deliveriesPage(
  db: Db,
  site: string,
  query: { endpointId: string; state?: DeliveryState | undefined; limit: number; before?: string | undefined },
): Promise<{ deliveries: SiteDelivery[]; next: string | null } | undefined> {
  if (!(await hasEndpoint(db, site, query.endpointId))) return undefined;
  const found = await selectDeliveries(db)
    .where(
      and(
        eq(webhookDeliveries.endpointId, query.endpointId),
        query.state === undefined ? undefined : eq(webhookDeliveries.state, query.state),
        query.before === undefined ? undefined : lt(webhookDeliveries.id, Number(query.before)),
      ),
    )
    .orderBy(desc(webhookDeliveries.id))
    .limit(query.limit + 1);
  const page = found.slice(0, query.limit);
  return {
    deliveries: page.map(toDelivery),
    next: found.length > query.limit ? String(page[page.length - 1]!.id) : null,
  };
}

export type ReplayOutcome =
  | { outcome: 'replayed' | 'pending'; delivery: SiteDelivery }
  | { outcome: 'not_found' | 'expired' }
  | { outcome: 'too_many'; pending: number };

/** Who asks for a replay: the audit row names the token and the request, as every write's does. */
export interface ReplaySource {
  site: string;
  tokenId: string;
  requestId: string;
}

/** The audit row's status and outcome of each outcome (the answer's status, its status text or problem code). */
const AUDITED: Record<ReplayOutcome['outcome'], [status: number, outcome: string]> = {
  replayed: [202, 'delivery replayed'],
  pending: [200, 'delivery already pending'],
  not_found: [404, 'webhook_not_found'],
  expired: [410, 'events_expired'],
  too_many: [409, 'too_many_deliveries_pending'],
};

/**
 * Queues the delivery's event to its endpoint again, unless a delivery of it is pending there
 * already (that one is answered). Under a lock of the site for the transaction, so that two
 * replays at once neither both queue the same event nor both pass the site's bound. Every
 * outcome leaves an audit row of the site (operation `webhook`, no account: it is not a change of
 * one), in the same transaction as the replay.
 */
export async function replayDelivery(db: Db, source: ReplaySource, deliveryId: string): Promise<ReplayOutcome> {
  const { site } = source;
  const result = await db.transaction(async (tx): Promise<ReplayOutcome> => {
    const outcome = await replayIn(tx, site, deliveryId);
    const [status, text] = AUDITED[outcome.outcome];
    await tx.insert(auditLog).values({
      ...source,
      operation: 'webhook',
      userId: null,
      status,
      outcome: outcome.outcome === 'replayed' ? `${text} (delivery ${deliveryId})` : text,
    });
    return outcome;
  });
  // Every server's sender looks for work now, not at its next poll.
  if (result.outcome === 'replayed') await notifyServers(db);
  return result;
}

/** The replay itself, in the caller's transaction (see replayDelivery). */
async function replayIn(tx: Db, site: string, deliveryId: string): Promise<ReplayOutcome> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`webhook-replay:${site}`}))`);
  const [original] = await selectDeliveries(tx)
    .where(and(eq(webhookDeliveries.id, Number(deliveryId)), eq(webhookDeliveries.site, site)))
    .limit(1);
  if (original === undefined) return { outcome: 'not_found' };
  if (original.eventId === null) return { outcome: 'expired' };
  const [already] = await selectDeliveries(tx)
    .where(
      and(
        eq(webhookDeliveries.endpointId, original.endpointId),
        eq(webhookDeliveries.seq, original.seq),
        eq(webhookDeliveries.state, 'pending'),
      ),
    )
    .orderBy(desc(webhookDeliveries.id))
    .limit(1);
  if (already !== undefined) return { outcome: 'pending', delivery: toDelivery(already) };
  // Counted up to the bound only: a site with a long queue costs no more to refuse.
  const [pending] = await tx.select({ n: count() }).from(
    tx
      .select({ one: sql`1`.as('one') })
      .from(webhookDeliveries)
      .innerJoin(webhookEndpoints, eq(webhookEndpoints.id, webhookDeliveries.endpointId))
      .where(and(eq(webhookEndpoints.site, site), eq(webhookDeliveries.state, 'pending')))
      .limit(MAX_PENDING_FOR_REPLAY)
      .as('p'),
  );
  if ((pending?.n ?? 0) >= MAX_PENDING_FOR_REPLAY) return { outcome: 'too_many', pending: pending!.n };
  const [made] = await tx
    .insert(webhookDeliveries)
    .values({
      endpointId: original.endpointId,
      site,
      seq: original.seq,
      subject: original.subject,
      type: original.type,
    })
    .returning({ id: webhookDeliveries.id });
  const [delivery] = await selectDeliveries(tx).where(eq(webhookDeliveries.id, made!.id));
  return { outcome: 'replayed', delivery: toDelivery(delivery!) };
}
