// create: a new account of the scope's site, with its password hashed in the site's turn.
import type { components } from '@user-accounts/client';
import { and, sql } from 'drizzle-orm';
import { rows } from '../db/client.ts';
import { metadataSchemas, users } from '../db/schema.ts';
import { ApiError, sqlState } from '../errors.ts';
import { uuidv7 } from '../kernel/ids.ts';
import { holdsEmailOf } from '../kernel/in-reach.ts';
import { inWrite, type KeptAnswer, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { checkAccountLimit } from '../limits/accounts.ts';
import { verifiedAtCreate } from './contacts.ts';
import { assertSiteSchema } from './metadata.ts';
import { hashNewPassword, type NewPasswordDeps } from './new-password.ts';

export type NewAccount = components['schemas']['CreateUserRequest'];

export const emailTaken = () =>
  new ApiError('email_taken', 'An account with this email already exists.', {
    errors: [{ pointer: '/email', code: 'conflict', message: 'is already in use' }],
  });

export interface CreateDeps extends WriteDeps, NewPasswordDeps {
  /** MAX_ACCOUNTS_PER_SITE; undefined: no bound. */
  maxAccountsPerSite?: number | undefined;
}

/**
 * Creates `input` (already checked against the spec and the password rules that need no data)
 * in the scope's site: 409 email_taken, 400 for the site's metadata schema, the screening's
 * refusals, else its id. `answer` is what the caller answers with the new id (kept for its
 * Idempotency-Key in the write's transaction).
 */
export async function createAccount(
  scope: WriteScope,
  deps: CreateDeps,
  input: NewAccount,
  answer?: (id: string) => KeptAnswer,
): Promise<string> {
  const { site } = scope;
  // Emails are unique per site among the accounts that hold one: a row out of reach with this
  // email (another writer's) is no conflict, and the new account stands beside it. Checking first
  // spares a 50 ms hash on a conflict; the unique index still settles races between creates. The
  // site's metadata schema comes in the same statement: one round trip before the hash.
  const [before] = await rows<{ taken: boolean; schema: unknown }>(
    deps.db,
    sql`select exists (select 1 from ${users} where ${and(holdsEmailOf(site), sql`lower(${users.email}) = lower(${input.email})`)}) as taken,
      (select ${metadataSchemas.schema} from ${metadataSchemas} where ${metadataSchemas.site} = ${site}) as schema`,
  );
  if (before!.taken) throw emailTaken();
  // The site's metadata schema holds for every new account, one without metadata too ({}).
  const schema = typeof before!.schema === 'string' ? JSON.parse(before!.schema) : before!.schema;
  await assertSiteSchema(site, schema, input.metadata ?? {}, scope.deadline?.signal);

  const passwordHash = await hashNewPassword(scope, deps, input.password);
  const id = uuidv7();
  try {
    await inWrite(
      scope,
      deps,
      'create',
      { userId: id, status: 201, outcome: 'user created', ...(answer && { answer: answer(id) }) },
      async (tx) => {
        await checkAccountLimit(tx, site, 1, deps.maxAccountsPerSite);
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
      },
    );
  } catch (error) {
    if (sqlState(error) === '23505') throw emailTaken();
    throw error;
  }
  return id;
}
