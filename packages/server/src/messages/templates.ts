// The messages' templates (issue 60, point 2): per site, purpose and language, with plain English
// defaults (text and HTML) for every purpose. Mustache (logic-less: values and sections, no code,
// no partials) renders them; every value is HTML-escaped in the HTML part, and the subject and the
// text part are plain text. A template is checked when it is set: only the known variables, the
// link (or the code) present in the text and in the HTML, HTML that parses without an error
// (parse5, the WHATWG parser). A site's template of a language falls back to the site's of the
// primary language (fr-CA → fr), then to English (the site's, then ours).
import { and, asc, eq } from 'drizzle-orm';
import Mustache from 'mustache';
import { parse as parseHtml } from 'parse5';
import type { Db } from '../db/client.ts';
import { messageTemplates } from '../db/schema.ts';

/** What a message is for: the tickets' purposes (a login link and a login code apart) and an invitation. */
export const MESSAGE_PURPOSES = [
  'verify_email',
  'reset_password',
  'change_email',
  'verify_phone',
  'login',
  'login_code',
  'invitation',
] as const;
export type MessagePurpose = (typeof MESSAGE_PURPOSES)[number];

/** Whether the purpose carries a six-digit code (else a link). */
export const carriesCode = (purpose: MessagePurpose) => purpose === 'verify_phone' || purpose === 'login_code';

/** The variables a template may use; `link` or `code` as its purpose has. */
export const VARIABLES = ['siteName', 'link', 'code', 'expiresIn', 'expiresAt', 'email', 'name', 'orgName'] as const;
export type Variables = Partial<Record<(typeof VARIABLES)[number], string>>;

export interface Template {
  subject: string;
  text: string;
  /** Null: the message has a text part alone. */
  html: string | null;
}

