import type { components } from '@user-accounts/client';
import { and, eq } from 'drizzle-orm';
import { users } from '../../db/schema.ts';
import { userNotFound } from '../../errors.ts';
import { isUuid } from '../../kernel/ids.ts';
import { listMessages as list } from '../../messages/outbox.ts';
import { defineOperation } from '../define-operation.ts';
import { inReach, validQuery } from './shared.ts';

const PATH = '/api/1/message/list';

type MessageListResponse = components['schemas']['MessageListResponse'];

/** An account's messages sent by us (issue 60, point 5), newest first: never a link, code or body. */
export const listMessages = defineOperation({
  name: 'listMessages',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ _userId: string; limit?: number; cursor?: string }>(c, PATH),
  async handle(c, query) {
    const db = c.get('deps').database.db;
    if (!isUuid(query._userId)) throw userNotFound();
    const [account] = await db
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.id, query._userId), inReach(c)))
      .limit(1);
    if (account === undefined) throw userNotFound();
    const result = await list(db, c.get('token').site, account.id, Number(query.limit ?? 20), query.cursor);
    return c.json({ result } satisfies MessageListResponse, 200);
  },
});
