// POST /api/1/webhooks/deliveries/replay: the delivery's event queued to its endpoint again (202),
// or the delivery of it already pending there (200); bounded per site (deliveries.ts).
import type { components } from '@user-accounts/client';
import { ApiError, eventsExpired } from '../../errors.ts';
import { MAX_PENDING_FOR_REPLAY, replayDelivery } from '../../events/webhooks/deliveries.ts';
import { defineOperation } from '../define-operation.ts';
import { webhookNotFound } from './list-webhook-deliveries.ts';
import { validBody } from './shared.ts';

type ReplayWebhookDeliveryResponse = components['schemas']['ReplayWebhookDeliveryResponse'];

export const replayWebhookDelivery = defineOperation({
  name: 'replayWebhookDelivery',
  method: 'POST',
  path: '/api/1/webhooks/deliveries/replay',
  scope: 'events',
  request: { body: 'ReplayWebhookDeliveryRequest' },
  parse: (c) => validBody(c, 'ReplayWebhookDeliveryRequest'),
  async handle(c, { deliveryId }) {
    const token = c.get('token');
    const source = { site: token.site, tokenId: token.id, requestId: c.get('requestId') };
    const { database, transactions } = c.get('deps');
    // A write in a transaction of its own, which queues on the site's replay lock: in the site's
    // share of the pool as every other write is (limits/transactions.ts).
    const leave = await transactions?.enter(token.site, c.get('deadline').signal);
    let done: Awaited<ReturnType<typeof replayDelivery>>;
    try {
      done = await replayDelivery(database.db, source, deliveryId);
    } finally {
      leave?.();
    }
    switch (done.outcome) {
      case 'not_found':
        throw webhookNotFound('delivery');
      case 'expired':
        throw eventsExpired('The event of this delivery is past the retention and was removed.');
      case 'too_many':
        throw new ApiError(
          'too_many_deliveries_pending',
          `The site has ${MAX_PENDING_FOR_REPLAY} webhook deliveries pending or more; replay once they are sent.`,
        );
      case 'pending':
        return c.json(
          {
            result: { delivery: done.delivery, status: 'delivery already pending' },
          } satisfies ReplayWebhookDeliveryResponse,
          200,
        );
      case 'replayed':
        return c.json(
          { result: { delivery: done.delivery, status: 'delivery replayed' } } satisfies ReplayWebhookDeliveryResponse,
          202,
        );
    }
  },
});
