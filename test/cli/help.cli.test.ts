// Help wraps once, at the terminal's width ($COLUMNS here, as the shell exports it): no line
// longer than the width, and no paragraph broken where the next word would still have fitted
// (a hard newline in the source, then commander's own wrap, broke sentences twice).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { wrapHelpText } from '../../src/cli/flags.js';
import { NODEVOL_BIN } from '../support/cliProcess.js';

const COMMANDS = ['', 'audit', 'agent', 'mock-driver', 'demo', 'explore', 'recover', 'timeline', 'version', 'completion'];

function help(command: string, columns: number): string {
  const env = { ...process.env, COLUMNS: String(columns) };
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...(command === '' ? [] : [command]), '--help'], { encoding: 'utf8', timeout: 60_000, env });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

// Every character the help prints is one column and one UTF-16 unit (no emoji, no wide script).
const width = (s: string): number => s.length;
const indent = (s: string): number => /^ */.exec(s)?.[0].length ?? 0;

/**
 * Every place where a line goes on in the next one although the next word would have fitted
 * after it. A break is deliberate after a sentence or heading (`.` `:`), after a shell line
 * continuation (`\`), after a flag whose description goes under it, and before a line that starts
 * a new item (same or smaller indent, or a new `#` comment).
 */
function unforcedBreaks(text: string, columns: number): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    const a = lines[i] ?? '';
    const b = lines[i + 1] ?? '';
    if (a.trim() === '' || b.trim() === '') continue;
    if (/[.:\\]$/.test(a)) continue;
    if (indent(a) === 2 && indent(b) === 6 && !/ {2}/.test(a.trim()) && !a.trim().startsWith('#')) continue; // a flag alone on its line
    const comment = /^ *# /.test(a) && /^ *# /.test(b) && indent(a) === indent(b);
    const paragraph = indent(a) === 0 && indent(b) === 0;
    const hanging = indent(b) > indent(a);
    if (!comment && !paragraph && !hanging) continue;
    const next = b.trim().replace(/^# /, '').split(' ')[0] ?? '';
    if (width(a) + 1 + width(next) <= columns) found.push(`${a}⏎${b}`);
  }
  return found;
}

describe('--help wraps once, at the terminal width', () => {
  for (const columns of [60, 200]) {
    for (const command of COMMANDS) {
      it(`${command === '' ? 'nodevol' : command} --help at COLUMNS=${columns}`, () => {
        const text = help(command, columns);
        for (const line of text.split('\n')) assert.ok(width(line) <= columns, `${width(line)} > ${columns}: ${line}`);
        assert.deepEqual(unforcedBreaks(text, columns), []);
      });
    }
  }

  it('at 200 columns a description is one paragraph on one line', () => {
    assert.match(help('', 200), /^A kubelet-compatible CSI volume manager with KEP-6058 global mount reconstruction\. Finds .* after a restart or reboot\.$/m);
  });

  it('the check above finds a paragraph broken twice', () => {
    // What `audit --help` printed at 200 columns: a hard newline in the source, then the wrap.
    const twice = 'Read-only check of a node: which CSI volumes kubelet tracks, which it recovers only with\nCSIGlobalMountReconstruction, and which it will lose (orphaned).';
    assert.equal(unforcedBreaks(twice, 200).length, 1);
  });
});

describe('wrapHelpText', () => {
  it('wraps paragraphs between words, list items under their text, comments as comments, commands with a backslash', () => {
    const text = [
      'Exit codes: 0 played; 2 could not run (bad scenario, report not writable).',
      '  1  something is orphaned, fails reconstruction, or is at-risk',
      '  # Against the cluster view, from a file on the node',
      '  nodevol audit --cluster-state cluster.json --node-name node-1',
      '  nodevol agent --root-dir /r --node-name n \\',
      '    --feature-gates G=true',
      '',
      'short',
    ].join('\n');
    assert.equal(
      wrapHelpText(text, 40),
      [
        'Exit codes: 0 played; 2 could not run',
        '(bad scenario, report not writable).',
        '  1  something is orphaned, fails',
        '     reconstruction, or is at-risk',
        '  # Against the cluster view, from a',
        '  # file on the node',
        '  nodevol audit --cluster-state \\',
        '    cluster.json --node-name node-1',
        '  nodevol agent --root-dir /r \\',
        '    --node-name n \\',
        '    --feature-gates G=true',
        '',
        'short',
      ].join('\n'),
    );
  });
});

describe('--help says each default once', () => {
  /** Every option of every command (completion loads them all), with the description its help prints. */
  async function optionHelp(): Promise<{ where: string; text: string }[]> {
    const { buildProgram } = await import('../../src/cli/main.js');
    const program = await buildProgram(() => undefined, ['completion']);
    const out: { where: string; text: string }[] = [];
    const visit = (cmd: typeof program, name: string): void => {
      const helper = cmd.createHelp();
      for (const o of cmd.options) out.push({ where: `${name} ${o.flags}`, text: helper.optionDescription(o) });
      for (const sub of cmd.commands) visit(sub, `${name} ${sub.name()}`);
    };
    visit(program, 'nodevol');
    return out;
  }

  it('no option prints `(default: false)` or `(default: [])`, nor a second default after one its description states', async () => {
    const options = await optionHelp();
    assert.ok(options.length > 60, `only ${options.length} options`);
    const twice = options.filter((o) => (o.text.match(/\bdefault\b/gi) ?? []).length > 1 || /default: (false|\[\])/.test(o.text));
    assert.deepEqual(twice, []);
    // The defaults that are values are still printed, once.
    const byFlag = new Map(options.map((o) => [o.where, o.text]));
    assert.match(byFlag.get('nodevol audit --root-dir <dir>') ?? '', /\(default: "\/var\/lib\/kubelet"\)$/);
    assert.match(byFlag.get('nodevol recover --yes') ?? '', /^act \(default: print the plan and change nothing\)$/);
    assert.match(byFlag.get('nodevol explore --crash <kind>') ?? '', /\(choices: "none", "restart", "reboot", "stop", "both", "all", default: "both"\)$/);
  });

  it('as printed: recover --help and explore --help', () => {
    for (const command of ['recover', 'explore', 'mock-driver', 'agent']) {
      const text = help(command, 200);
      assert.doesNotMatch(text, /\(default: (false|\[\])\)/, command);
    }
  });
});
