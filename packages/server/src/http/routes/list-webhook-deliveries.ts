// GET /api/1/webhooks/deliveries?endpointId=…: one of the site's endpoints' deliveries, newest
// first, a page at a time (keyset on the delivery's id), optionally one state only.
import type { components } from '@user-accounts/client';
import { ApiError } from '../../errors.ts';
import { type DeliveryState, deliveriesPage } from '../../events/webhooks/deliveries.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type ListWebhookDeliveriesResponse = components['schemas']['ListWebhookDeliveriesResponse'];

const PATH = '/api/1/webhooks/deliveries';
const DEFAULT_LIMIT = 20;

export const webhookNotFound = (what: 'endpoint' | 'delivery') =>
  new ApiError('webhook_not_found', `The site has no webhook ${what} with this id.`);

interface Query {
  endpointId: string;
  state?: DeliveryState;
  limit?: number;
  before?: string;
}

export const listWebhookDeliveries = defineOperation({
  name: 'listWebhookDeliveries',
  method: 'GET',
  path: PATH,
  scope: 'events',
  request: { query: true },
  parse: (c) => validQuery<Query>(c, PATH),
  async handle(c, { endpointId, state, limit = DEFAULT_LIMIT, before }) {
    const page = await deliveriesPage(c.get('deps').database.db, c.get('token').site, {
      endpointId,
      state,
      limit,
      before,
    });
    if (page === undefined) throw webhookNotFound('endpoint');
    return c.json({ result: page } satisfies ListWebhookDeliveriesResponse, 200);
  },
});
