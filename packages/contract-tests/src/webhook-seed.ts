// A site's webhook endpoint and deliveries, stored as `cli webhook add` and the sender leave them,
// for the tests of the webhook operations (which read and replay them; none adds an endpoint).
// The deliveries are of the site's real events (made through the API); no sender runs in the
// in-process servers, so what a test stores stays as it was stored.

type Sql = (query: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

export interface SeededWebhook {
  endpointId: string;
  /** The deliveries, in the order of `events` given: a delivered one, then failed ones. */
  deliveryIds: string[];
  /** The event sequence numbers they carry, in the same order. */
  seqs: number[];
}

/** Waits until the account's events are numbered (the sequencer runs within milliseconds of a write). */
async function numberedEvents(sql: Sql, site: string, subject: string, count: number) {
  for (let tries = 0; tries < 200; tries++) {
    const found = await sql('select seq::int as seq, type from events where site = $1 and subject = $2 order by seq', [
      site,
      subject,
    ]);
    if (found.length >= count) return found as { seq: number; type: string }[];
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`the events of ${subject} were not numbered within 5 s`);
}

/**
 * An endpoint of `site` (its secret stored, as the CLI stores it) and one delivery for each of
 * the account's first `count` events: the first delivered at once, the others given up after
 * 5 attempts that the receiver answered 503.
 */
export async function seedWebhook(
  sql: Sql,
  site: string,
  subject: string,
  options: { count?: number; url?: string } = {},
): Promise<SeededWebhook> {
  const count = options.count ?? 2;
  const seen = await numberedEvents(sql, site, subject, count);
  const [endpoint] = await sql(
    `insert into webhook_endpoints (site, url, types, secret, fanned_seq)
     values ($1, $2, array['user.*'], 'whsec_c2VlZGVkIGZvciBhIHRlc3Qgb25seQ==',
       coalesce((select last from event_sequences where site = $1), 0))
     returning id::text as id`,
    [site, options.url ?? 'https://hooks.example.com/accounts'],
  );
  const deliveryIds: string[] = [];
  const seqs: number[] = [];
  for (const [index, event] of seen.slice(0, count).entries()) {
    const delivered = index === 0;
    const [row] = await sql(
      `insert into webhook_deliveries (endpoint_id, site, seq, subject, type, state, attempts, last_status,
         last_error, first_attempt_at, delivered_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), $10) returning id::text as id`,
      [
        endpoint!.id,
        site,
        event.seq,
        subject,
        event.type,
        delivered ? 'delivered' : 'failed',
        delivered ? 1 : 5,
        delivered ? 204 : 503,
        delivered ? null : 'answered 503',
        delivered ? new Date().toISOString() : null,
      ],
    );
    deliveryIds.push(row!.id as string);
    seqs.push(event.seq);
  }
  return { endpointId: endpoint!.id as string, deliveryIds, seqs };
}
