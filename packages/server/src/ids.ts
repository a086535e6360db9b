import { randomBytes } from 'node:crypto';

/** A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits; sorts by creation time. */
export function uuidv7(): string {
  const bytes = randomBytes(16);
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
