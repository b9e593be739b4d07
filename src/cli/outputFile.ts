/**
 * `nodevol audit --output-file FILE`: the output replaces FILE atomically, so that a reader
 * (node_exporter's textfile collector) sees the previous content or the new one, never an empty
 * or partial file. The temp file is `<FILE>.<pid>.tmp` in FILE's directory (the collector reads
 * `*.prom` only), written with fsync and renamed over FILE, then the directory fsynced; the write
 * goes through directory descriptors beneath FILE's real directory (no symlink followed).
 */
import * as path from 'node:path';
import { realpathSync } from 'node:fs';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { writeFileAtomic } from '../ports/fs.js';

export async function writeOutputFile(file: string, text: string): Promise<void> {
  const abs = path.resolve(file);
  const name = path.basename(abs);
  if (name === '' || name === '.' || name === '..' || file.endsWith('/')) throw new Error('not a file name');
  const dir = realpathSync(path.dirname(abs));
  const fs = new NodeFileSystem({ confineChangesTo: [dir] });
  await writeFileAtomic(fs, path.join(dir, name), new TextEncoder().encode(text), { mode: 0o644, writerId: String(process.pid) });
}
