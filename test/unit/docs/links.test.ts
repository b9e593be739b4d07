// The documentation's links: every relative link of README.md, ARCHITECTURE.md, CONTRIBUTING.md
// and docs/**/*.md resolves to a file or directory of the repository, and every #anchor to a
// heading of its target, slugged as GitHub slugs it. No network: links with a scheme are skipped.
// The checker is fed broken documents too, so that it is known to fail.
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { anchorsOf, checkLinks, documentationFiles, formatProblems, githubSlug, linksOf, type DocTree } from '../../support/docs.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');

const diskTree: DocTree = {
  kind(p) {
    try {
      const st = statSync(p);
      return st.isDirectory() ? 'dir' : st.isFile() ? 'file' : undefined;
    } catch {
      return undefined;
    }
  },
  read: (p) => readFileSync(p, 'utf8'),
};

/** An in-memory tree: relative path → markdown text; directories are implied by the paths. */
function memoryTree(files: Readonly<Record<string, string>>): { tree: DocTree; paths: string[] } {
  const root = '/repo';
  const abs = (rel: string): string => path.join(root, rel);
  const tree: DocTree = {
    kind(p) {
      if (Object.keys(files).some((f) => abs(f) === p)) return 'file';
      if (Object.keys(files).some((f) => abs(f).startsWith(p + '/'))) return 'dir';
      return undefined;
    },
    read(p) {
      const rel = path.relative(root, p);
      const text = files[rel];
      if (text === undefined) throw new Error(`no ${rel}`);
      return text;
    },
  };
  return { tree, paths: Object.keys(files).filter((f) => f.endsWith('.md')).map(abs) };
}

describe('documentation links', () => {
  it('the documentation files exist: README.md, ARCHITECTURE.md, CONTRIBUTING.md, docs/reference/', () => {
    const files = documentationFiles(REPO_ROOT).map((f) => path.relative(REPO_ROOT, f));
    for (const f of ['README.md', 'ARCHITECTURE.md', 'CONTRIBUTING.md', 'docs/operating.md', 'docs/reference/README.md', 'docs/feature-gates.md', 'docs/kubelet-fidelity.md', 'docs/explorer.md', 'docs/benchmarks.md']) {
      assert.ok(files.includes(f), `${f} missing from ${files.join(', ')}`);
    }
  });

  it('every relative link resolves, and every #anchor names a heading of its target', () => {
    const files = documentationFiles(REPO_ROOT);
    const links = files.reduce((n, f) => n + linksOf(readFileSync(f, 'utf8')).length, 0);
    assert.ok(links > 100, `only ${links} links found: is the link parser broken?`);
    const problems = checkLinks(files, diskTree, REPO_ROOT);
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it('README.md stays short: at most 250 lines', () => {
    const lines = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8').split('\n').length;
    assert.ok(lines <= 250, `README.md has ${lines} lines; move the rest to docs/`);
  });
});

describe('the link checker fails on a broken link', () => {
  const docs = {
    'README.md': [
      '# nodevol',
      'See [the reference](docs/reference/audit.md#exit-codes), [gates](docs/gates.md),',
      '[a heading](#nodevol), [no heading](#no-such-heading), [web](https://example.com/x#y),',
      '[in the audit](docs/reference/audit.md#not-a-heading) and [a dir](docs/reference/).',
      '`[in code](docs/missing.md)` is not a link, nor is this:',
      '```md',
      '[in a fence](docs/also-missing.md)',
      '# not a heading',
      '```',
      '[fenced](#not-a-heading)',
      '[ref]: docs/none.md',
    ].join('\n'),
    'docs/reference/audit.md': '# `nodevol audit`\n\n## Exit codes\n\n| code | meaning |\n',
  };

  it('names each missing file, missing anchor and broken definition, with its line', () => {
    const { tree, paths } = memoryTree(docs);
    const problems = checkLinks(paths, tree, '/repo');
    assert.deepEqual(
      problems.map((p) => `${p.file}:${p.line ?? 0}: ${p.message.split(':')[0]!}`),
      [
        'README.md:2: docs/gates.md',
        'README.md:3: #no-such-heading',
        'README.md:4: docs/reference/audit.md#not-a-heading',
        'README.md:10: #not-a-heading',
        'README.md:11: docs/none.md',
      ],
      formatProblems(problems),
    );
  });

  it('passes once the links are fixed', () => {
    const { tree, paths } = memoryTree({
      'README.md': '# nodevol\n\nSee [exit codes](docs/reference/audit.md#exit-codes) and [top](#nodevol).\n',
      'docs/reference/audit.md': docs['docs/reference/audit.md'],
    });
    assert.deepEqual(checkLinks(paths, tree, '/repo'), []);
  });
});

describe("GitHub's heading anchors", () => {
  it('slugs as github-slugger does: punctuation and backticks dropped, spaces to hyphens, case folded', () => {
    assert.equal(githubSlug('`nodevol audit`'.replace(/`/g, '')), 'nodevol-audit');
    assert.equal(githubSlug('Generated workloads (--generate)'), 'generated-workloads---generate');
    assert.equal(githubSlug('Deploying it: the image, the kustomize base, node-problem-detector'), 'deploying-it-the-image-the-kustomize-base-node-problem-detector');
    assert.equal(githubSlug('Metrics (/metrics)'), 'metrics-metrics');
    assert.equal(githubSlug('-o prom'), '-o-prom');
    assert.equal(githubSlug('Long-running: --interval'), 'long-running---interval');
    assert.equal(githubSlug('snake_case stays'), 'snake_case-stays');
    assert.equal(githubSlug('Ünïcode → kept'), 'ünïcode--kept');
  });

  it('renders the heading first (code spans, links) and numbers duplicates -1, -2', () => {
    const anchors = anchorsOf('# `nodevol audit`\n## [Flags](x.md)\n## Flags\n## Flags\n### Exit codes ###\n<a id="custom"></a>\n```\n# fenced\n```\n');
    assert.deepEqual([...anchors].sort(), ['custom', 'exit-codes', 'flags', 'flags-1', 'flags-2', 'nodevol-audit']);
  });
});
