// The pieces of the documentation's example checks (test/support/docExamples.ts), each fed the
// cases it must get right or refuse; test/cli/docExamples.cli.test.ts runs them over the docs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fencedBlocks,
  helpExampleCommands,
  nodevolArgs,
  parseMarker,
  sameOutput,
  shellCommands,
  transcriptSteps,
  transcriptText,
} from '../../support/docExamples.js';

describe('doc examples: markers and blocks', () => {
  it('finds fenced blocks with their info string, body offsets and the line above', () => {
    const md = 'intro\n<!-- doc-example: nodevol version -->\n```\nnodevol v0.1.0\nNode.js\n```\n\n~~~sh\nnodevol demo\n~~~\n````\n```\ninner\n````\n';
    const blocks = fencedBlocks(md);
    assert.deepEqual(blocks.map((b) => [b.info, b.line, b.body, b.above]), [
      ['', 3, 'nodevol v0.1.0\nNode.js', '<!-- doc-example: nodevol version -->'],
      ['sh', 8, 'nodevol demo', ''],
      ['', 11, '```\ninner', '~~~'],
    ]);
    assert.equal(md.slice(blocks[0]!.bodyStart, blocks[0]!.bodyEnd), 'nodevol v0.1.0\nNode.js\n');
  });

  it('reads a marker: a command, a transcript, fixture and slow; refuses a malformed one', () => {
    assert.equal(parseMarker('plain prose'), undefined);
    assert.deepEqual(parseMarker('<!-- doc-example: nodevol audit --root-dir x -->'), { slow: false, command: 'nodevol audit --root-dir x' });
    assert.deepEqual(parseMarker('<!-- doc-example -->'), { slow: false });
    assert.deepEqual(parseMarker('<!-- doc-example fixture=cluster-story-1 slow -->'), { slow: true, fixture: 'cluster-story-1' });
    assert.throws(() => parseMarker('<!-- doc-example fast: nodevol version -->'), /unknown option fast/);
    assert.throws(() => parseMarker('<!-- doc-example: nodevol version'), /malformed/);
  });

  it('splits a transcript into its commands and outputs, and back', () => {
    const body = '$ nodevol version\nnodevol v0.1.0\n$ nodevol audit \\\n  -o summary\nOK: 0\n$ echo $?\n0';
    const steps = transcriptSteps(body);
    assert.deepEqual(steps, [
      { command: 'nodevol version', output: 'nodevol v0.1.0' },
      { command: 'nodevol audit -o summary', output: 'OK: 0' },
      { command: 'echo $?', output: '0' },
    ]);
    assert.equal(transcriptText(steps), '$ nodevol version\nnodevol v0.1.0\n$ nodevol audit -o summary\nOK: 0\n$ echo $?\n0');
    assert.throws(() => transcriptSteps('output first\n$ nodevol version'), /starts with a "\$ " command line/);
  });

  it('compares what varies as a placeholder, and nothing else', () => {
    const a = 'runs 53  crash points 490  distinct states 26  2.1 s (cpu 1.3 s)  25.8 runs/s\nNode.js v20.20.2 (linux/x64), CSI v1';
    const b = 'runs 53  crash points 490  distinct states 26  15.1 s (cpu 4.5 s)  3.5 runs/s\nNode.js v22.1.0 (linux/arm64), CSI v1\n';
    assert.ok(sameOutput(a, b));
    assert.ok(!sameOutput(a, b.replace('490', '2818')));
  });
});

describe('doc examples: commands as a shell reads them', () => {
  it('joins continuations, drops comments and redirections, expands the script\'s variables, finds <(…) and $(…)', () => {
    const script = [
      '# a comment',
      'R=/tmp/node/root',
      "echo 'faults: []' > /tmp/f.yaml   # trailing comment",
      'nodevol mock-driver --endpoint unix://$R/csi.sock \\',
      '  --node-id "node 1" --state-dir ${R}/d 2>&1 | tee log',
      'source <(nodevol completion bash)',
      'for p in $(kubectl get pods -o name); do echo $p; done',
      'NODEVOL_PROPERTY_SEED=1234 npm run fuzz',
      'npx nodevol demo && node bin/nodevol.js version -o json',
    ].join('\n');
    const words = shellCommands(script).map((c) => c.words.join(' '));
    assert.deepEqual(words, [
      'echo faults: []',
      'nodevol mock-driver --endpoint unix:///tmp/node/root/csi.sock --node-id node 1 --state-dir /tmp/node/root/d',
      'tee log',
      'nodevol completion bash',
      'source $(…)',
      'kubectl get pods -o name',
      'for p in $(…)',
      'do echo $p',
      'done',
      'npm run fuzz',
      'npx nodevol demo',
      'node bin/nodevol.js version -o json',
    ]);
    const args = shellCommands(script).map((c) => nodevolArgs(c.words)).filter((a) => a !== undefined);
    assert.deepEqual(args, [
      ['mock-driver', '--endpoint', 'unix:///tmp/node/root/csi.sock', '--node-id', 'node 1', '--state-dir', '/tmp/node/root/d'],
      ['completion', 'bash'],
      ['demo'],
      ['version', '-o', 'json'],
    ]);
    assert.deepEqual(nodevolArgs(['sudo', 'node', 'bin/nodevol.js', 'agent']), ['agent']);
    assert.equal(nodevolArgs(['kubectl', 'get', 'pods']), undefined);
  });

  it('takes the commands of a --help text\'s Examples block, not its comments', () => {
    const help = 'Usage: nodevol demo\n\nExamples:\n  # The bug\n  nodevol demo\n\n  # As JSON\n  nodevol demo -o json \\\n    --no-html\n';
    const cmds = helpExampleCommands(help).flatMap((s) => shellCommands(s)).map((c) => c.words.join(' '));
    assert.deepEqual(cmds, ['nodevol demo', 'nodevol demo -o json --no-html']);
    assert.deepEqual(helpExampleCommands('Usage: x\n'), []);
  });
});
