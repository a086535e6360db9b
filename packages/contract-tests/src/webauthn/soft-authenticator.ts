// A software authenticator for tests without a browser: what a platform authenticator answers to
// navigator.credentials.create() and get(), made with node:crypto (a P-256 key, ES256 signatures)
// and a few lines of CBOR (the attestation object, the COSE key). Attestation "none", flags UP
// and UV, a sign counter of its own. Independent of the server's library, so that a test's
// pass says the server reads what the WebAuthn spec says, not what its library writes.
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';

/** The parts of the server's options an authenticator reads (WebAuthn's JSON forms). */
export interface CreationOptions {
  challenge: string;
  rp: { id?: string; name: string };
  user: { id: string; name: string; displayName: string };
}
export interface RequestOptions {
  challenge: string;
  rpId?: string;
  allowCredentials?: { id: string }[];
}

export interface Credential {
  id: string;
  privateKey: KeyObject;
  userHandle: string;
  rpId: string;
  counter: number;
}

/** Changes to what an honest authenticator and browser would send, for the tests of refusals. */
export interface Tampering {
  origin?: string;
  rpId?: string;
  /** The counter to report (default: one more than the last). */
  counter?: number;
  challenge?: string;
  /** Flip a byte of the signature. */
  badSignature?: boolean;
  /** Leave out the user handle (a non-discoverable answer). */
  noUserHandle?: boolean;
  /** Answer without user verification (the UV flag off: a security key without a PIN). */
  noUserVerification?: boolean;
}

// CBOR (RFC 8949), the little this needs: unsigned and negative integers, byte and text strings, maps.
function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
  if (n < 0x10000) return Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = (major << 5) | 26;
  b.writeUInt32BE(n, 1);
  return b;
}
type Cbor = number | string | Buffer | Map<Cbor, Cbor>;
export function cbor(value: Cbor): Buffer {
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value, 'utf8');
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (Buffer.isBuffer(value)) return Buffer.concat([head(2, value.length), value]);
  return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [cbor(k), cbor(v)])]);
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();
const b64url = (data: Buffer) => data.toString('base64url');

/** What navigator.credentials answers around an authenticator's response, the same for both ceremonies. */
const asCredential = (id: string) => ({
  id,
  rawId: id,
  type: 'public-key' as const,
  clientExtensionResults: {},
  authenticatorAttachment: 'platform',
});

export class SoftAuthenticator {
  readonly credentials = new Map<string, Credential>();

  readonly origin: string;

  constructor(origin: string) {
    this.origin = origin;
  }

  private clientData(type: 'webauthn.create' | 'webauthn.get', challenge: string, origin: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  private authData(rpId: string, flags: number, counter: number, attested?: Buffer): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(counter);
    return Buffer.concat([sha256(rpId), Buffer.from([flags]), count, ...(attested === undefined ? [] : [attested])]);
  }

  /**
   * navigator.credentials.create(): a new discoverable credential and its RegistrationResponseJSON
   * (of the id `tamper.credentialId` when given: a new key pair under that id, replacing the one held).
   */
  register(options: CreationOptions, tamper: Tampering & { credentialId?: string } = {}) {
    const rpId = options.rp.id ?? new URL(this.origin).hostname;
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const cose = cbor(
      new Map<Cbor, Cbor>([
        [1, 2], // kty: EC2
        [3, -7], // alg: ES256
        [-1, 1], // crv: P-256
        [-2, Buffer.from(jwk.x!, 'base64url')],
        [-3, Buffer.from(jwk.y!, 'base64url')],
      ]),
    );
    // A chosen id (base64url): any authenticator, or a script posing as one, may name any id.
    const id = tamper.credentialId === undefined ? randomBytes(16) : Buffer.from(tamper.credentialId, 'base64url');
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(id.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, id, cose]);
    const counter = tamper.counter ?? 0;
    // UP | UV | AT
    const authData = this.authData(tamper.rpId ?? rpId, 0x45, counter, attested);
    const attestationObject = cbor(
      new Map<Cbor, Cbor>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]),
    );
    const credential: Credential = { id: b64url(id), privateKey, userHandle: options.user.id, rpId, counter };
    this.credentials.set(credential.id, credential);
    return {
      ...asCredential(credential.id),
      response: {
        clientDataJSON: b64url(
          this.clientData('webauthn.create', tamper.challenge ?? options.challenge, tamper.origin ?? this.origin),
        ),
        attestationObject: b64url(attestationObject),
        transports: ['internal'],
      },
    };
  }

  /**
   * navigator.credentials.get(): an AuthenticationResponseJSON of `credentialId`, or else of the
   * first allowed credential it holds, or else (a discoverable login) of any it holds.
   */
  assert(options: RequestOptions, tamper: Tampering & { credentialId?: string } = {}) {
    const allowed = (options.allowCredentials ?? []).map((c) => c.id);
    const id =
      tamper.credentialId ??
      (allowed.length > 0 ? allowed.find((a) => this.credentials.has(a)) : [...this.credentials.keys()][0]);
    const credential = id === undefined ? undefined : this.credentials.get(id);
    if (credential === undefined) throw new Error('the authenticator holds no credential for these options');
    credential.counter = tamper.counter ?? credential.counter + 1;
    // UP | UV, or UP alone
    const flags = tamper.noUserVerification ? 0x01 : 0x05;
    const authData = this.authData(tamper.rpId ?? options.rpId ?? credential.rpId, flags, credential.counter);
    const clientDataJSON = this.clientData(
      'webauthn.get',
      tamper.challenge ?? options.challenge,
      tamper.origin ?? this.origin,
    );
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), credential.privateKey);
    if (tamper.badSignature) signature[signature.length - 1]! ^= 0x01;
    return {
      ...asCredential(credential.id),
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        ...(tamper.noUserHandle ? {} : { userHandle: credential.userHandle }),
      },
    };
  }
}
