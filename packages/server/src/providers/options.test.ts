import { describe, expect, it } from 'vitest';
import {
  checkClientSecret,
  checkProvider,
  PRESETS,
  type ProviderInput,
  ProviderOptionError,
  parseUserinfoMap,
  urlProblem,
} from './options.ts';

const base = { site: 'shop', clientId: 'client-1', redirectUris: 'https://shop.example.com/auth/callback' };
const refused = (input: Partial<ProviderInput>) => {
  try {
    checkProvider({ ...base, name: 'acme', ...input });
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderOptionError);
    return (error as Error).message;
  }
  throw new Error('accepted');
};

describe('checkProvider', () => {
  it('fills a preset in from its name: the client id and the redirect URIs suffice', () => {
    expect(checkProvider({ ...base, name: 'google' })).toEqual({
      site: 'shop',
      name: 'google',
      kind: 'oidc',
      issuer: 'https://accounts.google.com',
      endpoints: null,
      userinfoMap: null,
      clientId: 'client-1',
      scopes: ['openid', 'email', 'profile'],
      redirectUris: ['https://shop.example.com/auth/callback'],
      onNewPerson: 'refuse',
      keepTokens: false,
    });
    expect(checkProvider({ ...base, name: 'github' })).toMatchObject({
      kind: 'oauth2',
      issuer: null,
      endpoints: {
        authorization: 'https://github.com/login/oauth/authorize',
        token: 'https://github.com/login/oauth/access_token',
        userinfo: 'https://api.github.com/user',
        emails: 'https://api.github.com/user/emails',
      },
      userinfoMap: { subject: '/id', email: '/email', name: '/name' },
      scopes: ['read:user', 'user:email'],
    });
    for (const name of ['microsoft', 'apple', 'gitlab'])
      expect(checkProvider({ ...base, name }).issuer).toBe(PRESETS[name]!.issuer);
  });

  it('takes a preset under another name (--preset), and the operator’s values over the preset’s', () => {
    expect(
      checkProvider({
        ...base,
        name: 'google-staff',
        preset: 'google',
        scopes: 'openid,email',
        onNewPerson: 'create',
        redirectUris: 'https://shop.example.com/a, https://shop.example.com/b',
      }),
    ).toMatchObject({
      name: 'google-staff',
      issuer: 'https://accounts.google.com',
      scopes: ['openid', 'email'],
      onNewPerson: 'create',
      redirectUris: ['https://shop.example.com/a', 'https://shop.example.com/b'],
    });
    expect(
      checkProvider({ ...base, name: 'microsoft', issuer: 'https://login.microsoftonline.com/9188040d/v2.0' }).issuer,
    ).toBe('https://login.microsoftonline.com/9188040d/v2.0');
  });

  it('configures any OpenID Connect issuer, and a plain OAuth 2.0 provider with its URLs and mapping', () => {
    expect(checkProvider({ ...base, name: 'oidc:acme', issuer: 'https://id.acme.example' })).toMatchObject({
      kind: 'oidc',
      issuer: 'https://id.acme.example',
      scopes: ['openid'],
    });
    expect(
      checkProvider({
        ...base,
        name: 'forge',
        kind: 'oauth2',
        authorizationUrl: 'http://127.0.0.1:4000/authorize',
        tokenUrl: 'http://[::1]:4000/token',
        userinfoUrl: 'http://localhost:4000/user',
        userinfoMap: 'subject=/id,email=/contact/email,emailVerified=/contact/verified,name=/display~1name',
        scopes: 'profile',
        redirectUris: 'http://localhost:3000/callback',
      }),
    ).toMatchObject({
      kind: 'oauth2',
      endpoints: {
        authorization: 'http://127.0.0.1:4000/authorize',
        token: 'http://[::1]:4000/token',
        userinfo: 'http://localhost:4000/user',
      },
      userinfoMap: {
        subject: '/id',
        email: '/contact/email',
        emailVerified: '/contact/verified',
        name: '/display~1name',
      },
      scopes: ['profile'],
    });
  });

  it('refuses a URL that is not https, except to a loopback address', () => {
    expect(refused({ issuer: 'http://id.acme.example' })).toMatch(
      /--issuer must be https:\/\/ \(http:\/\/ only to 127\.0\.0\.1/,
    );
    expect(refused({ issuer: 'http://10.0.0.1' })).toMatch(/--issuer must be https/);
    expect(refused({ issuer: 'http://127.0.0.2' })).toMatch(/--issuer must be https/);
    expect(refused({ issuer: 'http://localhost.example.com' })).toMatch(/--issuer must be https/);
    expect(refused({ issuer: 'ftp://id.acme.example' })).toMatch(/--issuer must be https/);
    expect(refused({ issuer: 'id.acme.example' })).toMatch(/--issuer must be an absolute URL/);
    expect(refused({ issuer: 'https://id.acme.example/?tenant=1' })).toMatch(/--issuer must not have a query/);
    expect(refused({ issuer: 'https://ops:pw@id.acme.example' })).toMatch(/must not carry a user or password/);
    expect(refused({ name: 'github', tokenUrl: 'http://github.example/token' })).toMatch(/--token-url must be https/);
    expect(refused({ name: 'google', redirectUris: 'http://shop.example.com/cb' })).toMatch(
      /--redirect-uris must be https/,
    );
    expect(urlProblem('http://localhost:3000/cb', '--redirect-uris')).toBeUndefined();
    expect(urlProblem('http://[::1]/cb', '--redirect-uris')).toBeUndefined();
    expect(urlProblem('https://shop.example.com/cb?from=login', '--redirect-uris')).toBeUndefined();
  });

  it('refuses a wildcard, a fragment, or the same redirect URI twice', () => {
    expect(refused({ name: 'google', redirectUris: 'https://*.shop.example.com/cb' })).toMatch(
      /--redirect-uris must be exact URLs, without wildcards/,
    );
    expect(refused({ name: 'google', redirectUris: 'https://shop.example.com/*' })).toMatch(/without wildcards/);
    expect(refused({ name: 'google', redirectUris: 'https://shop.example.com/cb#x' })).toMatch(/fragment/);
    expect(refused({ name: 'google', redirectUris: 'https://a.example/cb,https://a.example/cb' })).toMatch(/twice/);
    expect(refused({ name: 'google', redirectUris: ' , ' })).toMatch(/1 to 20 callback URLs/);
    expect(refused({ name: 'google', redirectUris: undefined })).toMatch(/--redirect-uris needs a value/);
  });

  it('says what is missing or does not fit the kind', () => {
    expect(refused({})).toMatch(/acme is no preset .*give --issuer for OpenID Connect, or --kind oauth2/);
    expect(refused({ kind: 'saml' })).toMatch(/--kind must be oidc or oauth2/);
    expect(refused({ kind: 'oauth2' })).toMatch(/--authorization-url needs a value/);
    expect(
      refused({
        kind: 'oauth2',
        authorizationUrl: 'https://a.example/auth',
        tokenUrl: 'https://a.example/token',
        userinfoUrl: 'https://a.example/me',
      }),
    ).toMatch(/--userinfo-map needs a value/);
    expect(refused({ issuer: 'https://id.acme.example', tokenUrl: 'https://a.example/token' })).toMatch(
      /--token-url is for --kind oauth2/,
    );
    expect(refused({ name: 'github', issuer: 'https://github.com' })).toMatch(/--issuer is for OpenID Connect/);
    expect(refused({ name: 'google', clientId: undefined })).toMatch(/--client-id needs a value/);
    expect(refused({ name: 'google', clientId: 'a\nb' })).toMatch(/--client-id must be 1 to 512 characters/);
    expect(refused({ name: 'Google' })).toMatch(/--name must be 1 to 64 of a-z/);
    expect(refused({ name: 'google', preset: 'yahoo' })).toMatch(/--preset must be one of google, microsoft/);
    expect(refused({ name: 'google', onNewPerson: 'link' })).toMatch(/--on-new-person must be create or refuse/);
  });

  it('holds scopes to RFC 6749 and OpenID Connect to openid', () => {
    expect(refused({ name: 'google', scopes: 'email,profile' })).toMatch(/--scopes must include openid/);
    expect(refused({ name: 'google', scopes: 'openid,"email"' })).toMatch(/without spaces, quotes or backslashes/);
    expect(refused({ name: 'google', scopes: 'openid,a b' })).toMatch(/without spaces/);
    expect(refused({ name: 'google', scopes: 'openid,openid' })).toMatch(/names a scope twice/);
  });
});

describe('parseUserinfoMap', () => {
  it('takes JSON pointers for subject, email, emailVerified and name; subject is required', () => {
    expect(parseUserinfoMap('subject=/sub')).toEqual({ subject: '/sub' });
    expect(() => parseUserinfoMap('email=/email')).toThrow(/must say where the subject is/);
    expect(() => parseUserinfoMap('subject=id')).toThrow(/JSON pointer such as \/id/);
    expect(() => parseUserinfoMap('subject=/a~2')).toThrow(/JSON pointer/);
    expect(() => parseUserinfoMap('subject=')).toThrow(/JSON pointer/);
    expect(() => parseUserinfoMap('login=/login,subject=/id')).toThrow(
      /FIELD one of subject, email, emailVerified, name/,
    );
    expect(() => parseUserinfoMap('subject=/id,subject=/sub')).toThrow(/names subject twice/);
  });
});

describe('checkClientSecret', () => {
  it('trims a file’s newline and never quotes the secret back', () => {
    expect(checkClientSecret('GOCSPX-s3cret\n')).toBe('GOCSPX-s3cret');
    for (const bad of ['', '  \n', 'two\nlines-s3cret', 'x'.repeat(4097)]) {
      let message = '';
      try {
        checkClientSecret(bad);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/the client secret must be 1 to 4096 characters/);
      expect(message).not.toContain('s3cret');
    }
  });
});
