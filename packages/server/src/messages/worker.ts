// Sends the message outbox (issue 60, points 4 and 6). Every server runs one; they share the work
// through the database, as the webhook worker does (events/webhooks/worker.ts):
// - claim, cap and fairness: kernel/fair-claimer.ts, shared with the webhook worker. The owner is
//   the site (its site_senders row): at most `perSite` messages of a site leased at once, counted
//   across servers, each site's first due message in turn, so that a site queueing 10,000 holds
//   `perSite` of a server's slots and another site's message is first in line for the next free
//   one. A server killed mid-send leaves a lease that runs out, and another sends the message
//   again, with the same Message-ID (`<id@user-accounts>`): at least once, a duplicate only when
//   the kill fell between the SMTP server's acceptance and our record of it (docs/delivery.md
//   counts them).
// - retries: a temporary failure (SMTP 4xx, a connection refused, a timeout, the text API's 5xx
//   or 429) is tried again after 5 s, 30 s, 2 min, 10 min, 30 min, then hourly, for 24 hours from
//   the message's making; a permanent one (SMTP 5xx, the text API's 4xx) stops at once, and an
//   email refused so marks the address undeliverable. While a site's transport is down, its
//   message due first is tried at least every 30 s, and the first success makes the site's
//   other waiting messages due at once: a transport back is used within 30 s.
// - the body (sealed, with the link or code) is deleted once the message is sent or given up.
import { sql } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';
import { type Db, rows } from '../db/client.ts';
import { claimFairly, type FairQueue, scheduledDelayMs, startClaimLoop } from '../kernel/fair-claimer.ts';
import type { KeyRing } from '../kernel/secret-box.ts';
import { messageRing, openBody } from './outbox.ts';
import { mailTransportOf, openSenders } from './senders.ts';
import type { Rendered } from './templates.ts';

/** The delays after the 1st, 2nd, … failure, in seconds; the last repeats. */
export const RETRY_SCHEDULE = [5, 30, 120, 600, 1800, 3600];
/** A message failing for this long since it was made is given up. */
export const GIVE_UP_SECONDS = 24 * 3600;
/** While a site's transport fails, its first waiting message is tried at least this often. */
export const PROBE_SECONDS = 30;

export interface MessageOutcomes {
  /** Told of each message's end: sent, or failed (permanent, or given up). For events and metrics. */
  sent?(message: About): Promise<void>;
  failed?(message: About & { reason: string; bounced: boolean }): Promise<void>;
}

/** A message as its outcomes name it: its account (none for an invitation to an address no account holds), its organization. */
export interface About {
  id: string;
  site: string;
  userId: string | null;
  orgId: string | null;
  channel: string;
  purpose: string;
}

export interface MessageWorkerOptions {
  db: Db;
  logger: Logger;
  /** FACTOR_ENCRYPTION_KEY's ring: opens the bodies and the senders' secrets. */
  factorKeys?: KeyRing | undefined;
  /** Messages sent at once by this server. */
  concurrency?: number;
  /** Messages of one site in flight at once, every server together. */
  perSite?: number;
  /** How often to look for due messages (a send on this server kicks it at once). */
  pollMs?: number;
  /** An attempt's time limit (connection, greeting, each reply). */
  timeoutMs?: number;
  outcomes?: MessageOutcomes;
  /** Delays of the retries (tests shorten them). */
  schedule?: number[];
}

interface Claimed extends Record<string, unknown> {
  id: string;
  site: string;
  user_id: string | null;
  org_id: string | null;
  channel: 'email' | 'sms';
  purpose: string;
  recipient: string;
  body_sealed: string | null;
  attempts: number;
}

export interface Attempt {
  ok: boolean;
  permanent?: boolean;
  error?: string;
}

export const DEFAULT_PER_SITE = 4;

/** The messages as the shared claimer sees them: owned by their site's senders. */
const MESSAGES: FairQueue = {
  items: 'messages',
  ownerColumn: 'site',
  owners: { table: 'site_senders', key: 'site', keyType: 'text', site: 'site' },
  waiting: (alias) => sql.raw(`${alias}.status = 'queued'`),
  returning: sql`d.id::text as id, d.site, d.user_id::text as user_id, d.org_id::text as org_id, d.channel, d.purpose,
    d.recipient, d.body_sealed, d.attempts`,
};

/** Leases up to `limit` due messages, each site's first in turn, at most `perSite` of a site in flight (kernel/fair-claimer.ts). */
export const claim = (db: Db, limit: number, leaseSeconds: number, perSite: number) =>
  claimFairly<Claimed>(db, MESSAGES, limit, leaseSeconds, perSite);

