// An account as the spec's User: a row mapped field by field (never returned as is), by the
// account functions, the user-data export and every route that answers a User.
import type { components } from '@user-accounts/client';
import type { users } from '../db/schema.ts';

export function toUser(
  row: Pick<
    typeof users.$inferSelect,
    | 'id'
    | 'email'
    | 'name'
    | 'phone'
    | 'address'
    | 'disabled'
    | 'disabledUntil'
    | 'disabledReason'
    | 'emailVerifiedAt'
    | 'phoneVerifiedAt'
    | 'passwordBreached'
    | 'metadata'
    | 'createdAt'
    | 'updatedAt'
  > & { emailDeliverable: boolean },
  identities: components['schemas']['Identity'][],
): components['schemas']['User'] {
  return {
    _userId: row.id,
    email: row.email,
    name: row.name,
    phone: row.phone,
    address: row.address,
    disabled: row.disabled,
    disabledUntil: row.disabledUntil?.toISOString() ?? null,
    disabledReason: row.disabledReason,
    emailVerified: row.emailVerifiedAt !== null,
    emailVerifiedAt: row.emailVerifiedAt?.toISOString() ?? null,
    phoneVerified: row.phoneVerifiedAt !== null,
    phoneVerifiedAt: row.phoneVerifiedAt?.toISOString() ?? null,
    passwordBreached: row.passwordBreached,
    emailDeliverable: row.emailDeliverable,
    metadata: row.metadata,
    identities,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
