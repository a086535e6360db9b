// `Prefer: code=…, example=…`, checked by the mock's gate against the spec before Prism sees it.
// Left to Prism, an answer the operation does not document is Prism's own error: a 404 that reads
// like a missing account for `code=418` or `example=nope`, a 500 for a name under another status.
// Here it is the caller's mistake, told once, with what there is to ask for.

import type { OpenApiDocument } from '@user-accounts/server/contract/spec';
import { ApiError } from '@user-accounts/server/errors';
import { clip } from '@user-accounts/server/http/errors';

type Responses = Record<string, { $ref?: string; content?: Record<string, { examples?: Record<string, unknown> }> }>;

/** Each status the operation documents, with the names of its examples, in the spec's order. */
export function documentedAnswers(spec: OpenApiDocument, path: string, method: string): Map<string, string[]> {
  const operation = spec.paths[path]?.[method.toLowerCase()] as { responses?: Responses } | undefined;
  const shared = (spec.components as { responses?: Responses }).responses ?? {};
  const answers = new Map<string, string[]>();
  for (const [status, response] of Object.entries(operation?.responses ?? {})) {
    const resolved = response.$ref === undefined ? response : shared[response.$ref.split('/').pop()!];
    answers.set(
      status,
      Object.values(resolved?.content ?? {}).flatMap((media) => Object.keys(media.examples ?? {})),
    );
  }
  return answers;
}

/**
 * The preferences of a Prefer header (RFC 7240), by lower-cased name, each one's value unquoted
 * and without its parameters. The first of a name counts, as in Prism's own reading.
 */
export function parsePrefer(header: string | undefined): Map<string, string> {
  const preferences = new Map<string, string>();
  for (const preference of (header ?? '').split(',')) {
    const [head = ''] = preference.split(';');
    const equals = head.indexOf('=');
    const name = (equals < 0 ? head : head.slice(0, equals)).trim().toLowerCase();
    const value =
      equals < 0
        ? ''
        : head
            .slice(equals + 1)
            .trim()
            .replace(/^"(.*)"$/, '$1');
    if (name !== '' && !preferences.has(name)) preferences.set(name, value);
  }
  return preferences;
}

const listed = (answers: Map<string, string[]>) =>
  [...answers].map(([status, names]) => (names.length > 0 ? `${status} (${names.join(', ')})` : status)).join(', ');

/**
 * The Prefer header to send Prism for this request: only what Prism reads, as the gate read it,
 * so that Prism cannot read it otherwise. An undocumented status or example name is 400
 * `unknown_example`, naming the operation's statuses and examples; other preferences are ignored,
 * as RFC 7240 asks of a server that does not know them.
 */
export function checkedPrefer(
  operationId: string,
  answers: Map<string, string[]>,
  header: string | undefined,
): string | undefined {
  const preferences = parsePrefer(header);
  const code = preferences.get('code');
  const example = preferences.get('example');
  const dynamic = preferences.get('dynamic');
  // Without a code, Prism answers with the lowest 2xx status, and looks for the example there.
  const success = [...answers.keys()]
    .filter((s) => /^2\d\d$/.test(s))
    .sort()
    .at(0);
  const status = code ?? success;
  // What was asked is echoed cut short: a problem never carries unbounded request text.
  const refuse = (asked: string, why: string) =>
    new ApiError(
      'unknown_example',
      `Prefer: ${clip(asked, 80)}: ${why} ${operationId} documents these statuses, with their examples: ${listed(answers)}. ` +
        `Ask for one with Prefer: code=STATUS, example=NAME; an example alone is looked for under ${success}.`,
    );
  if (code !== undefined && !answers.has(code)) throw refuse(`code=${code}`, 'no such status is documented.');
  if (example !== undefined && !(status !== undefined && answers.get(status)?.includes(example))) {
    throw refuse(
      code === undefined ? `example=${example}` : `code=${code}, example=${example}`,
      `no example of that name is documented for ${status}.`,
    );
  }
  const forwarded = [
    code === undefined ? [] : [`code=${code}`],
    example === undefined ? [] : [`example="${example}"`],
    dynamic === 'true' || dynamic === 'false' ? [`dynamic=${dynamic}`] : [],
  ].flat();
  return forwarded.length > 0 ? forwarded.join(', ') : undefined;
}
