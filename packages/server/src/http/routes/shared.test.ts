import { describe, expect, it } from 'vitest';
import { queryOf } from './shared.ts';

const BASE = 'http://127.0.0.1:3000';

describe('queryOf', () => {
  // validQuery reads the query with it instead of parsing the whole URL: it must read what
  // new URL(url).searchParams read, for the URLs @hono/node-server passes on as they came and for
  // those a Request serialized.
  it.each([
    '/api/1/user/get?_userId=a',
    '/api?x=1#f?y=2',
    '/api#x?y=1',
    '/api',
    '/api?',
    "/api?a=%zz&b=%41&c=+&d='",
    "/a?q='x'&r=\\\\",
    '/a??b=1',
    '/a???b=1',
    '/a?x=1&x=2&=3&__proto__=4',
    '/a?é=ü%20',
    '/a?a=1#',
    '/a#',
    '/a?x=<>"',
    '/a?x=%ZZ%2',
    '/a?&&',
    '/a?a&b=&c',
  ])('reads %s as new URL() does', (target) => {
    for (const url of [`${BASE}${target}`, new Request(`${BASE}${target}`).url]) {
      expect([...new URLSearchParams(queryOf(url))]).toEqual([...new URL(url).searchParams]);
    }
  });
});
