// Sends the change events to the sites' webhook endpoints. Every server runs one; they share the
// work through the database:
// - fan-out: for each endpoint, the events after its cursor (`fanned_seq`) become deliveries and
//   the cursor moves, in one statement under the endpoint's row lock (SKIP LOCKED: one server at
//   a time per endpoint). The feed's order guarantee (events/queue.ts) is what makes a cursor enough.
// - claim, cap and fairness: kernel/fair-claimer.ts, shared with the message worker. The owner
//   is the endpoint: it has at most `perEndpoint` deliveries leased at once, counted across the
//   servers, and a claim takes each site's first due delivery, then each site's second, and so
//   on, a site's endpoints in turn. An endpoint that hangs holds `perEndpoint` of a server's
//   slots for the attempt's time limit, never all of them, and another site's delivery is the
//   first in line for the next free one (issue 26: a hanging endpoint with 200 queued had
//   delayed every other site's webhooks by two minutes).
// - order: a delivery is due only when no earlier delivery of the same account to the same
//   endpoint is still pending, so a receiver sees an account's events in order.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { type Db, rows } from '../../db/client.ts';
import { claimFairly, doublingDelayMs, type FairQueue, startClaimLoop } from '../../kernel/fair-claimer.ts';
import type { KeyRing } from '../../kernel/secret-box.ts';
import { SealedSecretError } from '../../kernel/secret-box.ts';
import { type EventRow, eventColumns, toCloudEvent } from '../queue.ts';
import type { Wake } from '../wake.ts';
import { openSecret, typeMatches, webhookRing } from './endpoints.ts';
import { type Attempt, sendWebhook } from './send.ts';

const DAY_MS = 86_400_000;

export interface RetryPolicy {
  /** The first retry's delay; each next one doubles, up to maxMs, with jitter (half to all of it). */
  baseMs: number;
  maxMs: number;
  /** A delivery failing for this long is given up (state `failed`; `cli webhook replay` sends it again). */
  giveUpMs: number;
  /** An endpoint whose every attempt failed for this long is disabled. */
  disableAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  baseMs: 1_000,
  maxMs: 3_600_000,
  giveUpMs: 3 * DAY_MS,
  disableAfterMs: 5 * DAY_MS,
};

export interface DeliveryMetrics {
  observeDelivery(outcome: 'delivered' | 'failed' | 'given_up', attemptSeconds: number, latencySeconds?: number): void;
}

export interface WebhookWorkerOptions {
  db: Db;
  logger: Logger;
  wake?: Wake | undefined;
  allowPrivate: boolean;
  metrics?: DeliveryMetrics | undefined;
  retry?: RetryPolicy;
  /** Deliveries sent at once by this server. */
  concurrency?: number;
  /** Deliveries to one endpoint in flight at once, every server together (WEBHOOK_ENDPOINT_CONCURRENCY). */
  perEndpoint?: number;
  /** How often to look for due retries (new events wake it at once). */
  pollMs?: number;
  timeoutMs?: number;
  /** When tracing is on: a CLIENT span per attempt, in the trace of the write that made the event. */
  tracer?: Tracer | undefined;
  /** FACTOR_ENCRYPTION_KEY's ring (or the embedded database's key file), which opens the endpoints' secrets. */
  factorKeys?: KeyRing | undefined;
}

/** The secret an endpoint signs with, opened from its stored form (endpoints.ts); throws what keeps it shut. */
type SecretOf = (endpointId: string, stored: string) => Promise<string>;

/** Opens endpoints' secrets with the ring, read once (again after a failure: the database's own key may be made since). */
function secretOpener(db: Db, ring: KeyRing | undefined): SecretOf {
  let sealing: Promise<KeyRing> | undefined;
  return async (endpointId, stored) => {
    sealing ??= webhookRing(db, ring);
    try {
      return openSecret(await sealing, endpointId, stored);
    } catch (error) {
      sealing = undefined;
      throw error;
    }
  };
}

interface Claimed extends Record<string, unknown> {
  id: string;
  site: string;
  seq: string;
  attempts: number;
  endpointId: string;
  url: string;
  secret: string;
  /** The event's row, read in the same statement; null once pruned. */
  event: EventRow | string | null;
}

/** The delay before attempt n + 1 after n failures: doubling from baseMs, capped, with jitter. */
export const retryDelayMs = (failures: number, policy: RetryPolicy, random = Math.random) =>
  doublingDelayMs(failures, policy.baseMs, policy.maxMs, random);

