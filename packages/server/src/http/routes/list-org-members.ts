import type { components } from '@user-accounts/client';
import { checkCursorShape, cursorsOf } from '../../accounts/listing.ts';
import { membersPage } from '../../orgs/members.ts';
import { getOrg } from '../../orgs/orgs.ts';
import { defineOperation } from '../define-operation.ts';
import { inHeavyRead } from '../heavy-read.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/member/list';

type ListOrgMembersResponse = components['schemas']['ListOrgMembersResponse'];
type ListQuery = { orgId: string; limit?: number; after?: string };

export const listOrgMembers = defineOperation({
  name: 'listOrgMembers',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse(c) {
    const query = validQuery<ListQuery>(c, PATH);
    checkCursorShape(query.after);
    return query;
  },
  async handle(c, { orgId, limit = 100, after }) {
    const db = c.get('deps').database.db;
    const site = c.get('token').site;
    await getOrg(db, site, { orgId });
    const cursors = await cursorsOf(db);
    // A cursor is good for its site and its organization only (user/list's signed cursors).
    const scope = JSON.stringify(['org/member/list', site, orgId]);
    const position = after === undefined ? undefined : cursors.read(after, scope);
    const rows = await inHeavyRead(c, c.get('deps').heavyReads, () => membersPage(db, site, orgId, limit, position?.i));
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const next = rows.length > limit && last !== undefined ? cursors.sign({ c: 0, i: last.userId }, scope) : null;
    const members = page.map((m) => ({
      _userId: m.userId,
      email: m.email,
      name: m.name,
      roles: m.roles,
      joinedAt: m.joinedAt.toISOString(),
    }));
    return c.json({ result: { members, next } } satisfies ListOrgMembersResponse, 200);
  },
});
