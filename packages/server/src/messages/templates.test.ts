import { describe, expect, it } from 'vitest';
import { checkTemplate, defaultTemplate, MESSAGE_PURPOSES, render, sampleValues, TemplateError } from './templates.ts';

describe('message templates', () => {
  it('ships an English default of every purpose that passes its own check, with the link or code in each part', () => {
    for (const purpose of MESSAGE_PURPOSES) {
      const template = defaultTemplate(purpose);
      expect(() => checkTemplate(purpose, template), purpose).not.toThrow();
      const out = render(template, sampleValues(purpose, 'Shop'));
      const secret = purpose === 'verify_phone' || purpose === 'login_code' ? '123456' : 'SAMPLE-TICKET';
      expect(out.text).toContain(secret);
      expect(out.html).toContain(secret);
      expect(out.text).toContain("If this wasn't you");
      expect(out.subject).toContain('Shop');
    }
  });

  it('escapes every value in the HTML part, not in the text part; the subject stays one line', () => {
    const out = render(defaultTemplate('reset_password'), {
      ...sampleValues('reset_password', 'Shop'),
      name: '<script>alert(1)</script>',
      siteName: 'Shop\r\nBcc: x@evil.example',
    });
    expect(out.html).not.toContain('<script>');
    expect(out.html).toContain('&lt;script&gt;alert(1)&lt;&#x2F;script&gt;');
    expect(out.text).toContain('Hello <script>alert(1)</script>,');
    expect(out.subject).toBe('Reset your password for Shop Bcc: x@evil.example');
  });

  it('refuses, saying which, an unknown variable, a missing link or code, an unescaped value, HTML that does not parse', () => {
    const base = defaultTemplate('reset_password');
    const refusal = (purpose: Parameters<typeof checkTemplate>[0], t: Partial<typeof base>) => {
      try {
        checkTemplate(purpose, { ...base, ...t });
      } catch (error) {
        expect(error).toBeInstanceOf(TemplateError);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refusal('reset_password', { subject: 'Hi {{firstName}}' })).toMatch(
      /^subject: unknown variable \{\{firstName\}\}/,
    );
    expect(refusal('reset_password', { text: 'Reset it, {{name}}.' })).toMatch(/^text: must hold \{\{link\}\}/);
    expect(refusal('login_code', { text: 'Go: {{link}}' })).toMatch(/^text: unknown variable \{\{link\}\}/);
    expect(refusal('reset_password', { html: '<p>{{{link}}}</p>' })).toMatch(/^html: every value is escaped/);
    expect(
      refusal('reset_password', { html: '<!DOCTYPE html><p class="a" class="b"><a href="{{link}}">x</a></p>' }),
    ).toMatch(/^html: does not parse: duplicate-attribute at line 1, column 34/);
    expect(refusal('reset_password', { text: '{{> header}} {{link}}' })).toMatch(/partials are not supported/);
    expect(refusal('reset_password', { html: '<p><a href="{{link}}">a fragment</a></p>' })).toBe('accepted');
    expect(refusal('reset_password', { html: null })).toBe('accepted');
  });
});
