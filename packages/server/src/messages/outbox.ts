// The message outbox (issue 60, points 3–6): a message is rendered and written here in the
// caller's transaction (the ticket's own: both or neither), its body sealed under the
// deployment's ring, bound to the message's id; the worker (worker.ts) sends it from any server.
// Also the budgets a `send` is held to before anything is written (an account's messages an
// hour, the site's a day, its texts a day), a `send`'s checks (the channel's transport, the
// link on the site's origins, the phone's country), an account's messages as message/list
// shows them. Whether an account's email is deliverable: kernel/email-deliverable.ts.
import { and, desc, eq, gt, lt, sql } from 'drizzle-orm';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { type Db, rows } from '../db/client.ts';
import { messages } from '../db/schema.ts';
import { ApiError, invalidRequest } from '../errors.ts';
import { sealingRingFor } from '../kernel/deployment-keys.ts';
import { uuidv7 } from '../kernel/ids.ts';
import { type KeyRing, open, seal } from '../kernel/secret-box.ts';
import { canSend, type Senders } from './senders.ts';
import type { Rendered } from './templates.ts';

export type Channel = 'email' | 'sms';

/** The budgets of `send` (MESSAGE_ACCOUNT_HOURLY_LIMIT, MESSAGE_SITE_DAILY_LIMIT). */
export interface MessageBudgets {
  accountHourly: number;
  siteDaily: number;
}

export const DEFAULT_BUDGETS: MessageBudgets = { accountHourly: 5, siteDaily: 10_000 };

/** Kept this long after they were made: the recipient and the status (the body goes once sent). */
export const KEPT_DAYS = 30;

export const bodyContext = (id: string) => `message ${id}`;
export const messageRing = (db: Db, ring: KeyRing | undefined) => sealingRingFor(db, ring, 'message_body');

export const noTransport = (channel: Channel) =>
  new ApiError(
    'no_transport',
    channel === 'email'
      ? 'The site has no email transport: configure one with cli site set --mail-from --mail-transport, or send the ticket yourself (no send).'
      : 'The site has no text-message transport: configure one with cli site set --sms-transport, or send the code yourself (no send).',
  );

/**
 * The link a message carries: `template` with `{ticket}` replaced, https on one of the site's
 * link origins. A 400 at /send/linkTemplate saying what would be right, else the function that
 * fills the ticket in.
 */
export function linkMaker(template: string | undefined, senders: Senders | undefined): (ticket: string) => string {
  const pointer = '/send/linkTemplate';
  const refuse = (message: string) =>
    invalidRequest('The link template cannot be used.', [{ pointer, code: 'not_allowed', message }]);
  if (template === undefined)
    throw invalidRequest('A link needs a link template.', [
      { pointer, code: 'required', message: 'is required for a link, e.g. https://shop.example/reset?ticket={ticket}' },
    ]);
  if (template.split('{ticket}').length !== 2) throw refuse('must hold {ticket} exactly once');
  let url: URL | undefined;
  try {
    url = new URL(template.replace('{ticket}', 'TICKET'));
  } catch {}
  if (url === undefined || url.protocol !== 'https:') throw refuse('must be an https URL');
  const origins = senders?.linkOrigins ?? [];
  if (!origins.includes(url.origin))
    throw refuse(
      origins.length === 0
        ? 'must be on one of the site’s link origins, and it has none (cli site set --link-origins)'
        : `must be on one of the site’s link origins (${origins.join(', ')})`,
    );
  return (ticket) => template.replace('{ticket}', encodeURIComponent(ticket));
}

/** Refuses a send on a channel the site cannot send on (409 no_transport). */
export function requireTransport(senders: Senders | undefined, channel: Channel): void {
  if (!canSend(senders, channel)) throw noTransport(channel);
}

/** A phone a text may go to: a valid number of one of the site's countries; else 400 at /send/channel. */
export function checkPhoneCountry(phone: string, senders: Senders): void {
  const parsed = parsePhoneNumberFromString(phone);
  const country = parsed?.country;
  if (country === undefined || !parsed!.isValid())
    throw invalidRequest('The account’s phone has no known country: no text is sent to it.', [
      { pointer: '/send/channel', code: 'not_allowed', message: 'the phone’s country is unknown' },
    ]);
  if (!senders.smsCountries.includes(country))
    throw invalidRequest(`Texts go only to the site’s countries (${senders.smsCountries.join(', ') || 'none'}).`, [
      {
        pointer: '/send/channel',
        code: 'not_allowed',
        message: `the phone is in ${country}, not one of the site’s countries`,
      },
    ]);
}

const limitReached = (code: 'message_limit_reached' | 'sms_limit_reached', detail: string, retryAfter: number) =>
  new ApiError(code, detail, { headers: { 'Retry-After': String(Math.max(1, retryAfter)) } });

/**
 * The budgets, before anything is written: the account's messages of the last hour, the site's
 * of the last day (every channel), its texts of the last day. 429 with Retry-After: when the
 * oldest message of the window leaves it.
 */
