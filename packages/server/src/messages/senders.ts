// A site's senders (issue 60, point 1), as the operator configures them (`cli site set
// --mail-from --mail-transport --sms-transport --link-origins`): checked here, kept in
// site_senders with the mail password and the text API's key sealed under FACTOR_ENCRYPTION_KEY's
// ring (kernel/secret-box.ts), bound to the site and the channel (a sealed value copied onto
// another site's row does not open there). Nothing here returns a secret but openSenders, which
// only the sending worker calls.
import { eq, sql } from 'drizzle-orm';
import addressparser from 'nodemailer/lib/addressparser';
import type { Db } from '../db/client.ts';
import { siteSenders } from '../db/schema.ts';
import { sealingRingFor } from '../kernel/deployment-keys.ts';
import { type KeyRing, open, seal } from '../kernel/secret-box.ts';

/** A refused option: its message names the option and says what would be right. */
export class SenderOptionError extends Error {
  override name = 'SenderOptionError';
}

const LOOPBACK = new Set(['127.0.0.1', '[::1]', '::1', 'localhost']);
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export const isLoopback = (host: string) => LOOPBACK.has(host);

/** What nodemailer is told of a site's SMTP server (the sending worker). */
export interface MailTransport {
  host: string;
  port: number;
  /** smtps://: TLS from the first byte; smtp://: STARTTLS, required unless the host is loopback. */
  secure: boolean;
  user: string | undefined;
  loopback: boolean;
}

/**
 * `smtp://[user@]host[:port]` (STARTTLS required, port 587 by default) or `smtps://[user@]host[:port]`
 * (TLS, 465); a plain connection only to a loopback host. No password in the URL: it would be in
 * the shell's history; it comes from a file or the environment. Answers the URL as it is kept.
 */
export function checkMailTransport(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SenderOptionError(
      `--mail-transport must be a URL such as smtp://user@smtp.example.com:587 (got "${raw}")`,
    );
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:')
    throw new SenderOptionError(
      `--mail-transport must be smtp:// (STARTTLS) or smtps:// (TLS) (got ${url.protocol}//)`,
    );
  if (url.password !== '')
    throw new SenderOptionError(
      '--mail-transport must not hold the password: give it with --mail-password-file FILE or MAIL_TRANSPORT_PASSWORD',
    );
  if (url.hostname === '') throw new SenderOptionError('--mail-transport needs a host');
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '')
    throw new SenderOptionError('--mail-transport is scheme://[user@]host[:port] alone: no path, query or fragment');
  return `${url.protocol}//${url.username === '' ? '' : `${url.username}@`}${url.host}`;
}

/** The kept URL as nodemailer's options. */
export function mailTransportOf(kept: string): MailTransport {
  const url = new URL(kept);
  const secure = url.protocol === 'smtps:';
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port === '' ? (secure ? 465 : 587) : Number(url.port),
    secure,
    user: url.username === '' ? undefined : decodeURIComponent(url.username),
    loopback: isLoopback(url.hostname),
  };
}

/** `Shop <no-reply@shop.example>` or a bare address: one mailbox, no control characters. */
export function checkMailFrom(raw: string): string {
  const parsed = addressparser(raw, { flatten: true });
  const one = parsed.length === 1 ? parsed[0] : undefined;
  if (
    one === undefined ||
    CONTROL.test(raw) ||
    raw.length > 200 ||
    !/^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/.test(one.address ?? '')
  )
    throw new SenderOptionError(`--mail-from must be one address, as "Shop <no-reply@shop.example>" (got "${raw}")`);
  return raw.trim();
}

/** `https://shop.example[,…]`: origins alone (http only on a loopback host), at most 10. */
export function checkLinkOrigins(raw: string): string[] {
  const list = raw
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '');
  if (list.length > 10) throw new SenderOptionError('--link-origins takes at most 10 origins');
  for (const origin of list) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {}
    if (
      url === undefined ||
      url.origin !== origin ||
      !(url.protocol === 'https:' || (url.protocol === 'http:' && isLoopback(url.hostname)))
    )
      throw new SenderOptionError(
        `--link-origins must be origins such as https://shop.example (no path; http:// only on a loopback host) (got "${origin}")`,
      );
  }
  return list;
}

