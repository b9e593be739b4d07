/**
 * A canary tree outside the root dir, and its fingerprint: every entry (never following a
 * symlink) with its type, permission bits, size, content hash or link target. Two equal
 * fingerprints mean the tree is byte-identical. Not named *.test.ts.
 */
import { createHash } from 'node:crypto';
import { lstatSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import * as path from 'node:path';

/** One line per entry, sorted: `rel type mode size hash-or-target`. */
export function fingerprint(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string, rel: string): void => {
    const st = lstatSync(p);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out.push(`${rel} symlink ${mode} -> ${readlinkSync(p)}`);
    else if (st.isFile()) out.push(`${rel} file ${mode} ${st.size} ${createHash('sha256').update(readFileSync(p)).digest('hex')}`);
    else if (st.isDirectory()) {
      out.push(`${rel} dir ${mode}`);
      for (const name of readdirSync(p).sort()) walk(path.join(p, name), `${rel}/${name}`);
    } else out.push(`${rel} other ${mode}`);
  };
  walk(dir, '.');
  return out.sort();
}

/** The lines that differ between two fingerprints (missing, added), at most `max`. */
export function fingerprintDiff(before: readonly string[], after: readonly string[], max = 10): string[] {
  const a = new Set(after);
  const b = new Set(before);
  const diff = [...before.filter((l) => !a.has(l)).map((l) => `- ${l}`), ...after.filter((l) => !b.has(l)).map((l) => `+ ${l}`)];
  return diff.length > max ? [...diff.slice(0, max), `… ${diff.length - max} more`] : diff;
}
