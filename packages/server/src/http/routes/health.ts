import { serviceUnavailable } from '../../errors.ts';
import type { App } from '../context.ts';

const READY_TIMEOUT_MS = 2_000;

/** Liveness (the process answers) and readiness (the database answers); no token needed. */
export function registerHealth(app: App): void {
  app.get('/healthz', function getHealth(c) {
    return c.json({ status: 'ok' as const }, 200);
  });
  app.get('/readyz', async function getReadiness(c) {
    if (c.get('deps').lifecycle?.draining) throw serviceUnavailable('The server is shutting down.');
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        c.get('deps').database.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('readiness check timed out')), READY_TIMEOUT_MS);
        }),
      ]);
    } catch (error) {
      throw serviceUnavailable('The database does not answer.', error);
    } finally {
      clearTimeout(timer);
    }
    return c.json({ status: 'ok' as const }, 200);
  });
}
