import { and, eq, sql } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import { auditWrites, recordAudit } from '../audit.ts';
import type { App } from '../context.ts';
import { users } from '../db/schema.ts';
import { ApiError, sqlState } from '../errors.ts';
import { uuidv7 } from '../ids.ts';
import { requireScope, requireToken } from '../middleware/auth.ts';
import { idempotent } from '../middleware/idempotency.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { rateLimit } from '../middleware/rate-limit.ts';
import { weakPasswordReason } from '../passwords.ts';
import { GET_USER_PATH } from './get-user.ts';
import { validBody, weakPassword } from './shared.ts';

type CreateUserResponse = components['schemas']['CreateUserResponse'];

const emailTaken = () =>
  new ApiError(409, 'email_taken', 'An account with this email already exists.', {
    errors: [{ pointer: '/email', code: 'conflict', message: 'is already in use' }],
  });

export function registerCreateUser(app: App): void {
  app.post(
    '/api/1/user/create',
    requireToken(),
    rateLimit('create'),
    auditWrites('create'),
    requireScope('write'),
    jsonBody(),
    idempotent(),
    async function createUser(c) {
      const input = validBody(c, 'CreateUserRequest');
      const reason = weakPasswordReason(input.password, { email: input.email, name: input.name });
      if (reason !== undefined) throw weakPassword(reason);

      const { database, hasher } = c.get('deps');
      const site = c.get('token').site;
      // Emails are unique per site, across every row of it, in reach or not. Checking first spares
      // a 50 ms hash on a conflict; the unique index still settles races between concurrent creates.
      const taken = await database.db
        .select({ one: sql`1` })
        .from(users)
        .where(and(eq(users.site, site), sql`lower(${users.email}) = lower(${input.email})`))
        .limit(1);
      if (taken.length > 0) throw emailTaken();

      const passwordHash = await hasher.hash(input.password);
      const id = uuidv7();
      c.set('auditUserId', id);
      try {
        await database.db.transaction(async (tx) => {
          await tx.insert(users).values({
            id,
            site,
            email: input.email,
            name: input.name,
            phone: input.phone ?? null,
            address: input.address ?? null,
            passwordHash,
            origin: 'api',
          });
          await recordAudit(tx, c, { operation: 'create', userId: id, status: 201, outcome: 'user created' });
        });
        c.set('audited', true);
      } catch (error) {
        if (sqlState(error) === '23505') throw emailTaken();
        throw error;
      }
      c.header('Location', `${GET_USER_PATH}?_userId=${id}`);
      return c.json({ result: { _userId: id, status: 'user created' } } satisfies CreateUserResponse, 201);
    },
  );
}
