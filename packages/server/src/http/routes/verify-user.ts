import type { components } from '@user-accounts/client';
import { verifyPassword } from '../../accounts/verify.ts';
import { canonicalAddress } from '../../auth/client-address.ts';
import { invalidRequest } from '../../contract/validation.ts';
import { describeError } from '../../errors.ts';
import { markIfBreached } from '../../passwords/screening.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type VerifyUserResponse = components['schemas']['VerifyUserResponse'];

/**
 * The end user's address, when the caller gave one: an IPv4 or IPv6 address in its canonical form
 * (every spelling of an IPv4 address as IPv6 is the IPv4 address, so none escapes its count), or 400.
 */
function endUserAddress(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  // A zone id (`fe80::1%eth0`) names an interface of the caller's machine, not an end user.
  const canonical = value.length > 45 || value.includes('%') ? undefined : canonicalAddress(value);
  if (canonical === undefined) {
    throw invalidRequest('The X-End-User-IP header is not an IP address.', [
      { pointer: 'X-End-User-IP', code: 'invalid_format', message: 'must be an IPv4 or IPv6 address' },
    ]);
  }
  return canonical;
}

export const verifyUser = defineOperation({
  name: 'verifyUser',
  method: 'POST',
  path: '/api/1/user/verify',
  scope: 'verify',
  request: { body: 'VerifyUserRequest' },
  budget: 'hash',
  writes: 'verify',
  parse(c) {
    const body = c.get('body');
    // Said plainly, before the schema's oneOf would report both fields as missing or one as extra.
    if (body !== null && typeof body === 'object' && !Array.isArray(body) && 'email' in body === '_userId' in body) {
      throw invalidRequest('Give exactly one of email or _userId, with the password.', []);
    }
    // The password as sent, before validBody normalizes it: an imported hash may be of that form.
    const sent = body !== null && typeof body === 'object' && 'password' in body ? body.password : undefined;
    const fields = validBody(c, 'VerifyUserRequest');
    return {
      fields,
      sent: typeof sent === 'string' ? sent : fields.password,
      address: endUserAddress(c.req.header('x-end-user-ip')),
    };
  },
  async handle(c, { fields, sent, address }) {
    const { hasher, verifyLimits, lockout, breachedPasswords } = c.get('deps');
    const warn = (error: unknown, message: string) => c.get('log').warn({ err: describeError(error) }, message);
    const who = { site: c.get('token').site, actor: c.get('token').id, requestId: c.get('requestId') };
    const userId = await verifyPassword(
      writeScopeOf(c),
      {
        ...writeDepsOf(c),
        hasher,
        verifyLimits,
        lockout,
        warn,
        // Not awaited: the answer never waits for the breach corpus (passwords/screening.ts).
        ...(breachedPasswords !== undefined && {
          rightPassword: (id, passwordHash, password) =>
            void markIfBreached(breachedPasswords, writeDepsOf(c), who, { userId: id, passwordHash, password }, warn),
        }),
      },
      { email: fields.email, _userId: fields._userId, password: fields.password, sent, address },
    );
    return c.json({ result: { _userId: userId, status: 'password verified' } } satisfies VerifyUserResponse, 200);
  },
});
