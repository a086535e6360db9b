import { sql } from 'drizzle-orm';
import { check, index, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';

/**
 * Accounts. `origin` records how a row came to be; its default is 'external', so a row written by
 * anyone but this service (the site's own sign-up, an import, a manual INSERT) stays out of reach
 * of the API unless its writer says otherwise.
 */
export const users = pgTable(
  'users',
  {
    id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
    email: text('email').notNull(),
    name: text('name').notNull(),
    phone: text('phone'),
    address: text('address'),
    passwordHash: text('password_hash'),
    origin: text('origin').notNull().default('external'),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    // Emails are unique ignoring case, whoever wrote the row.
    uniqueIndex('users_email_lower_key').on(sql`lower(${t.email})`),
    check('users_origin_check', sql`${t.origin} in ('api', 'external')`),
  ],
);

/** API tokens, stored only as SHA-256; the plain token exists only in the caller's hands. */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
    tokenHash: text('token_hash').notNull(),
    prefix: text('prefix').notNull(),
    label: text('label').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('api_tokens_token_hash_key').on(t.tokenHash), index('api_tokens_created_at_idx').on(t.createdAt)],
);

export const schema = { users, apiTokens };
