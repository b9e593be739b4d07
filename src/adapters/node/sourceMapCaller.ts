/**
 * klog's `caller` (file:line) of the TypeScript source, not of the JavaScript that runs: the
 * shipped CLI is one bundle (dist/bundle/cli/main.cjs, whitespace-minified: one line holds most of
 * the program), so every stack frame names `main.cjs:46`. The build writes a source map next to
 * every file that runs (tsc for dist/src, esbuild for the bundle, chained through tsc's maps), and
 * this resolver reads the frame's position back through it with node's own source map reader
 * (node:module SourceMap).
 *
 * Lazy and cached: nothing is read until the first line is logged; each generated file's map is
 * read and parsed once (the bundle's, about 1.6 MB, in a few tens of milliseconds), and each call
 * site is resolved once. A file without a readable map (or a position the map does not cover)
 * resolves to undefined: the caller keeps the generated file:line.
 */
import { readFileSync, statSync } from 'node:fs';
import { SourceMap, type SourceMapping } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Largest source map read: the bundle's is ~1.6 MB. */
const MAX_MAP_BYTES = 32 * 1024 * 1024;

/** Resolves a generated position (1-based line and column) to "source.ts:line". */
export type CallerResolver = (file: string, line: number, column: number) => string | undefined;

export function sourceMappedCallerResolver(): CallerResolver {
  const maps = new Map<string, SourceMap | undefined>();
  const mapOf = (file: string): SourceMap | undefined => {
    if (maps.has(file)) return maps.get(file);
    let map: SourceMap | undefined;
    try {
      const jsPath = file.startsWith('file:') ? fileURLToPath(file) : file;
      const mapPath = `${jsPath}.map`;
      // A regular file of a sane size only: a log line must never block on a FIFO or read a huge file.
      const st = statSync(mapPath);
      if (st.isFile() && st.size <= MAX_MAP_BYTES) map = new SourceMap(JSON.parse(readFileSync(mapPath, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]);
    } catch {
      map = undefined;
    }
    maps.set(file, map);
    return map;
  };
  return (file, line, column) => {
    if (!/\.(c|m)?js$/.test(file)) return undefined;
    // Node answers {} for a position the map does not cover, whatever the typings say.
    const entry: Partial<SourceMapping> | undefined = mapOf(file)?.findEntry(line - 1, column - 1);
    if (entry?.originalSource === undefined || entry.originalLine === undefined) return undefined;
    const source = entry.originalSource.startsWith('file:') ? fileURLToPath(entry.originalSource) : entry.originalSource;
    return `${path.basename(source)}:${entry.originalLine + 1}`;
  };
}
