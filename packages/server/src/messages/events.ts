// What the end of a message makes (issue 60, point 5): message.sent, message.failed (given up,
// with the transport's reason) and message.bounced (an email refused for good at send time),
// queued as every event is (kernel/outbox.ts) and numbered by the sequencer; never the body.
// The subject is the account; an invitation's is its organization (as org.invitation_created's),
// with the account in the data when one of the site holds the address.
import type { Db } from '../db/client.ts';
import { enqueueEvents } from '../kernel/outbox.ts';
import type { About, MessageOutcomes } from './worker.ts';

export function messageOutcomes(db: Db, numbered: () => void): MessageOutcomes {
  const data = (m: About) => ({
    ...(m.userId === null ? {} : { _userId: m.userId }),
    ...(m.orgId === null ? {} : { orgId: m.orgId }),
    messageId: m.id,
    channel: m.channel,
    purpose: m.purpose,
  });
  const subject = (m: About) => (m.purpose === 'invitation' && m.orgId !== null ? m.orgId : (m.userId ?? m.orgId!));
  return {
    async sent(m) {
      await enqueueEvents(db, m.site, [{ type: 'message.sent', userId: subject(m), data: data(m) }]);
      numbered();
    },
    async failed(m) {
      const type = m.bounced ? 'message.bounced' : 'message.failed';
      await enqueueEvents(db, m.site, [
        { type, userId: subject(m), data: { ...data(m), reason: m.reason.slice(0, 500) } },
      ]);
      numbered();
    },
  };
}