/** Makes the deliveries of events the endpoints have not had yet; returns how many events it looked at. */
export async function fanOut(db: Db, batch = 1000): Promise<number> {
  const [done] = await rows<{ n: number }>(
    db,
    sql`with ep as (
      select id, site, types, fanned_seq from webhook_endpoints where disabled_at is null
      for update skip locked
    ), batch as (
      select ep.id as endpoint_id, ep.types, ep.site, ev.seq, ev.subject, ev.type
      from ep cross join lateral (
        select e.seq, e.subject, e.type from events e
        where e.site = ep.site and e.seq > ep.fanned_seq order by e.seq limit ${batch}
      ) ev
    ), made as (
      insert into webhook_deliveries (endpoint_id, site, seq, subject, type)
      select endpoint_id, site, seq, subject, type from batch
      where ${typeMatches(sql`batch.type`, sql`batch.types`)}
      order by seq
    ), moved as (
      update webhook_endpoints w set fanned_seq = m.seq
      from (select endpoint_id, max(seq) as seq from batch group by endpoint_id) m where w.id = m.endpoint_id
    )
    select count(*)::int as n from batch`,
  );
  return done?.n ?? 0;
}

/** The sites that have an enabled endpoint. */
async function hookedSites(db: Db): Promise<Set<string>> {
  const found = await rows<{ site: string }>(
    db,
    sql`select distinct site from webhook_endpoints where disabled_at is null`,
  );
  return new Set(found.map((r) => r.site));
}

/** Deliveries to one endpoint in flight at once, every server together, unless configured. */
export const DEFAULT_PER_ENDPOINT = 4;

/** The deliveries as the shared claimer sees them: owned by their endpoints, in order per account. */
const DELIVERIES: FairQueue = {
  items: 'webhook_deliveries',
  ownerColumn: 'endpoint_id',
  owners: { table: 'webhook_endpoints', key: 'id', keyType: 'uuid', site: 'site', where: sql`o.disabled_at is null` },
  waiting: (alias) => sql.raw(`${alias}.state = 'pending'`),
  // A delivery is due only when no earlier one of the same account to the same endpoint is pending.
  alsoDue: sql`not exists (
    select 1 from webhook_deliveries p
    where p.endpoint_id = d.endpoint_id and p.subject = d.subject and p.state = 'pending' and p.seq < d.seq
  )`,
  alsoSet: sql`first_attempt_at = coalesce(d.first_attempt_at, now())`,
  join: { from: sql`webhook_endpoints e`, on: sql`e.id = d.endpoint_id` },
  returning: sql`d.id::text as id, d.site, d.seq::text as seq, d.attempts, e.id::text as "endpointId", e.url, e.secret,
    (select row_to_json(ev) from (
      select ${eventColumns}, e.traceparent from events e where e.site = d.site and e.seq = d.seq
    ) ev) as event`,
};

/**
 * Leases up to `limit` due deliveries, each the earliest pending of its endpoint and account, at
 * most `perEndpoint` leased per endpoint at once, served in turn between sites and between a
 * site's endpoints (kernel/fair-claimer.ts).
 */
export const claim = (db: Db, limit: number, leaseSeconds: number, perEndpoint = DEFAULT_PER_ENDPOINT) =>
  claimFairly<Claimed>(db, DELIVERIES, limit, leaseSeconds, perEndpoint);

/**
 * Still this server's claim: no other server claimed it since (a claim counts an attempt). A
 * late record after the lease ran out and another server took over would otherwise undo its work.
 */
const ours = (delivery: Claimed) => sql`state = 'pending' and attempts = ${delivery.attempts}`;

