import type { components } from '@user-accounts/client';
import { verifyPassword } from '../../accounts/verify.ts';
import { describeError, invalidCredentials, invalidRequest } from '../../errors.ts';
import { markIfBreached } from '../../passwords/screening.ts';
import { issueSession } from '../../sessions/issue.ts';
import { PASSWORD_LOGIN } from '../../sessions/rules.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { endUserAddress, sessionDepsOf, validBody } from './shared.ts';

type VerifyUserResponse = components['schemas']['VerifyUserResponse'];

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
  // The mock: a login that asked for a session is answered with one (a real token, test-signed: mock.md).
  mockExample: ({ fields }) => (fields.session === undefined ? undefined : 'verified_with_session'),
  async handle(c, { fields, sent, address }) {
    const { hasher, verifyLimits, lockout, breachedPasswords } = c.get('deps');
    const warn = (error: unknown, message: string) => c.get('log').warn({ err: describeError(error) }, message);
    const who = { site: c.get('token').site, actor: c.get('token').id, requestId: c.get('requestId') };
    const { userId, passwordHash } = await verifyPassword(
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
            void markIfBreached(
              breachedPasswords,
              { ...writeDepsOf(c), share: undefined },
              who,
              { userId: id, passwordHash, password },
              warn,
            ),
        }),
      },
      { email: fields.email, _userId: fields._userId, password: fields.password, sent, address },
    );
    // The login is complete: the session its caller asked for (sessions/issue.ts).
    const session =
      fields.session === undefined
        ? undefined
        : await issueSession(writeScopeOf(c), sessionDepsOf(c), {
            userId,
            method: PASSWORD_LOGIN,
            userAgent: fields.session.userAgent,
            ip: address,
            lifetime: fields.session.lifetime,
            // A password changed since it was checked makes no session: the login is refused as
            // it would be now (a rehash of the same password by another login is no change).
            seen: {
              stale: () => invalidCredentials('password'),
              passwordHash,
              rightFor: (now) =>
                hasher.verify(now ?? undefined, sent, c.get('token').site, writeScopeOf(c).deadline?.signal),
            },
          });
    return c.json(
      {
        result: { _userId: userId, ...(session && { session }), status: 'password verified' },
      } satisfies VerifyUserResponse,
      200,
    );
  },
});
