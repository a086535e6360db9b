import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.ts';
import { etagOf, parseIfMatch } from './etag.ts';

describe('etagOf', () => {
  it('is the version as a strong entity tag, which If-Match reads back', () => {
    expect(etagOf(7)).toBe('"7"');
    expect(parseIfMatch(etagOf(7))).toEqual({ any: false, versions: [7] });
    expect(parseIfMatch(etagOf(2_147_483_647))).toEqual({ any: false, versions: [2_147_483_647] });
  });
});

describe('parseIfMatch', () => {
  it('is nothing when the header is absent', () => {
    expect(parseIfMatch(undefined)).toBeUndefined();
  });

  it.each(['*', ' * '])('reads %j as any current version', (header) => {
    expect(parseIfMatch(header)).toEqual({ any: true });
  });

  it.each([
    ['one tag', '"3"', [3]],
    ['a list', '"1", "2","3"', [1, 2, 3]],
    ['a list with spaces around', '  "4" ,  "5"  ', [4, 5]],
    // RFC 9110 §5.6.1.2: a recipient ignores empty list elements.
    ['a list with empty elements', '"1", , "2",', [1, 2]],
  ])('reads %s', (_, header, versions) => {
    expect(parseIfMatch(header)).toEqual({ any: false, versions });
  });

  it.each([
    // Strong comparison (RFC 9110 §13.1.1): a weak tag never matches.
    ['a weak tag', 'W/"3"'],
    ['a tag that is not a version', '"abc"'],
    ['version 0, which no row has', '"0"'],
    ['a leading zero', '"03"'],
    ['a version past int4', '"2147483648"'],
    ['an empty tag', '""'],
  ])('keeps %s as valid syntax that matches no version', (_, header) => {
    expect(parseIfMatch(header)).toEqual({ any: false, versions: [] });
  });

  it('keeps the strong tags of a list that also has weak ones', () => {
    expect(parseIfMatch('W/"1", "2", "x"')).toEqual({ any: false, versions: [2] });
  });

  it.each([
    ['an unquoted version', '3'],
    ['an unclosed quote', '"3'],
    ['a lower-case weak prefix', 'w/"3"'],
    ['a star inside a list', '*, "3"'],
    ['a quote inside the tag', '"a"b"'],
    ['a space inside the tag', '"1 2"'],
    ['an empty header', ''],
    ['tags without a comma', '"1" "2"'],
  ])('refuses %s with 400 invalid_request on If-Match', (_, header) => {
    let thrown: unknown;
    try {
      parseIfMatch(header);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({
      status: 400,
      code: 'invalid_request',
      errors: [expect.objectContaining({ pointer: 'If-Match', code: 'invalid_format' })],
    });
  });
});