/** Still this server's claim: no other server claimed it since (a claim counts an attempt). */
const ours = (m: Claimed) => sql`id = ${m.id} and status = 'queued' and attempts = ${m.attempts}`;

/** Records an attempt; answers the message's end, if it ended. */
async function record(db: Db, m: Claimed, attempt: Attempt, schedule: number[]): Promise<'sent' | 'failed' | 'retry'> {
  if (attempt.ok) {
    const [done] = await rows<{ id: string }>(
      db,
      sql`update messages set status = 'sent', sent_at = now(), leased_until = null, body_sealed = null, last_error = null
        where ${ours(m)} returning id::text as id`,
    );
    // It had failed before: the transport is back; the site's other waiting messages go now.
    if (m.attempts > 1)
      await db.execute(sql`update messages set next_attempt_at = now()
        where site = ${m.site} and status = 'queued' and next_attempt_at > now() and (leased_until is null or leased_until < now())`);
    return done === undefined ? 'retry' : 'sent';
  }
  const error = (attempt.error ?? 'failed').slice(0, 500);
  if (attempt.permanent) {
    // An email refused for good makes the account's email undeliverable (kernel/email-deliverable.ts):
    // its version moves with it, so that get's ETag changes as its answer does.
    await db.execute(sql`with failed as (
        update messages set status = 'failed', leased_until = null, body_sealed = null,
          last_error = ${error}, undeliverable = (channel = 'email') where ${ours(m)}
        returning channel, user_id, recipient
      )
      update users u set version = u.version + 1 from failed
      where failed.channel = 'email' and u.id = failed.user_id and lower(u.email) = lower(failed.recipient)`);
    return 'failed';
  }
  const delay = scheduledDelayMs(m.attempts, schedule) / 1000;
  const [row] = await rows<{ status: string }>(
    db,
    sql`update messages set leased_until = null, last_error = ${error},
      next_attempt_at = now() + make_interval(secs => case when exists (
          select 1 from messages o where o.site = ${m.site} and o.status = 'queued' and o.id <> ${m.id}::uuid
            and o.next_attempt_at <= now() + make_interval(secs => ${PROBE_SECONDS}::int)
        ) then ${delay}::int else least(${delay}::int, ${PROBE_SECONDS}::int) end),
      status = case when created_at < now() - make_interval(secs => ${GIVE_UP_SECONDS}::int) then 'failed' else 'queued' end,
      body_sealed = case when created_at < now() - make_interval(secs => ${GIVE_UP_SECONDS}::int) then null else body_sealed end
    where ${ours(m)} returning status`,
  );
  return row?.status === 'failed' ? 'failed' : 'retry';
}

/** What a nodemailer error means: an SMTP reply's class, else a temporary failure (connection, timeout). */
export function classifyMailError(error: unknown): Attempt {
  const e = error as { responseCode?: number; response?: string; code?: string; message?: string };
  const reply = e.response?.replace(/\s+/g, ' ').trim();
  const said = reply ?? `${e.code ?? 'error'}: ${e.message ?? String(error)}`;
  if (typeof e.responseCode === 'number') return { ok: false, permanent: e.responseCode >= 500, error: said };
  return { ok: false, permanent: false, error: said };
}

type Senders = NonNullable<Awaited<ReturnType<typeof openSenders>>>;

function mailerFor(senders: Senders, timeoutMs: number, pool: number) {
  const t = mailTransportOf(senders.mailTransport!);
  return nodemailer.createTransport({
    host: t.host,
    port: t.port,
    secure: t.secure,
    // STARTTLS required unless the host is loopback (where a relay without TLS is a developer's own).
    requireTLS: !t.secure && !t.loopback,
    ...(t.loopback ? { tls: { rejectUnauthorized: false } } : {}),
    ...(t.user === undefined ? {} : { auth: { user: t.user, pass: senders.mailPassword ?? '' } }),
    pool: true,
    maxConnections: pool,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    // No logging of ours or nodemailer's: a transcript would hold the message.
    logger: false,
    debug: false,
  });
}