/** A text-message API: where to POST, the header its key goes in, and the JSON body's template. */
export interface SmsTransport {
  url: string;
  header: string;
  body: string;
}

/** The body of Twilio's shape when none is given: {{to}} and {{text}} are filled in, JSON-escaped. */
export const DEFAULT_SMS_BODY = '{"To":"{{to}}","Body":"{{text}}"}';

export function checkSmsTransport(url: string, header: string | undefined, body: string | undefined): SmsTransport {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {}
  if (
    parsed === undefined ||
    !(parsed.protocol === 'https:' || (parsed.protocol === 'http:' && isLoopback(parsed.hostname))) ||
    parsed.username !== '' ||
    parsed.password !== ''
  )
    throw new SenderOptionError(
      `--sms-transport must be an https:// URL without credentials (http:// only on a loopback host) (got "${url}")`,
    );
  const name = header ?? 'Authorization';
  if (!/^[A-Za-z0-9-]{1,64}$/.test(name))
    throw new SenderOptionError(`--sms-key-header must be a header name such as Authorization (got "${name}")`);
  const template = body ?? DEFAULT_SMS_BODY;
  const sample = template.replaceAll('{{to}}', '+447700900000').replaceAll('{{text}}', 'sample');
  let json: unknown;
  try {
    json = JSON.parse(sample);
  } catch {
    throw new SenderOptionError('--sms-body must be a JSON object once {{to}} and {{text}} are filled in');
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json) || !template.includes('{{text}}'))
    throw new SenderOptionError('--sms-body must be a JSON object with {{to}} and {{text}} in its strings');
  if (!template.includes('{{to}}')) throw new SenderOptionError('--sms-body must hold {{to}}, the phone number');
  return { url: parsed.href, header: name, body: template };
}

/** `GB,FR`: ISO 3166-1 alpha-2 codes. */
export function checkSmsCountries(raw: string): string[] {
  const list = raw.split(',').map((c) => c.trim().toUpperCase());
  if (list.length === 0 || list.some((c) => !/^[A-Z]{2}$/.test(c)))
    throw new SenderOptionError(`--sms-countries must be ISO 3166 country codes such as GB,FR (got "${raw}")`);
  return [...new Set(list)];
}

/** A password or key as read from a file or the environment: one line, its newline dropped. */
export function checkSecret(raw: string, what: string): string {
  const secret = raw.replace(/\r?\n$/, '');
  if (secret === '' || secret.length > 1024 || /[\r\n]/.test(secret))
    throw new SenderOptionError(`${what} must be one line of 1 to 1024 characters`);
  return secret;
}

/** What `cli site set` changes of the senders; a field left out is kept, null removes it. */
export interface SenderChanges {
  mailFrom?: string;
  mailTransport?: string | null;
  mailPassword?: string;
  sms?: SmsTransport | null;
  smsKey?: string;
  smsCountries?: string[];
  smsDailyLimit?: number;
  dailyLimit?: number;
  linkOrigins?: string[];
}

const contextOf = (site: string, channel: 'mail' | 'sms') => `sender ${site} ${channel}`;
const senderRing = (db: Db, ring: KeyRing | undefined) => sealingRingFor(db, ring, 'sender_secret');

