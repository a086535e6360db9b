import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { emailTaken } from '../../accounts/create.ts';
import { codeLockWait, isCode, issueTicket, LIFETIMES, type Purpose } from '../../accounts/tickets.ts';
import { users } from '../../db/schema.ts';
import { ApiError, invalidRequest, tooManyAttempts, userNotFound } from '../../errors.ts';
import { isUuid } from '../../kernel/ids.ts';
import { prepareSend } from '../../messages/compose.ts';
import { carriesCode } from '../../messages/templates.ts';
import type { OpContext } from '../context.ts';
import { defineOperation } from '../define-operation.ts';
import { runWrite } from '../run-write.ts';
import { codeGuardOf, deploymentKeysOfRequest, inReach, isLoginTicket, validBody } from './shared.ts';

type IssueTicketRequest = components['schemas']['IssueTicketRequest'];
type IssueTicketResponse = components['schemas']['IssueTicketResponse'];

const noPhone = () => new ApiError('no_phone', 'The account has no phone to verify.');

export const issueTicketOperation = defineOperation({
  name: 'issueTicket',
  method: 'POST',
  path: '/api/1/user/ticket',
  scope: 'write',
  // A login ticket is part of a login: the verify scope issues it (and no other purpose).
  alsoScope: { scope: 'verify', admits: isLoginTicket },
  request: { body: 'IssueTicketRequest' },
  // No Idempotency-Key: the answer kept for it would keep the secret.
  writes: 'ticket',
  parse(c) {
    const body = c.get('body');
    // Said plainly, before the schema's oneOf would report both fields as missing or one as extra.
    if (body !== null && typeof body === 'object' && !Array.isArray(body) && 'email' in body === '_userId' in body) {
      throw invalidRequest('Name the account by exactly one of _userId or email.', [
        { pointer: '/_userId', code: 'required', message: 'or email is required, not both' },
      ]);
    }
    const input = validBody(c, 'IssueTicketRequest') as IssueTicketRequest & { _userId?: string; email?: string };
    if ((input.purpose === 'change_email') !== (input.newEmail !== undefined)) {
      throw invalidRequest('newEmail goes with change_email, and only with it.', [
        {
          pointer: '/newEmail',
          code: input.newEmail === undefined ? 'required' : 'not_allowed',
          message: input.newEmail === undefined ? 'is required for change_email' : 'is for change_email only',
        },
      ]);
    }
    if (input.delivery !== undefined && input.purpose !== 'login') {
      throw invalidRequest('delivery goes with login, and only with it.', [
        { pointer: '/delivery', code: 'not_allowed', message: 'is for login only' },
      ]);
    }
    // A login code is a purpose of its own where it is stored (accounts/tickets.ts).
    const purpose: Purpose = input.purpose === 'login' && input.delivery === 'code' ? 'login_code' : input.purpose;
    if (input.send !== undefined) {
      const code = carriesCode(purpose);
      if (input.send.channel === 'sms' && !code)
        throw invalidRequest('A text carries a code, not a link.', [
          { pointer: '/send/channel', code: 'not_allowed', message: 'sms is for verify_phone and a login code' },
        ]);
      if (input.send.channel === 'email' && purpose === 'verify_phone')
        throw invalidRequest('A phone is verified by a text to it.', [
          { pointer: '/send/channel', code: 'not_allowed', message: 'verify_phone goes by sms' },
        ]);
      if (code && input.send.linkTemplate !== undefined)
        throw invalidRequest('A code needs no link: the message carries the code.', [
          { pointer: '/send/linkTemplate', code: 'not_allowed', message: 'is for a link, not a code' },
        ]);
    }
    const max = LIFETIMES[purpose][1];
    if (input.expiresIn !== undefined && input.expiresIn > max) {
      const what = purpose === 'login_code' ? 'a login code' : input.purpose;
      throw invalidRequest('The ticket would live longer than its purpose allows.', [
        { pointer: '/expiresIn', code: 'not_allowed', message: `must be at most ${max} for ${what}` },
      ]);
    }
    return { ...input, stored: purpose };
  },
  // The spec documents one example of the answer per purpose, each named after it.
  mockExample: (input) => (input.send === undefined ? input.purpose : 'sent'),
  async handle(c, input) {
    const { database } = c.get('deps');
    const site = c.get('token').site;
    const purpose = input.stored;
    if (input._userId !== undefined && !isUuid(input._userId)) throw userNotFound();
    const named =
      input._userId !== undefined ? eq(users.id, input._userId) : sql`lower(${users.email}) = lower(${input.email!})`;
    const [account] = await database.db
      .select({ id: users.id, phone: users.phone, email: users.email, name: users.name })
      .from(users)
      .where(and(named, inReach(c)))
      .limit(1);
    if (account === undefined) throw userNotFound();
    c.get('write').userId = account.id;
    if (purpose === 'verify_phone' && account.phone === null) throw noPhone();
    // No new code while the account's wrong codes have it locked (issue 57, G4): a code would
    // give the guesser five more tries. A link (256 bits) is no guess, and is issued.
    if (isCode(purpose)) {
      const guard = codeGuardOf(c);
      const wait = await codeLockWait(guard, site, account.id);
      if (wait > 0) throw tooManyAttempts(wait, { ...guard.policy, name: 'failed_second_factor' });
    }
    if (input.newEmail !== undefined) {
      const [taken] = await database.db
        .select({ id: users.id })
        .from(users)
        .where(
          and(inReach(c), sql`lower(${users.email}) = lower(${input.newEmail})`, sql`${users.id} <> ${account.id}`),
        )
        .limit(1);
      if (taken !== undefined) throw emailTaken();
    }
    const expiresIn = input.expiresIn ?? LIFETIMES[purpose][0];
    const keys = await deploymentKeysOfRequest(c);
    if (input.send !== undefined) return sendTicket(c, input, account, purpose, expiresIn, keys);
    const issued = await runWrite(c, { userId: account.id, status: 201, outcome: 'ticket issued' }, (tx) =>
      issueTicket(tx, { id: account.id, site }, purpose, expiresIn, input.newEmail, keys),
    );
    const result = {
      _userId: account.id,
      ticket: issued!.ticket,
      purpose: input.purpose,
      expiresAt: issued!.expiresAt.toISOString(),
      status: 'ticket issued' as const,
    };
    c.header('Cache-Control', 'no-store');
    return c.json({ result } satisfies IssueTicketResponse, 201);
  },
});

