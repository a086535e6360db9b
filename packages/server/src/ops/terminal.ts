// What the CLI prints from a file or the database reaches a terminal, which obeys what it reads:
// ESC and the C1 controls start sequences that set the window title (OSC 0), write the clipboard
// (OSC 52) or move the cursor; CR goes back over a line already printed and LF starts a forged
// one; bidirectional formatting characters reorder what is shown around them. Each is printed as
// its escape instead (ESC as \u001b), which a reader sees and a terminal does not act on.

/** C0, DEL, C1, U+2028/U+2029, and the bidi formatting characters the spec keeps out of names. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;

const asEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** One value (a field, a key, a message quoting input): every control character escaped, line breaks too. */
export const escapeControls = (value: string): string => value.replace(CONTROLS, asEscape);

/**
 * A whole output, as the CLI writes it: its own line breaks and tabs stay, any other control
 * character is escaped. JSON stays JSON with the same values (within a string, \u001b is ESC).
 */
export const terminalSafe = (output: string): string =>
  output.replace(CONTROLS, (c) => (c === '\n' || c === '\t' ? c : asEscape(c)));
