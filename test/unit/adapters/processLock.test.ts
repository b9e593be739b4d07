// The lock a process holds for its lifetime (src/adapters/node/processLock.ts): held, it names its
// holder to the next taker; released or SIGKILLed, the next taker gets it at once; processes
// racing for it, over a stale lock or not, end with exactly one holder. Holders in other processes
// are child node processes; nothing needs root.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { acquireProcessLock, describeBusyLock, processLockHolder, type BusyLock, type HeldLock } from '../../../src/adapters/node/processLock.js';
import { waitFor } from '../../support/e2e/waitFor.js';

const MODULE = path.resolve(import.meta.dirname, '../../../src/adapters/node/processLock.js');

/** A child that takes the lock when told ("go" on stdin), prints the outcome as one JSON line, and stays alive while it holds it. */
const CHILD = `
const { acquireProcessLock } = await import(process.argv[1]);
const [base, dir] = process.argv.slice(2);
process.stdout.write('ready\\n');
process.stdin.once('data', async () => {
  const r = await acquireProcessLock({ base, dir, command: 'test holder' });
  process.stdout.write(JSON.stringify({ pid: process.pid, held: r.held, entry: r.entry, owner: r.held ? undefined : r.owner?.pid }) + '\\n');
  if (r.held) setInterval(() => undefined, 1 << 30);
  else process.exit(0);
});
`;

interface ChildOutcome {
  readonly pid: number;
  readonly held: boolean;
  readonly entry: string;
  readonly owner?: number;
}

class Taker {
  readonly child: ChildProcessWithoutNullStreams;
  out = '';
  exited = false;
  constructor(base: string, dir: string) {
    this.child = spawn(process.execPath, ['--input-type=module', '-e', CHILD, MODULE, base, dir]);
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (s: string) => (this.out += s));
    this.child.on('exit', () => (this.exited = true));
  }

  ready(): Promise<true> {
    return waitFor(() => this.out.startsWith('ready\n') || undefined, { what: `child ${this.child.pid} to start`, timeoutMs: 30_000 });
  }

  go(): void {
    this.child.stdin.write('go\n');
  }

  outcome(): Promise<ChildOutcome> {
    return waitFor(
      () => {
        const line = this.out.split('\n')[1];
        return line === undefined || line === '' ? undefined : (JSON.parse(line) as ChildOutcome);
      },
      { what: `child ${this.child.pid} to take the lock or be refused`, timeoutMs: 30_000, observe: () => this.out },
    );
  }

  async kill(): Promise<void> {
    if (!this.exited) this.child.kill('SIGKILL');
    await waitFor(() => this.exited, { what: `child ${this.child.pid} to exit`, timeoutMs: 10_000 });
  }
}

async function holdInChild(base: string, dir: string): Promise<{ taker: Taker; outcome: ChildOutcome }> {
  const taker = new Taker(base, dir);
  await taker.ready();
  taker.go();
  return { taker, outcome: await taker.outcome() };
}

