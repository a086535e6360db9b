import { randomBytes } from 'node:crypto';

// Random bytes drawn 4 KiB at a time, as Node's own randomUUID does: one call into the CSPRNG
// per id cost 4% of a get's CPU (every request gets an id).
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

function random16(): Buffer {
  if (offset + 16 > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const bytes = Buffer.allocUnsafe(16);
  pool.copy(bytes, 0, offset, offset + 16);
  offset += 16;
  return bytes;
}

/** A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits; sorts by creation time. */
export function uuidv7(): string {
  const bytes = random16();
  const ms = Date.now();
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids we never issued cannot name an account; they need not reach the database. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