/** Records an attempt's outcome: delivered, or retried later, or given up; and the endpoint's health. */
async function record(db: Db, delivery: Claimed, attempt: Attempt, policy: RetryPolicy, logger: Logger) {
  const error = attempt.ok ? null : (attempt.error ?? `answered ${attempt.status}`).slice(0, 500);
  if (attempt.ok) {
    await db.execute(sql`
      with d as (
        update webhook_deliveries set state = 'delivered', delivered_at = now(), leased_until = null,
          last_status = ${attempt.status ?? null}, last_error = null
        where id = ${delivery.id} and ${ours(delivery)} returning endpoint_id
      )
      update webhook_endpoints set failing_since = null
      where id = (select endpoint_id from d) and failing_since is not null`);
    return 'delivered' as const;
  }
  const delay = retryDelayMs(delivery.attempts, policy);
  const [row] = await rows<{ state: string; disable: boolean; site: string }>(
    db,
    sql`with d as (
      update webhook_deliveries set leased_until = null, last_status = ${attempt.status ?? null}, last_error = ${error},
        next_attempt_at = now() + make_interval(secs => ${delay / 1000}),
        -- From its first attempt: a delivery that waited days behind an earlier one still gets its retries.
        state = case when coalesce(first_attempt_at, created_at) < now() - make_interval(secs => ${policy.giveUpMs / 1000})
          then 'failed' else 'pending' end
      where id = ${delivery.id} and ${ours(delivery)} returning state, endpoint_id
    ), e as (
      update webhook_endpoints set failing_since = coalesce(failing_since, now())
      where id = (select endpoint_id from d)
      returning site, failing_since < now() - make_interval(secs => ${policy.disableAfterMs / 1000}) as disable
    )
    select d.state, e.disable, e.site from d, e`,
  );
  if (row?.disable) await disableEndpoint(db, delivery.endpointId, row.site, error ?? 'failed', policy, logger);
  return row?.state === 'failed' ? ('given_up' as const) : ('failed' as const);
}

