// NodeMounter.readMountTable shares reads between concurrent callers (a
// thousand operations each checking a mount point must not each read and parse the whole table),
// and every caller still gets a table read after it asked.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NodeMounter } from '../../../src/adapters/node/nodeMounter.js';
import type { MountInfoSource } from '../../../src/mount/mountTable.js';

function line(id: number, mountPoint: string): string {
  return `${id} 1 8:1 / ${mountPoint} rw,relatime shared:1 - ext4 /dev/sda1 rw`;
}

/** A mount table whose reads the test finishes by hand; read n answers with a mount at /m<n>. */
class ManualSource implements MountInfoSource {
  readonly name = 'manual-mountinfo';
  readonly pending: { resolve: (text: string) => void; reject: (err: Error) => void; n: number }[] = [];
  reads = 0;

  read(): Promise<string> {
    const n = ++this.reads;
    return new Promise((resolve, reject) => this.pending.push({ resolve, reject, n }));
  }

  /** Finishes the oldest read still open. */
  finish(fail = false): number {
    const r = this.pending.shift();
    assert.ok(r !== undefined, 'a read is open');
    if (fail) r.reject(new Error(`read ${r.n} failed`));
    else r.resolve([line(1, '/'), line(r.n + 1, `/m${r.n}`)].join('\n'));
    return r.n;
  }
}

/** Lets every pending promise reaction run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

const mountPoints = (t: { entries: readonly { mountPoint: string }[] }): string[] => t.entries.map((e) => e.mountPoint);

describe('NodeMounter.readMountTable shares reads', () => {
  it('callers arriving during a read share one later read; none gets a read that started before it asked', async () => {
    const source = new ManualSource();
    const m = new NodeMounter({ mountInfo: source });
    const first = m.readMountTable();
    await settle();
    const during = Array.from({ length: 50 }, () => m.readMountTable());
    await settle();
    assert.equal(source.reads, 1, 'no second read while the first runs');
    source.finish();
    assert.deepEqual(mountPoints(await first), ['/', '/m1']);
    await settle();
    assert.equal(source.reads, 2, 'the 50 callers share the one read started after the first ended');
    source.finish();
    for (const t of await Promise.all(during)) assert.deepEqual(mountPoints(t), ['/', '/m2']);
    assert.equal(source.reads, 2);
  });

  it('a caller after everything settled starts a fresh read', async () => {
    const source = new ManualSource();
    const m = new NodeMounter({ mountInfo: source });
    const a = m.readMountTable();
    await settle();
    source.finish();
    await a;
    const b = m.readMountTable();
    await settle();
    assert.equal(source.reads, 2);
    source.finish();
    assert.deepEqual(mountPoints(await b), ['/', '/m2']);
  });

  it('a failed read fails its own callers only; the queued callers get the next read', async () => {
    const source = new ManualSource();
    const m = new NodeMounter({ mountInfo: source });
    const first = m.readMountTable();
    await settle();
    const queued = m.readMountTable();
    source.finish(true);
    await assert.rejects(first, /read 1 failed/);
    await settle();
    source.finish();
    assert.deepEqual(mountPoints(await queued), ['/', '/m2']);
  });
});
