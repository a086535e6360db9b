import { EXPORT_OMITS, exportLine, exportPages } from '../../accounts/listing.ts';
import { describeError } from '../../errors.ts';
import { defineOperation } from '../define-operation.ts';
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
    await runWrite(c, { userId: undefined, status: 200, outcome: 'export started' }, async () => true);
    const pages = exportPages(db, site);
    const encoder = new TextEncoder();
    // Pulled: the next page is read only once the client has taken the last (one page ahead at
    // most), and a client that stops reading stops the export.
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const next = await pages.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value.map(exportLine).join('')));
        } catch (error) {
          c.get('log').warn({ err: describeError(error) }, 'export ended early');
          controller.error(error);
        }
      },
      async cancel() {
        await pages.return(undefined);
      },
    });
    // What the lines do not carry, before the first of them (an NDJSON line is an import row).
    return c.body(body, 200, { 'Content-Type': 'application/x-ndjson', 'Export-Omits': EXPORT_OMITS.join(', ') });
  },
});
