/**
 * Escaping of text printed to a terminal, the way kubectl's table printer does it
 * (cli-runtime printers: a cell is cut at the first newline, carriage return or form feed and
 * marked "...", ESC is shown as "^[" and CR as "\r"), plus what kubectl leaves raw: every other
 * C0 and C1 control character, DEL and the Unicode bidirectional overrides are shown as
 * \xNN / \uNNNN. A directory or driver name can then neither forge a row nor move the cursor.
 */

// C0 (except the three line breaks handled first), DEL, C1, and the bidi controls.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function escapeChar(c: string): string {
  if (c === '\u001b') return '^[';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** One table cell: cut at the first line break ("..." marks the cut), control characters escaped. */
export function escapeCell(s: string): string {
  const cut = s.search(/[\n\r\f]/);
  const head = cut >= 0 ? s.slice(0, cut) : s;
  return head.replace(UNSAFE, escapeChar) + (cut >= 0 ? '...' : '');
}

/** A free-text line (a reason, an error): nothing cut, every control character escaped, \n as "\n". */
export function escapeText(s: string): string {
  return s.replace(UNSAFE, (c) => (c === '\n' ? '\\n' : c === '\f' ? '\\f' : escapeChar(c)));
}

/**
 * The width to print at: $COLUMNS when set to a positive number (as a shell exports it, or as a
 * user asks for one), else the terminal's width when `stream` is one, else `fallback`.
 */
export function terminalColumns(fallback: number, stream: { readonly isTTY?: boolean; readonly columns?: number } = process.stdout): number {
  const env = Number(process.env['COLUMNS']);
  if (Number.isSafeInteger(env) && env > 0) return env;
  if (stream.isTTY === true && stream.columns !== undefined && stream.columns > 0) return stream.columns;
  return fallback;
}