export async function checkBudgets(
  db: Db,
  site: string,
  who: { userId: string | null; recipient: string },
  channel: Channel,
  senders: Senders,
  budgets: MessageBudgets,
): Promise<void> {
  // An account's messages; an invitation's address with no account, its own (messages_recipient_idx).
  const mine = who.userId === null ? sql`lower(recipient) = lower(${who.recipient})` : sql`user_id = ${who.userId}`;
  const [counts] = await rows<{
    account: number;
    account_oldest: string | null;
    site: number;
    site_oldest: string | null;
    sms: number;
    sms_oldest: string | null;
  }>(
    db,
    sql`select
      (select count(*)::int from messages where site = ${site} and ${mine} and created_at > now() - interval '1 hour') as account,
      (select extract(epoch from min(created_at) + interval '1 hour' - now())::text from messages
        where site = ${site} and ${mine} and created_at > now() - interval '1 hour') as account_oldest,
      (select count(*)::int from (select 1 from messages where site = ${site} and created_at > now() - interval '1 day'
        limit ${(senders.dailyLimit ?? budgets.siteDaily) + 1}) d) as site,
      (select extract(epoch from min(created_at) + interval '1 day' - now())::text from messages
        where site = ${site} and created_at > now() - interval '1 day') as site_oldest,
      (select count(*)::int from (select 1 from messages where site = ${site} and channel = 'sms' and created_at > now() - interval '1 day'
        limit ${(senders.smsDailyLimit ?? 0) + 1}) d) as sms,
      (select extract(epoch from min(created_at) + interval '1 day' - now())::text from messages
        where site = ${site} and channel = 'sms' and created_at > now() - interval '1 day') as sms_oldest`,
  );
  const wait = (s: string | null) => Math.ceil(Number(s ?? 1));
  if (counts!.account >= budgets.accountHourly)
    throw limitReached(
      'message_limit_reached',
      `This ${who.userId === null ? 'address' : 'account'} was sent ${budgets.accountHourly} messages in the last hour (MESSAGE_ACCOUNT_HOURLY_LIMIT); try again after Retry-After seconds.`,
      wait(counts!.account_oldest),
    );
  const siteDaily = senders.dailyLimit ?? budgets.siteDaily;
  if (counts!.site >= siteDaily)
    throw limitReached(
      'message_limit_reached',
      `The site sent its ${siteDaily} messages of the day (cli site set --daily-limit); try again after Retry-After seconds.`,
      wait(counts!.site_oldest),
    );
  if (channel === 'sms' && counts!.sms >= (senders.smsDailyLimit ?? Number.POSITIVE_INFINITY))
    throw limitReached(
      'sms_limit_reached',
      `The site sent its ${senders.smsDailyLimit} texts of the day (cli site set --sms-daily-limit); try again after Retry-After seconds.`,
      wait(counts!.sms_oldest),
    );
}

export interface Outgoing {
  site: string;
  /** Null: an invitation to an address no account of the site holds (orgId names its organization). */
  userId: string | null;
  orgId?: string | undefined;
  channel: Channel;
  /** The ticket's purpose as the API names it (a login code is `login`), or `invitation`. */
  purpose: string;
  recipient: string;
  rendered: Rendered;
}

/** The body as the outbox keeps it: sealed under the ring, bound to the message's id. */
export const sealBody = (ring: KeyRing, id: string, rendered: Rendered) =>
  seal(ring, JSON.stringify(rendered), bodyContext(id));

/** Writes the message, its body sealed, in the caller's transaction; answers its id. */
export async function enqueueMessage(tx: Db, ring: KeyRing, message: Outgoing): Promise<string> {
  const id = uuidv7();
  await tx.insert(messages).values({
    id,
    site: message.site,
    userId: message.userId,
    orgId: message.orgId ?? null,
    channel: message.channel,
    purpose: message.purpose,
    recipient: message.recipient,
    bodySealed: sealBody(ring, id, message.rendered),
  });
  return id;
}

export const openBody = (ring: KeyRing, id: string, sealed: string) =>
  JSON.parse(open(ring, sealed, bodyContext(id))) as Rendered;

/** A message as message/list shows it (spec: Message): never its body, link or code. */
export interface ListedMessage {
  messageId: string;
  channel: Channel;
  purpose: 'verify_email' | 'verify_phone' | 'reset_password' | 'change_email' | 'login' | 'invitation';
  status: 'queued' | 'sent' | 'failed';
  attempts: number;
  lastError?: string;
  createdAt: string;
  sentAt?: string;
}

const CURSOR = /^([0-9a-f-]{36})$/;

/** The account's messages, newest first (uuidv7 ids: newest is greatest), a page at a time. */
export async function listMessages(
  db: Db,
  site: string,
  userId: string,
  limit: number,
  cursor: string | undefined,
): Promise<{ messages: ListedMessage[]; next: string | null }> {
  let before: string | undefined;
  if (cursor !== undefined) {
    const decoded = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('utf8'))?.[1];
    if (decoded === undefined) throw new ApiError('invalid_cursor', 'The cursor is not one this list gave.');
    before = decoded;
  }
  const found = await db
    .select()
    .from(messages)
    .where(
      and(
        eq(messages.site, site),
        eq(messages.userId, userId),
        gt(messages.createdAt, sql`now() - make_interval(days => ${KEPT_DAYS})`),
        before === undefined ? undefined : lt(messages.id, before),
      ),
    )
    .orderBy(desc(messages.id))
    .limit(limit + 1);
  const page = found.slice(0, limit);
  return {
    messages: page.map((m) => ({
      messageId: m.id,
      channel: m.channel as Channel,
      purpose: m.purpose as ListedMessage['purpose'],
      status: m.status as ListedMessage['status'],
      attempts: m.attempts,
      ...(m.lastError === null ? {} : { lastError: m.lastError }),
      createdAt: new Date(m.createdAt).toISOString(),
      ...(m.sentAt === null ? {} : { sentAt: new Date(m.sentAt).toISOString() }),
    })),
    next: found.length > limit ? Buffer.from(page.at(-1)!.id).toString('base64url') : null,
  };
}