type Parsed = IssueTicketRequest & { _userId?: string; email?: string; stored: Purpose };

/**
 * `send` (issue 60, point 3): the ticket issued and its message written to the outbox in one
 * transaction, the answer without the ticket. The checks first, nothing written when one fails
 * (messages/compose.ts): the channel's transport (409 no_transport), the link on the site's
 * origins, the phone's country, the budgets (429). The answer returns once the message is
 * queued: the worker sends it.
 */
async function sendTicket(
  c: OpContext,
  input: Parsed,
  account: { id: string; phone: string | null; email: string; name: string | null },
  purpose: Purpose,
  expiresIn: number,
  keys: Awaited<ReturnType<typeof deploymentKeysOfRequest>>,
) {
  const { database, factorKeys, messages } = c.get('deps');
  const site = c.get('token').site;
  const send = input.send!;
  const recipient = send.channel === 'sms' ? account.phone : (input.newEmail ?? account.email);
  if (recipient === null) throw noPhone();
  const ready = await prepareSend(
    database.db,
    factorKeys,
    messages?.budgets,
    { site, userId: account.id, template: purpose, listed: input.purpose, recipient },
    send,
  );
  const sent = await runWrite(c, { userId: account.id, status: 201, outcome: 'ticket sent' }, async (tx) => {
    const issued = await issueTicket(tx, { id: account.id, site }, purpose, expiresIn, input.newEmail, keys);
    const messageId = await ready.enqueue(
      tx,
      { ticket: issued.ticket, expiresIn, expiresAt: issued.expiresAt },
      { email: input.newEmail ?? account.email, name: account.name ?? '' },
    );
    return { messageId, expiresAt: issued.expiresAt };
  });
  // Off the request's path: the answer never waits for the transport.
  messages?.kick();
  const result = {
    _userId: account.id,
    messageId: sent!.messageId,
    purpose: input.purpose,
    expiresAt: sent!.expiresAt.toISOString(),
    status: 'ticket sent' as const,
  };
  c.header('Cache-Control', 'no-store');
  return c.json({ result } satisfies IssueTicketResponse, 201);
}
