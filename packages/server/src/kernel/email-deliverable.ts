// `emailDeliverable` (issue 60, point 5), as a column of any statement over `users`: get, list, a
// person's data and the events' accounts (outbox.ts) read it alike. False once a message we sent
// to the account's email, as it is now, was refused for good at send time (messages.undeliverable,
// set by messages/worker.ts), unless the email was verified after that message was made; a
// failure to another address (the email changed since) does not count. By messages_user_idx.
import { type Placeholder, type SQL, sql } from 'drizzle-orm';

/**
 * `site`: the site's name (a value, a placeholder, or a column); `users`: the name the statement
 * gives the account's row (`users`, a subquery named so, or an alias such as `u`). Its columns
 * are named with it: drizzle writes a lone table's columns unqualified, and in this subquery
 * `"id"` would be the message's own.
 */
export function emailDeliverableSql(site: SQL | Placeholder, users = 'users'): SQL<boolean> {
  const u = (column: string) => sql.raw(`"${users}"."${column}"`);
  return sql<boolean>`not exists (select 1 from messages m where m.site = ${site} and m.user_id = ${u('id')}
    and m.undeliverable and lower(m.recipient) = lower(${u('email')})
    and (${u('email_verified_at')} is null or m.created_at > ${u('email_verified_at')}))`;
}
