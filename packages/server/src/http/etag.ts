// Entity tags for optimistic concurrency: the ETag of an account is its row version, which a
// trigger bumps on every UPDATE. Strong tags, compared strongly (RFC 9110 §13.1.1).
import type { IfMatch } from '../accounts/conditions.ts';
import { invalidRequest } from '../errors.ts';

export const etagOf = (version: number) => `"${version}"`;

/** The largest value of the int4 version column. */
const MAX_VERSION = 2_147_483_647;
const ENTITY_TAG = /^(W\/)?"([\x21\x23-\x7e]*)"$/;

export function parseIfMatch(header: string | undefined): IfMatch {
  if (header === undefined) return undefined;
  const trimmed = header.trim();
  if (trimmed === '*') return { any: true };
  const versions: number[] = [];
  // Empty list elements are ignored (RFC 9110 §5.6.1.2); a header with no element at all is not a list.
  const items = trimmed
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) items.push(trimmed);
  for (const item of items) {
    const match = ENTITY_TAG.exec(item);
    if (match === null) {
      throw invalidRequest('The If-Match header is not a list of entity tags.', [
        {
          pointer: 'If-Match',
          code: 'invalid_format',
          message: 'must be * or a comma-separated list of quoted entity tags',
        },
      ]);
    }
    // A weak tag never matches under strong comparison; a tag that is not ours matches nothing.
    if (match[1] === undefined && /^[1-9]\d{0,9}$/.test(match[2]!) && Number(match[2]) <= MAX_VERSION) {
      versions.push(Number(match[2]));
    }
  }
  return { any: false, versions };
}
