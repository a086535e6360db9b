// GET /api/1/webhooks: the token's site's webhook endpoints, oldest first, never their secrets.
import type { components } from '@user-accounts/client';
import { siteEndpoints } from '../../events/webhooks/deliveries.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type ListWebhookEndpointsResponse = components['schemas']['ListWebhookEndpointsResponse'];

const PATH = '/api/1/webhooks';

export const listWebhookEndpoints = defineOperation({
  name: 'listWebhookEndpoints',
  method: 'GET',
  path: PATH,
  scope: 'events',
  request: { query: true },
  // No parameters: an unknown one is refused as everywhere.
  parse: (c) => validQuery<Record<string, never>>(c, PATH),
  async handle(c) {
    const endpoints = await siteEndpoints(c.get('deps').database.db, c.get('token').site);
    return c.json({ result: { endpoints } } satisfies ListWebhookEndpointsResponse, 200);
  },
});