export const LANG = /^[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$/;
export const LIMITS = { subject: 200, text: 16_384, html: 65_536 } as const;

const WHAT: Record<MessagePurpose, { subject: string; lead: string; action: string }> = {
  verify_email: {
    subject: 'Confirm your email address for {{siteName}}',
    lead: 'Please confirm that this is your email address for {{siteName}}.',
    action: 'Confirm your email address',
  },
  reset_password: {
    subject: 'Reset your password for {{siteName}}',
    lead: 'Someone asked to reset the password of your {{siteName}} account.',
    action: 'Choose a new password',
  },
  change_email: {
    subject: 'Confirm your new email address for {{siteName}}',
    lead: 'Please confirm that {{siteName}} should use this address for your account from now on.',
    action: 'Confirm the new address',
  },
  verify_phone: {
    subject: 'Your {{siteName}} code',
    lead: 'Your code to confirm this phone number for {{siteName}}:',
    action: '',
  },
  login: {
    subject: 'Sign in to {{siteName}}',
    lead: 'Use this link to sign in to {{siteName}}.',
    action: 'Sign in',
  },
  login_code: {
    subject: 'Your {{siteName}} sign-in code',
    lead: 'Your code to sign in to {{siteName}}:',
    action: '',
  },
  invitation: {
    subject: 'You are invited to {{orgName}} on {{siteName}}',
    lead: 'You have been invited to join {{orgName}} on {{siteName}}.',
    action: 'Accept the invitation',
  },
};

const NOT_YOU = "If this wasn't you, you can ignore this message: nothing changes unless the link or code is used.";

/** Our English template of a purpose: plain, short, one action, the expiry and "if this wasn't you". */
export function defaultTemplate(purpose: MessagePurpose): Template {
  const { subject, lead, action } = WHAT[purpose];
  const code = carriesCode(purpose);
  const secret = code ? '{{code}}' : '{{link}}';
  const text = [
    '{{#name}}Hello {{name}},{{/name}}{{^name}}Hello,{{/name}}',
    '',
    lead,
    '',
    code ? `    ${secret}` : `${action}: ${secret}`,
    '',
    `This ${code ? 'code' : 'link'} expires in {{expiresIn}}.`,
    '',
    NOT_YOU,
    '',
    '{{siteName}}',
    '',
  ].join('\n');
  const body = code
    ? `<p style="font-size:28px;letter-spacing:4px;font-family:monospace"><strong>${secret}</strong></p>`
    : `<p><a href="${secret}" style="display:inline-block;padding:12px 20px;background:#1a56db;color:#ffffff;text-decoration:none;border-radius:6px">${action}</a></p>\n<p>Or copy this address into your browser:<br>${secret}</p>`;
  const html = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${subject}</title></head>
<body style="font-family:system-ui,sans-serif;font-size:16px;line-height:1.5;color:#111111;max-width:600px;margin:0 auto;padding:16px">
<p>{{#name}}Hello {{name}},{{/name}}{{^name}}Hello,{{/name}}</p>
<p>${lead}</p>
${body}
<p>This ${code ? 'code' : 'link'} expires in {{expiresIn}}.</p>
<p style="color:#444444">${NOT_YOU}</p>
<p>{{siteName}}</p>
</body>
</html>
`;
  return { subject, text, html };
}

/** A template refused: the message says which part and what is wrong. */
export class TemplateError extends Error {
  override name = 'TemplateError';
}

type Token = [string, string, number, number, Token[]?];

/** The variables a part uses, and whether it writes one unescaped ({{{x}}} or {{&x}}). */
function scan(part: string, where: string): { names: Set<string>; unescaped: string[] } {
  let tokens: Token[];
  try {
    tokens = Mustache.parse(part) as Token[];
  } catch (error) {
    throw new TemplateError(`${where}: ${(error as Error).message}`);
  }
  const names = new Set<string>();
  const unescaped: string[] = [];
  const walk = (list: Token[]) => {
    for (const [kind, value, , , children] of list) {
      if (kind === 'text') continue;
      if (kind === '>' || kind === '=')
        throw new TemplateError(`${where}: ${kind === '>' ? 'partials' : 'changed delimiters'} are not supported`);
      if (kind === '!') continue;
      names.add(value);
      if (kind === '&') unescaped.push(value);
      if (children !== undefined) walk(children);
    }
  };
  walk(tokens);
  return { names, unescaped };
}

/**
 * Checks a template for its purpose; throws a TemplateError naming the first fault: a part too
 * long, an unknown variable, the link or code missing (from the text, and the HTML if there is
 * one), an unescaped value in the HTML, HTML with a parse error.
 */
export function checkTemplate(purpose: MessagePurpose, template: Template): void {
  const secret = carriesCode(purpose) ? 'code' : 'link';
  const known = new Set<string>(VARIABLES.filter((v) => v !== (secret === 'code' ? 'link' : 'code')));
  if (purpose !== 'invitation') known.delete('orgName');
  const parts: [keyof Template, string | null][] = [
    ['subject', template.subject],
    ['text', template.text],
    ['html', template.html],
  ];
  for (const [where, part] of parts) {
    if (part === null) continue;
    if (part.trim() === '') throw new TemplateError(`${where}: must not be empty`);
    if (part.length > LIMITS[where]) throw new TemplateError(`${where}: at most ${LIMITS[where]} characters`);
    const { names, unescaped } = scan(part, where);
    const unknown = [...names].filter((n) => !known.has(n));
    if (unknown.length > 0)
      throw new TemplateError(
        `${where}: unknown variable ${unknown.map((n) => `{{${n}}}`).join(', ')} (known for ${purpose}: ${[...known].join(', ')})`,
      );
    if (where === 'subject' && /[\r\n]/.test(part)) throw new TemplateError('subject: must be one line');
    if (where !== 'subject' && !names.has(secret))
      throw new TemplateError(`${where}: must hold {{${secret}}}, the ${secret} of the ${purpose} message`);
    if (where === 'html' && unescaped.length > 0)
      throw new TemplateError(`html: every value is escaped; {{{${unescaped[0]}}}} or {{&${unescaped[0]}}} is refused`);
  }
  if (template.html !== null) {
    const errors: string[] = [];
    parseHtml(template.html, {
      sourceCodeLocationInfo: true,
      // A fragment is HTML too: most mail templates are one.
      onParseError: (e) =>
        void (e.code === 'missing-doctype' || errors.push(`${e.code} at line ${e.startLine}, column ${e.startCol}`)),
    });
    if (errors.length > 0) throw new TemplateError(`html: does not parse: ${errors.slice(0, 3).join('; ')}`);
  }
}

const plain = (value: string) => value;

export interface Rendered {
  subject: string;
  text: string;
  html: string | null;
}

/** The message: subject and text as plain text, every value HTML-escaped in the HTML. */
export function render(template: Template, values: Variables): Rendered {
  const view = Object.fromEntries(VARIABLES.map((v) => [v, values[v] ?? '']));
  return {
    // One line, whatever a value holds (a name with a newline would forge a header, were it not).
    subject: Mustache.render(template.subject, view, {}, { escape: plain })
      .replace(/[\r\n]+/g, ' ')
      .trim(),
    text: Mustache.render(template.text, view, {}, { escape: plain }),
    html: template.html === null ? null : Mustache.render(template.html, view),
  };
}

/** Sample values for `cli template preview`: what an operator sees before a person does. */
export function sampleValues(purpose: MessagePurpose, siteName: string): Variables {
  return {
    siteName,
    ...(carriesCode(purpose) ? { code: '123456' } : { link: 'https://shop.example/reset?ticket=SAMPLE-TICKET' }),
    expiresIn: purpose === 'reset_password' ? '1 hour' : carriesCode(purpose) ? '10 minutes' : '24 hours',
    expiresAt: '2030-01-01T12:00:00Z',
    email: 'ada@example.com',
    name: 'Ada Lovelace',
    ...(purpose === 'invitation' ? { orgName: 'Analytical Engines' } : {}),
  };
}

/** "1 hour", "10 minutes", "2 days": the expiry as the message says it. */
export function humanDuration(seconds: number): string {
  const [n, unit] =
    seconds % 86_400 === 0 && seconds >= 86_400 && seconds !== 86_400
      ? [seconds / 86_400, 'day']
      : seconds >= 3600
        ? [Math.round(seconds / 3600), 'hour']
        : [Math.max(1, Math.round(seconds / 60)), 'minute'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

export async function setTemplate(db: Db, site: string, purpose: MessagePurpose, lang: string, template: Template) {
  checkTemplate(purpose, template);
  const values = { subject: template.subject, text: template.text, html: template.html };
  await db
    .insert(messageTemplates)
    .values({ site, purpose, lang, ...values })
    .onConflictDoUpdate({
      target: [messageTemplates.site, messageTemplates.purpose, messageTemplates.lang],
      set: { ...values, updatedAt: new Date() },
    });
}

export async function removeTemplate(db: Db, site: string, purpose: MessagePurpose, lang: string): Promise<boolean> {
  const gone = await db
    .delete(messageTemplates)
    .where(and(eq(messageTemplates.site, site), eq(messageTemplates.purpose, purpose), eq(messageTemplates.lang, lang)))
    .returning({ lang: messageTemplates.lang });
  return gone.length > 0;
}

export async function listTemplates(db: Db, site: string) {
  return db
    .select({
      purpose: messageTemplates.purpose,
      lang: messageTemplates.lang,
      subject: messageTemplates.subject,
      html: messageTemplates.html,
      updatedAt: messageTemplates.updatedAt,
    })
    .from(messageTemplates)
    .where(eq(messageTemplates.site, site))
    .orderBy(asc(messageTemplates.purpose), asc(messageTemplates.lang));
}

/**
 * The template a message of `purpose` in `lang` uses: the site's in that language, in its primary
 * language, in English, else ours. Answers the language it is in too.
 */
export async function templateFor(
  db: Db,
  site: string,
  purpose: MessagePurpose,
  lang: string | undefined,
): Promise<{ template: Template; lang: string }> {
  const wanted = [...new Set([lang, lang?.split('-')[0], 'en'].filter((l): l is string => l !== undefined))];
  const found = await db
    .select()
    .from(messageTemplates)
    .where(and(eq(messageTemplates.site, site), eq(messageTemplates.purpose, purpose)));
  for (const l of wanted) {
    const row = found.find((r) => r.lang.toLowerCase() === l.toLowerCase());
    if (row !== undefined)
      return { template: { subject: row.subject, text: row.text, html: row.html }, lang: row.lang };
  }
  return { template: defaultTemplate(purpose), lang: 'en' };
}