/** A text through the site's HTTP API: its JSON body template with {{to}} and {{text}} filled in, JSON-escaped. */
async function sendText(senders: Senders, to: string, text: string, timeoutMs: number): Promise<Attempt> {
  const sms = senders.sms!;
  const jsonText = (v: string) => JSON.stringify(v).slice(1, -1);
  const body = sms.body.replaceAll('{{to}}', jsonText(to)).replaceAll('{{text}}', jsonText(text));
  try {
    const answer = await fetch(sms.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(senders.smsKey === undefined ? {} : { [sms.header]: senders.smsKey }),
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await answer.body?.cancel();
    if (answer.ok) return { ok: true };
    const temporary = answer.status >= 500 || answer.status === 429 || answer.status === 408;
    return { ok: false, permanent: !temporary, error: `the text API answered ${answer.status}` };
  } catch (error) {
    return { ok: false, permanent: false, error: `the text API did not answer: ${(error as Error).name}` };
  }
}

export interface MessageWorker {
  /** Looks for work now (a send on this server). */
  kick(): void;
  stop(): Promise<void>;
}

export function startMessageWorker(options: MessageWorkerOptions): MessageWorker {
  const { db, logger } = options;
  const concurrency = options.concurrency ?? 16;
  const perSite = options.perSite ?? DEFAULT_PER_SITE;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const schedule = options.schedule ?? RETRY_SCHEDULE;
  // Outlives an attempt (connection, greeting, and each reply), so a live server never loses it.
  const leaseSeconds = Math.ceil((timeoutMs * 4) / 1000) + 5;
  // Each site's transport (a pool of perSite connections), until its senders change.
  const mailers = new Map<string, { at: number; mailer: ReturnType<typeof mailerFor> }>();
  let ring: Promise<KeyRing> | undefined;

  async function send(m: Claimed): Promise<void> {
    let attempt: Attempt | undefined;
    const senders = await openSenders(db, m.site, options.factorKeys).catch((error: unknown) => {
      attempt = {
        ok: false,
        permanent: false,
        error: `the site's senders do not open here (${(error as Error).message})`,
      };
      return undefined;
    });
    ring ??= messageRing(db, options.factorKeys);
    let body: Rendered | undefined;
    if (m.body_sealed !== null) {
      try {
        body = openBody(await ring, m.id, m.body_sealed);
      } catch (error) {
        ring = undefined;
        attempt = {
          ok: false,
          permanent: false,
          error: `the message does not open here (${(error as Error).message})`,
        };
      }
    }
    attempt ??=
      senders === undefined || body === undefined
        ? { ok: false, permanent: true, error: 'the site has no transport for it any more' }
        : m.channel === 'email'
          ? await sendMail(senders, m, body)
          : senders.sms === null
            ? { ok: false, permanent: true, error: 'the site has no text-message transport any more' }
            : await sendText(senders, m.recipient, body.text, timeoutMs);
    const outcome = await record(db, m, attempt, schedule);
    const about: About = {
      id: m.id,
      site: m.site,
      userId: m.user_id,
      orgId: m.org_id,
      channel: m.channel,
      purpose: m.purpose,
    };
    if (outcome === 'sent') await options.outcomes?.sent?.(about);
    else if (outcome === 'failed')
      await options.outcomes?.failed?.({
        ...about,
        reason: attempt.error ?? 'failed',
        bounced: attempt.permanent === true && m.channel === 'email',
      });
    if (!attempt.ok)
      logger.info(
        { message: m.id, site: m.site, attempts: m.attempts, error: attempt.error },
        outcome === 'failed' ? 'message not delivered; given up' : 'message not delivered; will retry',
      );
  }

  async function sendMail(senders: Senders, m: Claimed, body: Rendered): Promise<Attempt> {
    if (senders.mailTransport === null || senders.mailFrom === null)
      return { ok: false, permanent: true, error: 'the site has no mail transport any more' };
    const at = senders.updatedAt.getTime();
    let entry = mailers.get(m.site);
    if (entry === undefined || entry.at !== at) {
      entry?.mailer.close();
      entry = { at, mailer: mailerFor(senders, timeoutMs, perSite) };
      mailers.set(m.site, entry);
    }
    try {
      await entry.mailer.sendMail({
        from: senders.mailFrom,
        to: m.recipient,
        subject: body.subject,
        text: body.text,
        ...(body.html === null ? {} : { html: body.html }),
        // The same on every attempt: a receiver (or its spam filter) can drop a second copy.
        messageId: `<${m.id}@user-accounts>`,
        headers: { 'Auto-Submitted': 'auto-generated' },
      });
      return { ok: true };
    } catch (error) {
      return classifyMailError(error);
    }
  }

  const loop = startClaimLoop<Claimed>({
    logger,
    what: 'message',
    concurrency,
    pollMs: options.pollMs ?? 1_000,
    claim: (room) => claim(db, room, leaseSeconds, perSite),
    attempt: send,
  });
  return {
    kick: loop.kick,
    async stop() {
      await loop.stop();
      for (const { mailer } of mailers.values()) mailer.close();
    },
  };
}
