// A `send` made ready (issue 60, point 3), for `user/ticket` and `org/invitation/create` alike:
// every check before anything is written (the channel's transport, 409 no_transport; the link on
// the site's origins; the phone's country; the budgets, 429), the template and the site's name
// read, the ring that seals the body opened. What is left is `enqueue`, in the caller's own
// transaction, once the secret exists: the message rendered with it and written to the outbox.
import { eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { siteSettings } from '../db/schema.ts';
import type { KeyRing } from '../kernel/secret-box.ts';
import {
  type Channel,
  checkBudgets,
  checkPhoneCountry,
  DEFAULT_BUDGETS,
  enqueueMessage,
  linkMaker,
  type MessageBudgets,
  messageRing,
  requireTransport,
} from './outbox.ts';
import { sendersOf } from './senders.ts';
import { carriesCode, humanDuration, type MessagePurpose, render, templateFor, type Variables } from './templates.ts';

export interface SendAsked {
  channel: Channel;
  lang?: string | undefined;
  linkTemplate?: string | undefined;
}

export interface SendPlan {
  site: string;
  /** The account the message belongs to; null for an invitation to an address no account holds. */
  userId: string | null;
  /** An invitation's organization. */
  orgId?: string | undefined;
  /** The purpose as the template names it (a login code is `login_code`). */
  template: MessagePurpose;
  /** The purpose as message/list and the events name it (a login code is `login`). */
  listed: string;
  /** The email or phone the message goes to (already the channel's). */
  recipient: string;
}

export interface ReadySend {
  /** Renders the message with the secret and writes it in `tx`; answers the message's id. */
  enqueue(
    tx: Db,
    secret: { ticket: string; expiresIn: number; expiresAt: Date },
    values: Omit<Variables, 'siteName' | 'link' | 'code' | 'expiresIn' | 'expiresAt'>,
  ): Promise<string>;
}

export async function prepareSend(
  db: Db,
  ring: KeyRing | undefined,
  budgets: MessageBudgets | undefined,
  plan: SendPlan,
  send: SendAsked,
): Promise<ReadySend> {
  const senders = await sendersOf(db, plan.site);
  requireTransport(senders, send.channel);
  const link = carriesCode(plan.template) ? undefined : linkMaker(send.linkTemplate, senders);
  if (send.channel === 'sms') checkPhoneCountry(plan.recipient, senders!);
  await checkBudgets(
    db,
    plan.site,
    { userId: plan.userId, recipient: plan.recipient },
    send.channel,
    senders!,
    budgets ?? DEFAULT_BUDGETS,
  );
  const { template } = await templateFor(db, plan.site, plan.template, send.lang);
  const [settings] = await db
    .select({ name: siteSettings.displayName })
    .from(siteSettings)
    .where(eq(siteSettings.site, plan.site));
  const sealing = await messageRing(db, ring);
  return {
    async enqueue(tx, secret, values) {
      const rendered = render(template, {
        ...values,
        siteName: settings?.name ?? plan.site,
        ...(link === undefined ? { code: secret.ticket } : { link: link(secret.ticket) }),
        expiresIn: humanDuration(secret.expiresIn),
        expiresAt: secret.expiresAt.toISOString(),
      });
      return enqueueMessage(tx, sealing, {
        site: plan.site,
        userId: plan.userId,
        orgId: plan.orgId,
        channel: send.channel,
        purpose: plan.listed,
        recipient: plan.recipient,
        rendered,
      });
    },
  };
}
