import { EXPORT_OMITS, exportPages } from '../../accounts/listing.ts';
import { describeError } from '../../errors.ts';
import { defineOperation } from '../define-operation.ts';
import { enterHeavyRead } from '../heavy-read.ts';
import { runWrite } from '../run-write.ts';
import { validQuery } from './shared.ts';

const EXPORT_USERS_PATH = '/api/1/user/export';

export const exportUsers = defineOperation({
  name: 'exportUsers',
  method: 'GET',
  path: EXPORT_USERS_PATH,
  scope: 'export',
  request: { query: true },
  // Not a change, but a disclosure of every hash: the audit trail records it as writes are.
  writes: 'export',
  parse: (c) => validQuery<Record<string, never>>(c, EXPORT_USERS_PATH),
  async handle(c) {
    const db = c.get('deps').database.db;
    const site = c.get('token').site;
    const headers = { 'Content-Type': 'application/x-ndjson', 'Export-Omits': EXPORT_OMITS.join(', ') };
    // HEAD: the headers alone (audited as asked), no place taken. Hono runs a GET's handler for
    // HEAD and drops the body unread: a stream would never be pulled nor cancelled, and its place
    // would be held for good.
    if (c.req.method === 'HEAD') {
      await runWrite(c, { userId: undefined, status: 200, outcome: 'export headers' }, async () => true);
      return c.body(null, 200, headers);
    }
    // A place among the site's exports (HEAVY_READS_PER_SITE), held until the stream ends.
    const place = await enterHeavyRead(c, c.get('deps').heavyExports);
    try {
      await runWrite(c, { userId: undefined, status: 200, outcome: 'export started' }, async () => true);
      // Answered already (its deadline passed, or its client went away): a stream no one reads
      // would hold the place for good.
      c.get('deadline').signal.throwIfAborted();
    } catch (error) {
      place.leave();
      throw error;
    }
    const pages = exportPages(db, site);
    const encoder = new TextEncoder();
    // Pulled: the next page is read only once the client has taken the last (one page ahead at
    // most), and a client that stops reading stops the export.
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const next = await pages.next();
          if (next.done) {
            place.leave();
            controller.close();
          } else controller.enqueue(encoder.encode(next.value.lines));
        } catch (error) {
          place.leave();
          c.get('log').warn({ err: describeError(error) }, 'export ended early');
          controller.error(error);
        }
      },
      async cancel() {
        place.leave();
        await pages.return(undefined);
      },
    });
    // What the lines do not carry, before the first of them (an NDJSON line is an import row).
    return c.body(body, 200, headers);
  },
});