export async function setSenders(db: Db, site: string, changes: SenderChanges, ring: KeyRing | undefined) {
  const sealing =
    changes.mailPassword !== undefined || changes.smsKey !== undefined ? await senderRing(db, ring) : undefined;
  const set = {
    ...(changes.mailFrom === undefined ? {} : { mailFrom: changes.mailFrom }),
    ...(changes.mailTransport === undefined ? {} : { mailTransport: changes.mailTransport }),
    // A transport removed takes its password with it; a new one without a password has none.
    ...(changes.mailTransport === null || (changes.mailTransport !== undefined && changes.mailPassword === undefined)
      ? { mailPasswordSealed: null }
      : {}),
    ...(changes.mailPassword === undefined
      ? {}
      : { mailPasswordSealed: seal(sealing!, changes.mailPassword, contextOf(site, 'mail')) }),
    ...(changes.sms === undefined
      ? {}
      : changes.sms === null
        ? { smsUrl: null, smsHeader: null, smsBody: null, smsKeySealed: null }
        : { smsUrl: changes.sms.url, smsHeader: changes.sms.header, smsBody: changes.sms.body }),
    ...(changes.smsKey === undefined ? {} : { smsKeySealed: seal(sealing!, changes.smsKey, contextOf(site, 'sms')) }),
    ...(changes.smsCountries === undefined ? {} : { smsCountries: changes.smsCountries }),
    ...(changes.smsDailyLimit === undefined ? {} : { smsDailyLimit: changes.smsDailyLimit }),
    ...(changes.dailyLimit === undefined ? {} : { dailyLimit: changes.dailyLimit }),
    ...(changes.linkOrigins === undefined ? {} : { linkOrigins: changes.linkOrigins }),
  };
  await db
    .insert(siteSenders)
    .values({ site, ...set })
    .onConflictDoUpdate({ target: siteSenders.site, set: { ...set, updatedAt: sql`now()` } });
}

/** A site's senders without their secrets: what a request checks `send` against, and the CLI shows. */
export interface Senders {
  mailFrom: string | null;
  mailTransport: string | null;
  hasMailPassword: boolean;
  sms: SmsTransport | null;
  smsCountries: string[];
  smsDailyLimit: number | null;
  dailyLimit: number | null;
  linkOrigins: string[];
  updatedAt: Date;
}

export async function sendersOf(db: Db, site: string): Promise<Senders | undefined> {
  const [row] = await db.select().from(siteSenders).where(eq(siteSenders.site, site));
  if (row === undefined) return undefined;
  return {
    mailFrom: row.mailFrom,
    mailTransport: row.mailTransport,
    hasMailPassword: row.mailPasswordSealed !== null,
    sms:
      row.smsUrl === null
        ? null
        : { url: row.smsUrl, header: row.smsHeader ?? 'Authorization', body: row.smsBody ?? '' },
    smsCountries: row.smsCountries ?? [],
    smsDailyLimit: row.smsDailyLimit,
    dailyLimit: row.dailyLimit,
    linkOrigins: row.linkOrigins,
    updatedAt: new Date(row.updatedAt),
  };
}

/** Whether the site can send on `channel`: a transport (and for mail, a From). */
export const canSend = (senders: Senders | undefined, channel: 'email' | 'sms') =>
  senders !== undefined &&
  (channel === 'email' ? senders.mailTransport !== null && senders.mailFrom !== null : senders.sms !== null);

/** The senders with their secrets opened: for the sending worker only (never an answer, a log line or an audit row). */
export async function openSenders(
  db: Db,
  site: string,
  ring: KeyRing | undefined,
): Promise<(Senders & { mailPassword?: string; smsKey?: string }) | undefined> {
  const [row] = await db
    .select({ mail: siteSenders.mailPasswordSealed, sms: siteSenders.smsKeySealed })
    .from(siteSenders)
    .where(eq(siteSenders.site, site));
  const senders = await sendersOf(db, site);
  if (row === undefined || senders === undefined) return undefined;
  const sealing = row.mail !== null || row.sms !== null ? await senderRing(db, ring) : undefined;
  return {
    ...senders,
    ...(row.mail === null ? {} : { mailPassword: open(sealing!, row.mail, contextOf(site, 'mail')) }),
    ...(row.sms === null ? {} : { smsKey: open(sealing!, row.sms, contextOf(site, 'sms')) }),
  };
}
