// GET /api/1/user/data?_userId=…: everything held about one account (accounts/user-data.ts).
// Not a change, but a disclosure of a person's data: audited as export is (operation `export`).
import type { components } from '@user-accounts/client';
import { gatherUserData } from '../../accounts/user-data.ts';
import { userNotFound } from '../../errors.ts';
import { defineOperation } from '../define-operation.ts';
import { inHeavyRead } from '../heavy-read.ts';
import { runWrite } from '../run-write.ts';
import { validQuery } from './shared.ts';

export const GET_USER_DATA_PATH = '/api/1/user/data';

type UserDataResponse = components['schemas']['UserDataResponse'];

export const getUserData = defineOperation({
  name: 'getUserData',
  method: 'GET',
  path: GET_USER_DATA_PATH,
  scope: 'export',
  request: { query: true },
  writes: 'export',
  parse: (c) => validQuery<{ _userId: string }>(c, GET_USER_DATA_PATH),
  async handle(c, { _userId }) {
    const { database, lockout, heldElsewhere } = c.get('deps');
    // Named for the audit row of a refusal too (the middleware writes it).
    c.get('write').userId = _userId;
    // A place among the site's heavy reads (HEAVY_READS_PER_SITE): an answer may be megabytes.
    const result = await inHeavyRead(c, c.get('deps').heavyReads, () =>
      gatherUserData({ db: database.db, lockout, heldElsewhere }, c.get('token').site, _userId),
    );
    if (result === undefined) throw userNotFound();
    // After the read: the answer is the data as it was before this request's own audit row.
    await runWrite(c, { userId: _userId, status: 200, outcome: 'user data exported' }, async () => true);
    return c.json({ result } satisfies UserDataResponse, 200);
  },
});
