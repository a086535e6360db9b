// What the end of a message makes (issue 60, point 5): message.sent, message.failed (given up,
// with the transport's reason) and message.bounced (an email refused for good at send time),
// queued as every event is (kernel/outbox.ts) and numbered by the sequencer; never the body.
import type { Db } from '../db/client.ts';
import { enqueueEvents } from '../kernel/outbox.ts';
import type { MessageOutcomes } from './worker.ts';

export function messageOutcomes(db: Db, numbered: () => void): MessageOutcomes {
  const data = (m: { id: string; userId: string; channel: string; purpose: string }) => ({
    _userId: m.userId,
    messageId: m.id,
    channel: m.channel,
    purpose: m.purpose,
  });
  return {
    async sent(m) {
      await enqueueEvents(db, m.site, [{ type: 'message.sent', userId: m.userId, data: data(m) }]);
      numbered();
    },
    async failed(m) {
      const type = m.bounced ? 'message.bounced' : 'message.failed';
      await enqueueEvents(db, m.site, [
        { type, userId: m.userId, data: { ...data(m), reason: m.reason.slice(0, 500) } },
      ]);
      numbered();
    },
  };
}