/** Switches an endpoint off after days of failures, and says so in the audit trail. */
async function disableEndpoint(
  db: Db,
  endpointId: string,
  site: string,
  lastError: string,
  policy: RetryPolicy,
  logger: Logger,
) {
  const reason = `every delivery failed for ${policy.disableAfterMs / DAY_MS} days; last: ${lastError}`.slice(0, 500);
  const [changed] = await rows<{ id: string }>(
    db,
    sql`update webhook_endpoints set disabled_at = now(), disabled_reason = ${reason}
      where id = ${endpointId} and disabled_at is null returning id::text as id`,
  );
  if (changed === undefined) return;
  await db.execute(sql`insert into audit_log (site, token_id, operation, user_id, request_id, status, outcome)
    values (${site}, 'webhooks', 'webhook', null, ${`webhook-${endpointId}`}, 0, ${`endpoint disabled: ${reason}`.slice(0, 500)})`);
  logger.warn({ endpoint: endpointId, site }, `webhook endpoint disabled: ${reason}`);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * An attempt's CLIENT span, child of the write's span that the event kept (events.traceparent),
 * or the root of a trace of its own (an event of the CLI's import). Its `traceparent` goes with
 * the delivery: a receiver's own trace joins the write's. The endpoint's URL is not an attribute
 * (it may hold a secret of the receiver's), only its id.
 */
function deliverySpan(tracer: Tracer, delivery: Claimed, row: EventRow & { traceparent?: string | null }) {
  const kept = TRACEPARENT.exec(row.traceparent ?? '');
  const parent =
    kept === null
      ? ROOT_CONTEXT
      : trace.setSpanContext(ROOT_CONTEXT, {
          traceId: kept[1]!,
          spanId: kept[2]!,
          traceFlags: Number.parseInt(kept[3]!, 16),
          isRemote: true,
        });
  const span = tracer.startSpan(
    'POST',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'http.request.method': 'POST',
        'user_accounts.webhook.endpoint': delivery.endpointId,
        'user_accounts.webhook.attempt': delivery.attempts,
        'cloudevents.event_type': row.type,
        'cloudevents.event_id': row.id,
      },
    },
    parent,
  );
  const { traceId, spanId, traceFlags } = span.spanContext();
  return {
    traceparent: `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`,
    end(attempt: Attempt) {
      if (attempt.status !== undefined) span.setAttribute('http.response.status_code', attempt.status);
      if (!attempt.ok) {
        span.setAttribute('error.type', attempt.status === undefined ? 'network' : String(attempt.status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}

async function deliver(
  db: Db,
  delivery: Claimed,
  options: WebhookWorkerOptions & { secretOf: SecretOf },
): Promise<void> {
  const policy = options.retry ?? DEFAULT_RETRY;
  const row = typeof delivery.event === 'string' ? (JSON.parse(delivery.event) as EventRow) : delivery.event;
  const event = row === null ? undefined : toCloudEvent(delivery.site, row);
  if (event === undefined) {
    // Pruned by the retention before it could be sent: nothing left to send.
    await db.execute(sql`update webhook_deliveries set state = 'failed', leased_until = null,
      last_error = 'the event is past the retention and was removed' where id = ${delivery.id} and ${ours(delivery)}`);
    options.metrics?.observeDelivery('given_up', 0);
    return;
  }
  let secret: string;
  try {
    secret = await options.secretOf(delivery.endpointId, delivery.secret);
  } catch (error) {
    if (!(error instanceof SealedSecretError)) throw error;
    // Not sent, and retried as a failure is: every server must have the same FACTOR_ENCRYPTION_KEY.
    const attempt: Attempt = {
      ok: false,
      error: `the endpoint's signing secret does not open on this server (${error.message})`,
      ms: 0,
    };
    const outcome = await record(db, delivery, attempt, policy, options.logger);
    options.metrics?.observeDelivery(outcome, 0);
    options.logger.warn({ endpoint: delivery.endpointId }, attempt.error);
    return;
  }
  const span = options.tracer === undefined ? undefined : deliverySpan(options.tracer, delivery, row!);
  const attempt: Attempt = await sendWebhook({
    url: delivery.url,
    secret,
    id: event.id,
    timestamp: new Date(),
    body: JSON.stringify(event),
    allowPrivate: options.allowPrivate,
    timeoutMs: options.timeoutMs ?? 10_000,
    traceparent: span?.traceparent,
  });
  span?.end(attempt);
  const outcome = await record(db, delivery, attempt, policy, options.logger);
  const latency = outcome === 'delivered' ? (Date.now() - Date.parse(event.time)) / 1000 : undefined;
  options.metrics?.observeDelivery(outcome, attempt.ms / 1000, latency);
  if (!attempt.ok)
    options.logger.info(
      {
        endpoint: delivery.endpointId,
        sequence: event.sequence,
        attempts: delivery.attempts,
        error: attempt.error,
        status: attempt.status,
      },
      outcome === 'given_up' ? 'webhook delivery given up' : 'webhook delivery failed; will retry',
    );
}

export interface WebhookWorker {
  /** Looks for work now (tests; new events do this by themselves). */
  kick(): void;
  /** Stops taking work and waits for the deliveries in flight. */
  stop(): Promise<void>;
}

export function startWebhookWorker(options: WebhookWorkerOptions): WebhookWorker {
  const { db, logger } = options;
  const concurrency = options.concurrency ?? 16;
  const perEndpoint = options.perEndpoint ?? DEFAULT_PER_ENDPOINT;
  const timeoutMs = options.timeoutMs ?? 10_000;
  // A lease outlives the attempt's time limit, so a live server's send never loses it; a dead
  // server's deliveries are sent again once it runs out.
  const leaseSeconds = Math.ceil(timeoutMs / 1000) + 5;
  const secretOf = secretOpener(db, options.factorKeys);
  // New events (a notification, the poll) need a fan-out first; a finished delivery only frees a
  // slot for the next claim.
  let fanOutWanted = true;
  // The sites with an enabled endpoint, read at each poll: a notification for another site needs
  // no statement at all. Most sites have no webhooks, and every numbering run anywhere notifies
  // every server (a fan-out and a claim each, per run, cost writes 10% of their throughput).
  // An endpoint added or replayed notifies with no site (endpoints.ts), which reads them again.
  let hooked: Set<string> | undefined;
  let hookedWanted = true;
  const loop = startClaimLoop<Claimed>({
    logger,
    what: 'webhook delivery',
    concurrency,
    pollMs: options.pollMs ?? 1_000,
    async prepare() {
      if (hookedWanted) {
        hookedWanted = false;
        hooked = await hookedSites(db);
      }
      if (fanOutWanted) {
        fanOutWanted = false;
        await fanOut(db);
      }
    },
    onPoll() {
      hookedWanted = true;
      fanOutWanted = true;
    },
    claim: (room) => claim(db, room, leaseSeconds, perEndpoint),
    attempt: (delivery) => deliver(db, delivery, { ...options, timeoutMs, secretOf }),
  });
  const kick = () => {
    fanOutWanted = true;
    loop.kick();
  };
  const unsubscribe = options.wake?.subscribe((site) => {
    if (site === undefined) hookedWanted = true;
    else if (hooked !== undefined && !hooked.has(site)) return;
    kick();
  });
  return {
    kick,
    async stop() {
      unsubscribe?.();
      await loop.stop();
    },
  };
}
