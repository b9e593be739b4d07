import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  InconsistentReadError,
  MAX_LIST_TRIES,
  needsConsistentRead,
  readMountInfoText,
  type MountInfoSource,
} from '../../../src/mount/mountTable.js';

/** A source returning the given texts in turn (the last one repeats), counting reads. */
class ScriptedSource implements MountInfoSource {
  reads = 0;
  constructor(
    private readonly texts: readonly string[],
    readonly kernelRelease: string | undefined,
    readonly name = '/proc/self/mountinfo',
  ) {}
  read(): Promise<string> {
    const text = this.texts[Math.min(this.reads, this.texts.length - 1)] ?? '';
    this.reads++;
    return Promise.resolve(text);
  }
}

/** A source whose content changes on every read. */
class ChurningSource implements MountInfoSource {
  reads = 0;
  readonly name = '/proc/self/mountinfo';
  readonly kernelRelease = '4.19.0-26-amd64';
  read(): Promise<string> {
    this.reads++;
    return Promise.resolve(`version ${this.reads}`);
  }
}

describe('needsConsistentRead', () => {
  const cases: [string | undefined, boolean][] = [
    ['5.4.0-150-generic', true],
    ['4.19.0-26-amd64', true],
    ['3.10.0-1160.el7.x86_64', true],
    ['5.7.19', true],
    ['5.8.0', false],
    ['5.8.0-63-generic', false],
    ['5.15.0-1051-aws', false],
    ['6.1.0-18-amd64', false],
    ['6.8.0-45-generic', false],
    ['10.0.0', false],
    [undefined, false],
    // mount-utils assumes an old kernel for a release it cannot read as >= 5.8
    ['6.1', true],
    ['garbage', true],
    ['', true],
    ['v6.1.0', true],
  ];
  for (const [release, want] of cases) {
    it(`${release === undefined ? 'no kernel release (captured file)' : JSON.stringify(release)} ${want ? 'needs' : 'does not need'} a consistent read`, () => {
      assert.equal(needsConsistentRead(release), want);
    });
  }
});

describe('readMountInfoText', () => {
  it('reads once on a kernel without the torn-read bug', async () => {
    const src = new ScriptedSource(['a', 'b'], '6.1.0-18-amd64');
    assert.equal(await readMountInfoText(src), 'a');
    assert.equal(src.reads, 1);
  });

  it('reads once from a captured file with no kernel release', async () => {
    const src = new ScriptedSource(['a', 'b'], undefined);
    assert.equal(await readMountInfoText(src), 'a');
    assert.equal(src.reads, 1);
  });

  it('returns the content when the second read is identical to the first', async () => {
    const src = new ScriptedSource(['same'], '5.4.0-150-generic');
    assert.equal(await readMountInfoText(src), 'same');
    assert.equal(src.reads, 2);
  });

  it('keeps re-reading until two consecutive reads agree', async () => {
    const src = new ScriptedSource(['a', 'b', 'c', 'c'], '5.4.0-150-generic');
    assert.equal(await readMountInfoText(src), 'c');
    assert.equal(src.reads, 4);
  });

  it('gives up with InconsistentReadError after the first read plus 10 re-reads that never agree', async () => {
    const src = new ChurningSource();
    await assert.rejects(readMountInfoText(src), (err: unknown) => {
      assert.ok(err instanceof InconsistentReadError);
      assert.equal(err.message, 'could not get consistent content of /proc/self/mountinfo after 10 attempts');
      assert.equal(err.attempts, MAX_LIST_TRIES);
      assert.equal(err.fileName, '/proc/self/mountinfo');
      return true;
    });
    assert.equal(src.reads, 11);
  });

  it('honours a smaller maxAttempts', async () => {
    const src = new ChurningSource();
    await assert.rejects(readMountInfoText(src, 3), /after 3 attempts/);
    assert.equal(src.reads, 4);
  });

  it('lets a read error through at once', async () => {
    let reads = 0;
    const src: MountInfoSource = {
      name: 'x',
      kernelRelease: '5.4.0',
      read: () => {
        reads++;
        return reads === 2 ? Promise.reject(new Error('EIO')) : Promise.resolve('a');
      },
    };
    await assert.rejects(readMountInfoText(src), /EIO/);
    assert.equal(reads, 2);
  });
});