describe('processLock', () => {
  let base = '';
  let n = 0;
  const takers: Taker[] = [];
  const freshDir = async (): Promise<string> => {
    const dir = path.join(base, `case-${++n}`);
    await mkdir(dir);
    return dir;
  };
  before(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'nodevol-lock-'));
  });
  after(async () => {
    for (const t of takers) await t.kill();
    await rm(base, { recursive: true, force: true });
  });

  it('a second taker finds it held and is told by whom; after release the next one takes it and removes the old number', async () => {
    const root = await freshDir();
    const dir = path.join(root, 'nodevol', 'lock');
    const first = await acquireProcessLock({ base: root, dir, command: 'nodevol agent', now: () => new Date('2026-01-02T03:04:05Z') });
    assert.ok(first.held);
    assert.equal(first.entry, path.join(dir, '1'));
    const second = (await acquireProcessLock({ base: root, dir, command: 'nodevol recover --yes' })) as BusyLock;
    assert.equal(second.held, false);
    assert.deepEqual(second.owner, { pid: process.pid, command: 'nodevol agent', since: '2026-01-02T03:04:05.000Z' });
    assert.equal(second.unknown, undefined);
    assert.equal(describeBusyLock(second), `nodevol agent (pid ${process.pid}, since 2026-01-02T03:04:05.000Z) holds ${dir} (${dir}/1)`);
    assert.deepEqual(await processLockHolder(path.dirname(dir), dir), second);
    await first.release();
    await first.release();
    assert.equal(await processLockHolder(path.dirname(dir), dir), undefined, 'released: nobody holds it');
    const third = (await acquireProcessLock({ base: root, dir, command: 'nodevol recover --yes' })) as HeldLock;
    assert.equal(third.held, true);
    assert.equal(third.entry, path.join(dir, '2'));
    assert.deepEqual((await readdir(dir)).sort(), ['2', '2.json'], 'the old number and record are gone, no socket of a taker is left');
    await third.release();
  });

  it('held by another process: refused naming its pid; once it is SIGKILLed the next taker gets it at once', async () => {
    const root = await freshDir();
    const dir = path.join(root, 'lock');
    const { taker, outcome } = await holdInChild(root, dir);
    takers.push(taker);
    assert.equal(outcome.held, true);
    const busy = (await acquireProcessLock({ base: root, dir, command: 'test' })) as BusyLock;
    assert.equal(busy.held, false);
    assert.equal(busy.owner?.pid, taker.child.pid);
    assert.equal(busy.owner?.command, 'test holder');
    await taker.kill();
    const taken = (await acquireProcessLock({ base: root, dir, command: 'test' })) as HeldLock;
    assert.equal(taken.held, true, 'a SIGKILLed holder does not keep the lock');
    assert.equal(taken.entry, path.join(dir, '2'));
    await taken.release();
  });

  it('four takers at once over a released lock (each finds it stale while the others do): exactly one holds it', async () => {
    const root = await freshDir();
    const dir = path.join(root, 'lock');
    const old = (await acquireProcessLock({ base: root, dir, command: 'old' })) as HeldLock;
    await old.release();
    // Their steps interleave at every await: each reads number 1 and finds its socket refused
    // before any of them links a new one.
    const results = await Promise.all([1, 2, 3, 4].map((i) => acquireProcessLock({ base: root, dir, command: `taker ${i}` })));
    const held = results.filter((r): r is HeldLock => r.held);
    assert.equal(held.length, 1, JSON.stringify(results.map((r) => ({ held: r.held, entry: r.entry }))));
    assert.equal(held[0]!.entry, path.join(dir, '2'));
    for (const r of results) if (!r.held) assert.equal(r.entry, held[0]!.entry);
    await held[0]!.release();
  });

  it('a taker that links a number below the highest (others took the lock meanwhile) gives it up and is told who holds it', async () => {
    const root = await freshDir();
    const dir = path.join(root, 'lock');
    await ((await acquireProcessLock({ base: root, dir, command: 'old' })) as HeldLock).release();
    let z: HeldLock | undefined;
    const slow = await acquireProcessLock({
      base: root,
      dir,
      command: 'slow',
      beforeLink: async (n) => {
        if (z !== undefined) return;
        assert.equal(n, 2, 'the slow taker found 1 released and is about to link 2');
        // Meanwhile X takes 2 and goes, and Z takes 3, removing 1 and 2: number 2 is free again.
        const x = (await acquireProcessLock({ base: root, dir, command: 'x' })) as HeldLock;
        assert.equal(x.entry, path.join(dir, '2'));
        await x.release();
        z = (await acquireProcessLock({ base: root, dir, command: 'z' })) as HeldLock;
        assert.equal(z.entry, path.join(dir, '3'));
        assert.deepEqual((await readdir(dir)).filter((name) => /^[0-9]+$/.test(name)), ['3']);
      },
    });
    assert.equal(slow.held, false, 'linking 2 below the holder of 3 is not holding the lock');
    assert.equal(slow.entry, path.join(dir, '3'));
    assert.equal(slow.held ? undefined : slow.owner?.command, 'z');
    assert.ok(!existsSync(path.join(dir, '2')), 'the slow taker removed the 2 it linked');
    await z?.release();
  });

  for (const stale of [false, true]) {
    it(`six processes racing for it${stale ? ' over the lock of a SIGKILLed holder' : ''}: exactly one holds it, the others are told it is held`, { timeout: 120_000 }, async () => {
      const root = await freshDir();
      const dir = path.join(root, 'lock');
      if (stale) {
        const dead = await holdInChild(root, dir);
        assert.equal(dead.outcome.held, true);
        await dead.taker.kill();
      }
      const racers = Array.from({ length: 6 }, () => new Taker(root, dir));
      takers.push(...racers);
      for (const r of racers) await r.ready();
      for (const r of racers) r.go();
      const outcomes = await Promise.all(racers.map((r) => r.outcome()));
      const holders = outcomes.filter((o) => o.held);
      assert.equal(holders.length, 1, JSON.stringify(outcomes));
      const holder = holders[0]!;
      for (const o of outcomes.filter((x) => !x.held)) assert.equal(o.entry, holder.entry, `refused by the holder's number: ${JSON.stringify(outcomes)}`);
      assert.equal((await processLockHolder(path.dirname(dir), dir))?.owner?.pid, holder.pid);
      for (const r of racers) await r.kill();
      assert.equal(await processLockHolder(path.dirname(dir), dir), undefined);
    });
  }

  it('a lock dir path longer than a unix socket path holds is taken and probed all the same', async () => {
    const root = await freshDir();
    const dir = path.join(root, 'x'.repeat(60), 'y'.repeat(60), 'lock');
    await mkdir(path.dirname(dir), { recursive: true });
    const first = (await acquireProcessLock({ base: path.dirname(dir), dir, command: 'long' })) as HeldLock;
    assert.equal(first.held, true);
    assert.ok(Buffer.byteLength(path.join(dir, '1')) > 107);
    assert.equal((await processLockHolder(path.dirname(dir), dir))?.owner?.command, 'long');
    assert.equal((await acquireProcessLock({ base: path.dirname(dir), dir, command: 'long' })).held, false);
    await first.release();
    assert.equal(await processLockHolder(path.dirname(dir), dir), undefined);
  });

  it('refuses a lock dir that is a symlink, and never follows a symlink or file named as a number', async () => {
    const root = await freshDir();
    const elsewhere = await freshDir();
    await symlink(elsewhere, path.join(root, 'lock'));
    await assert.rejects(acquireProcessLock({ base: root, dir: path.join(root, 'lock'), command: 't' }), /lock dir .*\/lock: .*\/lock is a symlink; refusing to follow it/);
    assert.deepEqual(await readdir(elsewhere), []);

    // A live socket elsewhere, symlinked under the next number, does not make the lock held.
    const other = await freshDir();
    const live = (await acquireProcessLock({ base: other, dir: path.join(other, 'lock'), command: 'other' })) as HeldLock;
    const dir = path.join(root, 'lock2');
    await mkdir(dir);
    await symlink(live.entry, path.join(dir, '1'));
    await writeFile(path.join(dir, '2'), 'not a socket');
    const taken = (await acquireProcessLock({ base: root, dir, command: 't' })) as HeldLock;
    assert.equal(taken.held, true);
    assert.equal(taken.entry, path.join(dir, '3'));
    assert.ok(existsSync(live.entry), 'the socket the symlink pointed at is untouched');
    await taken.release();
    await live.release();
  });

  it('nobody holds a lock whose directory does not exist', async () => {
    assert.equal(await processLockHolder(path.join(base, 'missing'), path.join(base, 'missing', 'lock')), undefined);
  });
});
