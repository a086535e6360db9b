// The seam between sessions (sessions/issue.ts) and the keys that sign their access tokens
// (sessions/signing-keys.ts): a session asks for a JWT with these claims and gets it with its expiry.

/** What an access token says (issue 43, point 4): `aud` is the site, `sub` the account, `sid` the session. */
export interface AccessTokenRequest {
  site: string;
  userId: string;
  sessionId: string;
  /** RFC 8176 methods: pwd, otp, hwk, mfa, … */
  amr: string[];
  /** NIST 800-63B: 1 for a password, 2 with a second factor or a passkey. */
  aal: number;
  /** An impersonation's actor (the JWT's `act: { sub }`). */
  actor?: string;
  /** The session's end: the token's `exp` is never later. */
  notAfter?: Date;
}

export interface SignedAccessToken {
  accessToken: string;
  accessTokenExpiresAt: Date;
}

/** A public key as `GET /.well-known/jwks.json` publishes it (RFC 7517, 7518: P-256 for ES256). */
export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}

/** The keys a verifier needs, newest first, and an entity tag of exactly this set. */
export interface PublishedKeys {
  keys: PublicJwk[];
  etag: string;
}

export interface AccessTokenSigner {
  sign(request: AccessTokenRequest): Promise<SignedAccessToken>;
  /** The public keys to publish (sessions/signing-keys.ts); a stand-in without it publishes none. */
  publishedKeys?(): Promise<PublishedKeys>;
  /** Reads the keys again now rather than at the next periodic refresh (a rotation on this server). */
  refresh?(): Promise<void>;
}

/**
 * A stand-in for tests of the session rules on their own: an unsigned token (`alg: none`, which
 * no verifier accepts). The service signs with sessions/signing-keys.ts (wired in assemble.ts).
 */
export const placeholderSigner: AccessTokenSigner = {
  async sign(request) {
    const exp = new Date(Date.now() + 300_000);
    const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const token = `${part({ alg: 'none' })}.${part({ sub: request.userId, sid: request.sessionId, aud: request.site })}.`;
    return { accessToken: token, accessTokenExpiresAt: exp };
  },
};
