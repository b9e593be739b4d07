/**
 * A new private temp dir for a command's output (the demo's HTML report, the explorer's shrunk
 * counterexamples): made in the OS temp dir (`TMPDIR`, else `/tmp`), mode 0700. When it cannot be
 * made (a read-only or missing `TMPDIR`), the error names the directory, says where it came from
 * and what to do instead, for a one-line message and exit 2: never a stack trace.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

import { errorMessage } from '../ports/fs.js';

/** `prefix`: the new dir's name before its random suffix; `instead`: the flags that avoid the temp dir (", or pass --html FILE"). */
export function newTempDir(prefix: string, instead: string): string {
  const base = tmpdir();
  try {
    return mkdtempSync(path.join(base, prefix));
  } catch (err) {
    // os.tmpdir(): TMPDIR, else TMP, else TEMP, else /tmp.
    const from = ['TMPDIR', 'TMP', 'TEMP'].find((v) => (process.env[v] ?? '') !== '');
    const origin = from === undefined ? 'the default: TMPDIR is not set' : `from ${from}`;
    throw new Error(`cannot create a temp dir in ${base} (${origin}): ${errorMessage(err)}; set TMPDIR to a writable directory${instead}`, { cause: err });
  }
}
