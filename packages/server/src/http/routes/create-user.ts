import type { components } from '@user-accounts/client';
import { and, sql } from 'drizzle-orm';
import { checkPhoneVerified, verifiedAtCreate } from '../../accounts/contacts.ts';
import { uuidv7 } from '../../accounts/ids.ts';
import { holdsEmailOf } from '../../accounts/in-reach.ts';
import { assertSiteSchema, checkMetadata, siteMetadataValidator } from '../../accounts/metadata.ts';
import { users } from '../../db/schema.ts';
import { checkAccountLimit } from '../../limits/accounts.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { ApiError, sqlState } from '../errors.ts';
import { defineOperation } from '../operation.ts';
import { answerWith, jsonAnswer, runWrite } from '../run-write.ts';
import { GET_USER_PATH } from './get-user.ts';
import { hashPassword, refuseBreached, validBody, weakPassword } from './shared.ts';

type CreateUserResponse = components['schemas']['CreateUserResponse'];

export const emailTaken = () =>
  new ApiError(409, 'email_taken', 'An account with this email already exists.', {
    errors: [{ pointer: '/email', code: 'conflict', message: 'is already in use' }],
  });

export const createUser = defineOperation({
  name: 'createUser',
  method: 'POST',
  path: '/api/1/user/create',
  scope: 'write',
  request: { body: 'CreateUserRequest' },
  budget: 'hash',
  idempotent: true,
  writes: 'create',
  parse(c) {
    const input = validBody(c, 'CreateUserRequest');
    const reason = weakPasswordReason(input.password, { email: input.email, name: input.name });
    if (reason !== undefined) throw weakPassword(reason);
    if (input.metadata !== undefined) checkMetadata(input.metadata);
    checkPhoneVerified(input, true);
    return input;
  },
  async handle(c, input) {
    const { database } = c.get('deps');
    const site = c.get('token').site;
    // Emails are unique per site among the accounts in reach: a row out of reach with this email
    // (another writer's) is no conflict, and the new account stands beside it. Checking first
    // spares a 50 ms hash on a conflict; the unique index still settles races between creates.
    const taken = await database.db
      .select({ one: sql`1` })
      .from(users)
      .where(and(holdsEmailOf(site), sql`lower(${users.email}) = lower(${input.email})`))
      .limit(1);
    if (taken.length > 0) throw emailTaken();
    // The site's metadata schema holds for every new account, one without metadata too ({}).
    assertSiteSchema(await siteMetadataValidator(database.db, site), input.metadata ?? {});
    await refuseBreached(c, input.password);

    const passwordHash = await hashPassword(c, input.password);
    const id = uuidv7();
    const answer = jsonAnswer({ result: { _userId: id, status: 'user created' } } satisfies CreateUserResponse, {
      location: `${GET_USER_PATH}?_userId=${id}`,
    });
    try {
      await runWrite(c, { userId: id, status: 201, outcome: 'user created', answer }, async (tx) => {
        await checkAccountLimit(tx, site, 1, c.get('deps').maxAccountsPerSite);
        await tx.insert(users).values({
          id,
          site,
          email: input.email,
          name: input.name,
          phone: input.phone ?? null,
          address: input.address ?? null,
          ...verifiedAtCreate(input),
          metadata: input.metadata ?? {},
          passwordHash,
          origin: 'api',
        });
        return id;
      });
    } catch (error) {
      if (sqlState(error) === '23505') throw emailTaken();
      throw error;
    }
    return answerWith(c, 201, answer);
  },
});
