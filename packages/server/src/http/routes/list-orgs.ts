import type { components } from '@user-accounts/client';
import { checkCursorShape, cursorsOf } from '../../accounts/listing.ts';
import { orgsPage } from '../../orgs/orgs.ts';
import { toOrg } from '../../orgs/rules.ts';
import { defineOperation } from '../define-operation.ts';
import { inHeavyRead } from '../heavy-read.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/list';

type ListOrgsResponse = components['schemas']['ListOrgsResponse'];
type ListQuery = { q?: string; order?: 'asc' | 'desc'; limit?: number; after?: string };

export const listOrgs = defineOperation({
  name: 'listOrgs',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse(c) {
    const query = validQuery<ListQuery>(c, PATH);
    checkCursorShape(query.after);
    return query;
  },
  async handle(c, { q, order = 'asc', limit = 100, after }) {
    const db = c.get('deps').database.db;
    const site = c.get('token').site;
    const cursors = await cursorsOf(db);
    // A cursor is good for its site, its q and its order only (user/list's signed cursors).
    const scope = JSON.stringify(['org/list', site, order, q ?? null]);
    const position = after === undefined ? undefined : cursors.read(after, scope);
    const rows = await inHeavyRead(c, c.get('deps').heavyReads, () =>
      orgsPage(db, site, { q, order, limit, after: position }),
    );
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const next =
      rows.length > limit && last !== undefined
        ? cursors.sign({ c: last.createdAt.getTime(), i: last.id }, scope)
        : null;
    return c.json({ result: { orgs: page.map(toOrg), next } } satisfies ListOrgsResponse, 200);
  },
});
