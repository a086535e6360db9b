import { describe, expect, it } from 'vitest';
import { escapeControls, terminalSafe } from './terminal.ts';

// Every character a terminal acts on, or that reorders what it shows.
const HOSTILE = [
  ...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)),
  ...Array.from({ length: 33 }, (_, i) => String.fromCharCode(0x7f + i)),
  ...'\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029',
];

describe('escapeControls (a value)', () => {
  it('escapes C0, DEL, C1, line separators and bidi formatting characters, line breaks too', () => {
    for (const c of HOSTILE) expect(escapeControls(`a${c}b`)).toMatch(/^a\\u[0-9a-f]{4}b$/);
    expect(escapeControls('\u001b]0;pwned\u0007')).toBe('\\u001b]0;pwned\\u0007');
    expect(escapeControls('\r\n')).toBe('\\u000d\\u000a');
  });

  it('leaves other text as it is: accents, scripts, emoji with their joiners', () => {
    const text = 'Zoë Ōtsuka-李 عائشة 👩‍💻 ‌ x@example.org';
    expect(escapeControls(text)).toBe(text);
  });
});

describe('terminalSafe (a whole output)', () => {
  it("keeps the output's own line breaks and tabs, escapes the rest", () => {
    expect(terminalSafe('one\ttwo\nthree\r\u009b2J\u202e\n')).toBe('one\ttwo\nthree\\u000d\\u009b2J\\u202e\n');
  });

  it('leaves JSON as JSON with the same values', () => {
    const value = { label: HOSTILE.join(''), [`key${HOSTILE.join('')}`]: ['\u001b]52;c;cHduZWQ=\u0007'] };
    for (const json of [JSON.stringify(value), JSON.stringify(value, null, 2)]) {
      const safe = terminalSafe(json);
      expect(safe).not.toMatch(/[^\n\x20-\x7e]/);
      expect(JSON.parse(safe)).toEqual(value);
    }
  });
});
