import type { components } from '@user-accounts/client';
import { checkRows, importRows } from '../../accounts/import.ts';
import { toFieldErrors } from '../../contract/validation.ts';
import { invalidRequest } from '../../errors.ts';
import { uuidv7 } from '../../kernel/ids.ts';
import type { KeptAnswer } from '../../kernel/unit-of-work.ts';
import { checkAccountLimit } from '../../limits/accounts.ts';
import type { FirebaseScrypt } from '../../passwords/foreign.ts';
import { defineOperation } from '../define-operation.ts';
import { consumeMore, consumeSiteBudget } from '../middleware/rate-limit.ts';
import { answerWith, jsonAnswer, runWrite } from '../run-write.ts';

type ImportUsersResponse = components['schemas']['ImportUsersResponse'];

export const importUsers = defineOperation({
  name: 'importUsers',
  method: 'POST',
  path: '/api/1/user/import',
  scope: 'write',
  request: { body: 'ImportUsersRequest' },
  budget: 'hash',
  idempotent: true,
  writes: 'import',
  // A thousand rows of the longest fields fit in 2 MiB; a thousand plain passwords take about
  // twenty core-seconds of argon2id.
  bulk: { bodyBytes: 2 * 1024 * 1024, keptAnswerBytes: 256 * 1024, timeoutMs: 120_000 },
  parse(c) {
    const body = c.get('body');
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw invalidRequest('The request body must be a JSON object.', [
        { pointer: '', code: 'invalid_type', message: 'must be an object' },
      ]);
    }
    // The request's own shape only: each row is checked by itself in handle, and answered at its index.
    const validate = c.get('validators').importShape;
    if (!validate(body)) throw invalidRequest('The request body is not valid.', toFieldErrors(validate.errors));
    return body as { users: unknown[]; dryRun?: boolean; firebaseScrypt?: FirebaseScrypt };
  },
  mockAnswer(c, input) {
    // What the server would answer, row for row, but for the emails in use, which only it can
    // know; a caller who asks for a documented example (Prefer) gets Prism's.
    if (c.req.header('prefer') !== undefined) return undefined;
    const { items, accepted } = checkRows(input.users, c.get('validators'), input.firebaseScrypt);
    const dryRun = input.dryRun === true;
    for (const { index } of accepted) {
      items[index] = dryRun
        ? { index, status: 'user would be created' }
        : { index, _userId: uuidv7(), status: 'user created' };
    }
    const failed = input.users.length - accepted.length;
    const result = { status: dryRun ? 'import checked' : 'import done', created: accepted.length, failed, items };
    c.header('Cache-Control', 'no-store');
    return c.json({ result } as ImportUsersResponse, 200);
  },
  async handle(c, input) {
    const { database, hasher, factorKeys } = c.get('deps');
    const target = {
      db: database.db,
      hasher,
      factorKeys,
      validators: c.get('validators'),
      site: c.get('token').site,
      signal: c.get('deadline').signal,
      breachedPasswords: c.get('deps').breachedPasswords,
    };
    const dryRun = input.dryRun === true;
    // The rows about to be written, as importRows counts them before hashing.
    let writing = 0;
    // What a write answers, known once it knows what it created.
    let answer: KeptAnswer | undefined;
    const result = await importRows(target, input.users, {
      dryRun,
      firebase: input.firebaseScrypt,
      // The call was counted once as it came in; each further row is one hash more (now for a
      // plain password, at its first verify for a given hash), and each row counts against the
      // site's imports.
      beforeWriting: async (count) => {
        writing = count;
        await consumeMore(c, 'hash', count - 1);
        await consumeSiteBudget(c, 'import', count);
      },
      // The answer is kept with the write, for an Idempotency-Key (see kernel/unit-of-work.ts).
      write: async (insert, resultOf, factorsOf) =>
        (await runWrite(
          c,
          (created) => {
            answer = jsonAnswer({ result: resultOf(created) } satisfies ImportUsersResponse);
            // An audit row per account created (and per TOTP factor it brought); a call that
            // created none leaves one for itself.
            return created.size > 0
              ? {
                  userId: undefined,
                  userIds: [...created.values()],
                  status: 200,
                  outcome: 'user created',
                  factorsAdded: factorsOf(created),
                  answer,
                }
              : { userId: undefined, status: 200, outcome: 'import done', answer };
          },
          async (tx) => {
            await checkAccountLimit(tx, target.site, writing, c.get('deps').maxAccountsPerSite);
            return insert(tx);
          },
        )) ?? new Map(),
    });
    if (answer !== undefined) return answerWith(c, 200, answer);
    if (dryRun) await runWrite(c, { userId: undefined, status: 200, outcome: 'import checked' }, async () => true);
    return c.json({ result } satisfies ImportUsersResponse, 200);
  },
});
