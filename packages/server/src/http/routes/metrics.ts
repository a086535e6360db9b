import { createHash, timingSafeEqual } from 'node:crypto';
import { notFound, unauthorized } from '../../errors.ts';
import type { App } from '../context.ts';
import { bearerChallenge, credentialSent } from '../middleware/auth.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** GET /metrics: off (404, like any unknown path) unless METRICS_TOKEN is set; then that token only. */
export function registerMetrics(app: App): void {
  app.get('/metrics', async function getMetrics(c) {
    const metrics = c.get('deps').metrics;
    if (metrics === undefined) throw notFound(c.req.path);
    const header = c.req.header('authorization');
    const given = /^Bearer +(\S+)$/i.exec(header ?? '')?.[1];
    if (given === undefined || !timingSafeEqual(digest(given), digest(metrics.token))) {
      throw unauthorized(
        bearerChallenge(credentialSent(header)),
        'Metrics need the metrics token: Authorization: Bearer <METRICS_TOKEN>.',
      );
    }
    return c.body(await metrics.collector.registry.metrics(), 200, {
      'Content-Type': metrics.collector.registry.contentType,
    });
  });
}
