// Verified contacts (issue 28, point 2): when the email and the phone, as they are now, were last
// said verified. A changed contact is unverified unless the same write says otherwise; a change
// of the email's letter case only is the same address. Each rule is SQL in the write's own
// UPDATE, read against the row as it was (no read-modify-write).
import { type SQL, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import type { FieldError } from '../errors.ts';
import { invalidRequest } from '../errors.ts';

export interface ContactChange {
  email?: string;
  emailVerified?: boolean;
  phone?: string | null;
  phoneVerified?: boolean;
}

/** The fields an account is created or imported with, verified or not. */
export function verifiedAtCreate(input: ContactChange): { emailVerifiedAt: SQL | null; phoneVerifiedAt: SQL | null } {
  return {
    emailVerifiedAt: input.emailVerified === true ? sql`now()` : null,
    phoneVerifiedAt: input.phoneVerified === true ? sql`now()` : null,
  };
}

/** What can be told without the account: a phone said verified that the same request clears or never had. */
export function phoneVerifiedFault(input: ContactChange, creating: boolean): FieldError | undefined {
  const noPhone = input.phone === null || (creating && input.phone === undefined);
  return input.phoneVerified === true && noPhone
    ? { pointer: '/phoneVerified', code: 'not_allowed', message: 'needs a phone' }
    : undefined;
}

export function checkPhoneVerified(input: ContactChange, creating: boolean): void {
  const fault = phoneVerifiedFault(input, creating);
  if (fault !== undefined) throw invalidRequest('A phone cannot be verified without one.', [fault]);
}

type ContactColumns = { email?: string; emailVerifiedAt?: SQL; phoneVerifiedAt?: SQL };

/** An update's verification columns (and its email, phone), each read against the row as it was. */
export function contactChanges(input: ContactChange): ContactColumns {
  const changes: ContactColumns = {};
  const { email, emailVerified, phone, phoneVerified } = input;
  if (email !== undefined) {
    changes.email = email;
    const same = sql`lower(${users.email}) = lower(${email})`;
    changes.emailVerifiedAt =
      emailVerified === false
        ? sql`null`
        : emailVerified === true
          ? sql`case when ${same} then coalesce(${users.emailVerifiedAt}, now()) else now() end`
          : sql`case when ${same} then ${users.emailVerifiedAt} end`;
  } else if (emailVerified !== undefined) {
    changes.emailVerifiedAt = emailVerified ? sql`coalesce(${users.emailVerifiedAt}, now())` : sql`null`;
  }
  if (phone !== undefined) {
    const same = sql`${users.phone} is not distinct from ${phone}`;
    changes.phoneVerifiedAt =
      phone === null || phoneVerified === false
        ? sql`null`
        : phoneVerified === true
          ? sql`case when ${same} then coalesce(${users.phoneVerifiedAt}, now()) else now() end`
          : sql`case when ${same} then ${users.phoneVerifiedAt} end`;
  } else if (phoneVerified !== undefined) {
    // On an account without a phone, `true` breaks users_phone_verified_check: see phoneless.
    changes.phoneVerifiedAt = phoneVerified ? sql`coalesce(${users.phoneVerifiedAt}, now())` : sql`null`;
  }
  return changes;
}

/** The update said a phone is verified on an account that has none (users_phone_verified_check). */
export const phoneless = () =>
  invalidRequest('A phone cannot be verified without one.', [
    { pointer: '/phoneVerified', code: 'not_allowed', message: 'needs a phone: the account has none' },
  ]);
