// Password hashes made by other systems, as `import` takes them and `verify` checks them until
// the account's first successful verify replaces them with our own argon2id (see passwords/hasher.ts).
// Every algorithm runs in a maintained implementation: @node-rs/argon2, @node-rs/bcrypt, and
// node:crypto's scrypt and PBKDF2, all on libuv's thread pool. This module only reads the
// formats and bounds their cost, so that an imported hash cannot hold a hashing slot for minutes.
import { createCipheriv, pbkdf2, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { verify as argon2Verify } from '@node-rs/argon2';
import { verify as bcryptVerify } from '@node-rs/bcrypt';

/** Checks a password (its UTF-8 bytes) against one stored hash. */
export type HashCheck = (password: Buffer) => Promise<boolean>;

const pbkdf2Async = promisify(pbkdf2);
const scryptAsync = promisify(scrypt) as (
  password: Buffer,
  salt: Buffer,
  length: number,
  options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

// The limits the spec states for import: each check holds one hashing slot for a second or two
// of one core and at most 128 MiB (measured on this machine: bcrypt 16 ≈ 3.7 s is the longest).
export const LIMITS = {
  argon2: { memoryKiB: 131_072, passes: 10, lanes: 16 },
  bcrypt: { minCost: 4, maxCost: 16 },
  // Memory 128·r·(N + p) bytes; work N·r·p (passlib's default, ln=16 r=8 p=1, is 2^19).
  scrypt: { memoryBytes: 128 * 1024 * 1024, work: 2 ** 20, parallelism: 16 },
  // Iterations times the output's blocks of the digest: a long output costs as many runs.
  pbkdf2: { iterations: 10_000_000, outputBytes: 64 },
} as const;

const B64 = '[A-Za-z0-9+/]';
const ARGON2 = new RegExp(
  `^\\$argon2(?:id|i|d)\\$(?:v=(?:16|19)\\$)?m=(\\d{1,7}),t=(\\d{1,3}),p=(\\d{1,2})\\$${B64}{11,}\\$${B64}{16,}$`,
);
const BCRYPT = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/;
const SCRYPT = new RegExp(`^\\$scrypt\\$ln=(\\d{1,2}),r=(\\d{1,3}),p=(\\d{1,2})\\$(${B64}*)\\$(${B64}{16,})$`);
// passlib: `$pbkdf2-sha256$29000$salt$hash` in its adapted base64 ('.' for '+'); PHC: `i=29000,l=32`.
const PBKDF2 =
  /^\$pbkdf2-(sha256|sha512)\$(?:(\d{1,8})|i=(\d{1,8})(?:,l=\d{1,3})?)\$([./A-Za-z0-9+]*)\$([./A-Za-z0-9+]{16,})$/;
// Firebase's modified scrypt, as import keeps it: the project's parameters with the row's salt and hash.
const FIREBASE =
  /^\$firebase-scrypt\$r=(\d),m=(\d{1,2})\$([A-Za-z0-9+/=]*)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/;
// Django: `pbkdf2_sha256$870000$salt$base64`, the salt used as its UTF-8 text.
const DJANGO = /^pbkdf2_sha256\$(\d{1,8})\$([^$]{1,128})\$([A-Za-z0-9+/]{43}=)$/;

const fromBase64 = (text: string) => Buffer.from(text.replaceAll('.', '+'), 'base64');

const equalBytes = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b);

/**
 * How to check passwords against `stored`, or why it cannot be used: a format this service does
 * not read, or a cost beyond the limits. Our own argon2id hashes read as any argon2 PHC string.
 */
export function readHash(stored: string): HashCheck | string {
  for (const read of [readArgon2, readBcrypt, readScrypt, readPbkdf2, readDjango, readFirebase]) {
    const check = read(stored);
    if (check !== undefined) return check;
  }
  return 'is not a password hash in an accepted format (argon2, bcrypt, scrypt, PBKDF2, Django, or Firebase with passwordSalt)';
}

// Each reader: undefined when `stored` is not its format, else its check or why it is refused.

function readArgon2(stored: string): HashCheck | string | undefined {
  const m = ARGON2.exec(stored);
  if (m === null) return undefined;
  const [memory, passes, lanes] = m.slice(1, 4).map(Number) as [number, number, number];
  const { memoryKiB, passes: maxPasses, lanes: maxLanes } = LIMITS.argon2;
  if (memory > memoryKiB || passes > maxPasses || lanes > maxLanes || lanes < 1 || passes < 1 || memory < 8 * lanes) {
    return `is an argon2 hash with parameters beyond m=${memoryKiB}, t=${maxPasses}, p=${maxLanes}`;
  }
  return (password) => argon2Verify(stored, password).catch(() => false);
}

function readBcrypt(stored: string): HashCheck | string | undefined {
  const m = BCRYPT.exec(stored);
  if (m === null) return undefined;
  const cost = Number(m[1]);
  if (cost < LIMITS.bcrypt.minCost || cost > LIMITS.bcrypt.maxCost) {
    return `is a bcrypt hash with a cost outside ${LIMITS.bcrypt.minCost} to ${LIMITS.bcrypt.maxCost}`;
  }
  // bcrypt's own rules: only the first 72 bytes of the password count.
  return (password) => bcryptVerify(password, stored).catch(() => false);
}

function readScrypt(stored: string): HashCheck | string | undefined {
  const m = SCRYPT.exec(stored);
  if (m === null) return undefined;
  const [log2N, r, p] = m.slice(1, 4).map(Number) as [number, number, number];
  const N = 2 ** log2N;
  // OpenSSL's own count of what scrypt holds: the N blocks and the p lanes' buffers.
  const memory = 128 * r * (N + p + 2);
  const { memoryBytes, work, parallelism } = LIMITS.scrypt;
  if (log2N < 1 || log2N > 30 || r < 1 || p < 1 || p > parallelism || memory > memoryBytes || N * r * p > work) {
    return `is a scrypt hash with parameters beyond 128·r·(2^ln + p) ≤ ${memoryBytes} bytes, 2^ln·r·p ≤ ${work}, p ≤ ${parallelism}`;
  }
  const salt = fromBase64(m[4]!);
  const expected = fromBase64(m[5]!);
  if (expected.length > 64) return 'is a scrypt hash longer than 64 bytes';
  const options = { N, r, p, maxmem: memory + 1024 * 1024 };
  return async (password) => equalBytes(await scryptAsync(password, salt, expected.length, options), expected);
}

function readPbkdf2(stored: string): HashCheck | string | undefined {
  const m = PBKDF2.exec(stored);
  if (m === null) return undefined;
  const digest = m[1]!;
  const iterations = Number(m[2] ?? m[3]);
  const salt = fromBase64(m[4]!);
  const expected = fromBase64(m[5]!);
  const blocks = Math.ceil(expected.length / (digest === 'sha256' ? 32 : 64));
  if (expected.length > LIMITS.pbkdf2.outputBytes) return 'is a PBKDF2 hash longer than 64 bytes';
  if (iterations < 1 || iterations * blocks > LIMITS.pbkdf2.iterations) {
    return `is a PBKDF2 hash with more than ${LIMITS.pbkdf2.iterations} iterations (times its output's blocks)`;
  }
  return async (password) =>
    equalBytes(await pbkdf2Async(password, salt, iterations, expected.length, digest), expected);
}

function readDjango(stored: string): HashCheck | string | undefined {
  const m = DJANGO.exec(stored);
  if (m === null) return undefined;
  const iterations = Number(m[1]);
  if (iterations < 1 || iterations > LIMITS.pbkdf2.iterations) {
    return `is a PBKDF2 hash with more than ${LIMITS.pbkdf2.iterations} iterations`;
  }
  const salt = Buffer.from(m[2]!, 'utf8');
  const expected = Buffer.from(m[3]!, 'base64');
  return async (password) => equalBytes(await pbkdf2Async(password, salt, iterations, 32, 'sha256'), expected);
}

/**
 * Whether `password` matches `stored` (ours, or a hash import took), unnormalized too; false for a
 * hash no longer readable. The check of the hasher's slots, and of the costly lane's process
 * (passwords/costly-check.ts).
 */
export async function checkPassword(stored: string, password: string): Promise<boolean> {
  const normalized = password.normalize('NFC');
  // An argon2 hash is ours or was bounded by the import; ours may cost more than its limits.
  const checker = stored.startsWith('$argon2')
    ? (given: Buffer) => argon2Verify(stored, given).catch(() => false)
    : readHash(stored);
  if (typeof checker === 'string') return false;
  // A hash the import accepted that its algorithm still refuses (a parameter its library
  // will not run) is a wrong password, not a 500: that account cannot sign in.
  const safely = (given: Buffer) => checker(given).catch(() => false);
  if (await safely(Buffer.from(normalized))) return true;
  // Another system may have hashed the password as it was typed, without normalizing it.
  return normalized !== password && safely(Buffer.from(password));
}

/** A Firebase project's hash parameters, as its console shows them (base64 strings). */
export interface FirebaseScrypt {
  signerKey: string;
  saltSeparator: string;
  rounds: number;
  memCost: number;
}

/** The stored form of a Firebase hash: everything its verify needs, in one string. */
export const firebaseStored = (p: FirebaseScrypt, salt: string, hash: string) =>
  `$firebase-scrypt$r=${p.rounds},m=${p.memCost}$${p.saltSeparator}$${p.signerKey}$${salt}$${hash}`;

/**
 * Firebase's scrypt (github.com/firebase/scrypt): a key is derived from the password and the
 * salt followed by the separator (N = 2^memCost, r = rounds, p = 1), and the signer key encrypted
 * with its first 32 bytes by AES-256-CTR from a zero IV must give the stored hash.
 */
function readFirebase(stored: string): HashCheck | string | undefined {
  const m = FIREBASE.exec(stored);
  if (m === null) return undefined;
  const [rounds, memCost] = [Number(m[1]), Number(m[2])];
  if (rounds < 1 || rounds > 8 || memCost < 1 || memCost > 14) {
    return 'is a Firebase scrypt hash with rounds beyond 1 to 8 or memCost beyond 1 to 14';
  }
  const [separator, signerKey, salt, expected] = m.slice(3, 7).map((b) => Buffer.from(b!, 'base64')) as [
    Buffer,
    Buffer,
    Buffer,
    Buffer,
  ];
  const N = 2 ** memCost;
  const options = { N, r: rounds, p: 1, maxmem: 128 * N * rounds + 1024 * 1024 };
  return async (password) => {
    const key = await scryptAsync(password, Buffer.concat([salt, separator]), 64, options);
    const cipher = createCipheriv('aes-256-ctr', key.subarray(0, 32), Buffer.alloc(16));
    return equalBytes(Buffer.concat([cipher.update(signerKey), cipher.final()]), expected);
  };
}

/** What checking one hash costs: CPU time on one core, and memory held while it runs. */
export interface HashCost {
  cpuMs: number;
  memoryBytes: number;
}

// Milliseconds of one core per unit of work, measured on this project's 2-core machine
// (2026-11): argon2id m=19456,t=2 7 ms; bcrypt 10 45 ms; PBKDF2 100,000 iterations 11 ms (SHA-256)
// and 29 ms (SHA-512); scrypt 2^14·8 22 ms. Only their ratios matter: an estimate is compared
// with the same estimate of the server's own PASSWORD_HASH.
const MS_PER = { argon2: 0.00018, bcrypt: 0.044, sha256: 0.00011, sha512: 0.00029, scrypt: 0.0002 } as const;

/** The cost of an argon2 hash of `memoryKiB` and `passes` (work grows with both). */
export const argon2Cost = (memoryKiB: number, passes: number): HashCost => ({
  cpuMs: memoryKiB * passes * MS_PER.argon2,
  memoryBytes: memoryKiB * 1024,
});

const scryptCost = (N: number, r: number, p: number): HashCost => ({
  cpuMs: N * r * p * MS_PER.scrypt,
  memoryBytes: 128 * r * (N + p + 2),
});

/** The cost of checking a password against `stored`, from its parameters; undefined for no known format. */
export function hashCost(stored: string): HashCost | undefined {
  let m = ARGON2.exec(stored);
  if (m !== null) return argon2Cost(Number(m[1]), Number(m[2]));
  m = BCRYPT.exec(stored);
  if (m !== null) return { cpuMs: 2 ** Number(m[1]) * MS_PER.bcrypt, memoryBytes: 4096 };
  m = SCRYPT.exec(stored);
  if (m !== null) return scryptCost(2 ** Number(m[1]), Number(m[2]), Number(m[3]));
  m = PBKDF2.exec(stored);
  if (m !== null) {
    const perBlock = m[1] === 'sha256' ? 32 : 64;
    const blocks = Math.max(1, Math.ceil(fromBase64(m[5]!).length / perBlock));
    return { cpuMs: Number(m[2] ?? m[3]) * blocks * MS_PER[m[1] as 'sha256' | 'sha512'], memoryBytes: 4096 };
  }
  m = DJANGO.exec(stored);
  if (m !== null) return { cpuMs: Number(m[1]) * MS_PER.sha256, memoryBytes: 4096 };
  m = FIREBASE.exec(stored);
  if (m !== null) return scryptCost(2 ** Number(m[2]), Number(m[1]), 1);
  return undefined;
}
