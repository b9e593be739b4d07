// The stuck operations status file itself (src/kubelet/stuckOperationsFile.ts): its bounds (the
// error cut, the byte limit of the whole file, the entry and target limits, each at its edge),
// the write refused through a symlinked dir, the removal of a file already gone, and the exact
// reason the reader gives for each malformed field. All over the in-memory file system.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import {
  cutStuckError,
  MAX_STUCK_ENTRIES,
  MAX_STUCK_ERROR_CHARS,
  MAX_STUCK_FILE_BYTES,
  MAX_STUCK_TARGETS,
  parseStuckOperationsFile,
  removeStuckOperationsFile,
  stuckOperationsPath,
  writeStuckOperationsFile,
  type StuckOperation,
  type StuckOperationsFile,
} from '../../../src/kubelet/stuckOperationsFile.js';

const ROOT = '/var/lib/kubelet';

const ENTRY: StuckOperation = {
  volumeName: 'kubernetes.io/csi/csi.example.com^vol-1',
  driver: 'csi.example.com',
  podName: '',
  operation: 'unmount_device',
  firstFailure: '2026-12-01T03:00:00.000Z',
  lastFailure: '2026-12-01T03:01:00.000Z',
  failures: 3,
  lastError: 'rpc error: code = FailedPrecondition desc = busy',
  targets: [],
};

function file(entries: readonly unknown[]): Record<string, unknown> {
  return { version: 1, writtenAt: '2026-12-01T03:01:00.000Z', entries };
}

function parse(body: unknown): StuckOperationsFile {
  return parseStuckOperationsFile(JSON.stringify(body), 'f');
}

function rejectsWith(body: unknown, message: string): void {
  assert.throws(() => parse(body), (err: unknown) => {
    assert.ok(err instanceof Error);
    assert.equal(err.name, 'StuckOperationsFileError');
    assert.equal(err.message, message);
    return true;
  });
}

function fsWithRoot(): MemFs {
  const fs = MemFs.create();
  fs.writeRaw(`${ROOT}/.keep`, '');
  return fs;
}

describe('cutStuckError', () => {
  it('keeps a short error as it is', () => {
    assert.equal(cutStuckError('boom'), 'boom');
  });

  it('keeps an error of exactly MAX_STUCK_ERROR_CHARS characters uncut', () => {
    const text = 'x'.repeat(MAX_STUCK_ERROR_CHARS);
    assert.equal(cutStuckError(text), text);
  });

  it('cuts an error one character longer to MAX_STUCK_ERROR_CHARS characters and an ellipsis', () => {
    const text = `${'a'.repeat(MAX_STUCK_ERROR_CHARS)}b`;
    assert.equal(cutStuckError(text), `${'a'.repeat(MAX_STUCK_ERROR_CHARS)}…`);
  });

  it('the reader cuts an over-long lastError the same way', () => {
    const long = `${'e'.repeat(MAX_STUCK_ERROR_CHARS)}tail`;
    assert.equal(parse(file([{ ...ENTRY, lastError: long }])).entries[0]?.lastError, `${'e'.repeat(MAX_STUCK_ERROR_CHARS)}…`);
  });
});

describe('writeStuckOperationsFile', () => {
  /** A body whose file (pretty JSON and a newline) is exactly `bytes` bytes long. */
  function bodyOfSize(bytes: number): StuckOperationsFile {
    const base = file([{ ...ENTRY, lastError: '' }]) as unknown as StuckOperationsFile;
    const baseBytes = new TextEncoder().encode(`${JSON.stringify(base, null, 2)}\n`).length;
    return { ...base, entries: [{ ...ENTRY, lastError: 'z'.repeat(bytes - baseBytes) }] };
  }

  it('writes a file of exactly MAX_STUCK_FILE_BYTES bytes, which reads back', async () => {
    const fs = fsWithRoot();
    const body = bodyOfSize(MAX_STUCK_FILE_BYTES);
    await writeStuckOperationsFile(fs, ROOT, body);
    const data = await fs.readFile(stuckOperationsPath(ROOT), MAX_STUCK_FILE_BYTES);
    assert.equal(data.length, MAX_STUCK_FILE_BYTES);
    assert.equal(new TextDecoder().decode(data), `${JSON.stringify(body, null, 2)}\n`);
  });

  it('refuses a file one byte over MAX_STUCK_FILE_BYTES, naming its size and the limit, and writes nothing', async () => {
    const fs = fsWithRoot();
    await assert.rejects(writeStuckOperationsFile(fs, ROOT, bodyOfSize(MAX_STUCK_FILE_BYTES + 1)), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal(err.message, `status file would be ${MAX_STUCK_FILE_BYTES + 1} bytes (limit ${MAX_STUCK_FILE_BYTES}); not written`);
      return true;
    });
    assert.deepEqual(fs.tree(`${ROOT}/nodevol`), []);
  });

  it('refuses a status dir that is a symlink, naming the dir and its type, and writes nothing there', async () => {
    const fs = fsWithRoot();
    await fs.mkdir('/elsewhere', { recursive: true, mode: 0o755 });
    await fs.symlink('/elsewhere', `${ROOT}/nodevol`);
    await assert.rejects(writeStuckOperationsFile(fs, ROOT, file([ENTRY]) as unknown as StuckOperationsFile), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal(err.message, `${ROOT}/nodevol is not a directory (symlink); not written`);
      return true;
    });
    assert.deepEqual(await fs.readdir('/elsewhere'), []);
  });
});

describe('removeStuckOperationsFile', () => {
  it('removes the status file', async () => {
    const fs = fsWithRoot();
    await writeStuckOperationsFile(fs, ROOT, file([ENTRY]) as unknown as StuckOperationsFile);
    await removeStuckOperationsFile(fs, ROOT);
    assert.equal(fs.typeSync(stuckOperationsPath(ROOT)), undefined);
  });

  it('resolves when the status file is already gone (ENOENT)', async () => {
    const fs = fsWithRoot();
    await removeStuckOperationsFile(fs, ROOT);
    assert.equal(fs.typeSync(stuckOperationsPath(ROOT)), undefined);
  });

  it('rethrows any other error: a directory in the file\'s place gives EISDIR', async () => {
    const fs = fsWithRoot();
    await fs.mkdir(stuckOperationsPath(ROOT), { recursive: true, mode: 0o750 });
    await assert.rejects(removeStuckOperationsFile(fs, ROOT), (err: unknown) => {
      assert.equal((err as NodeJS.ErrnoException).code, 'EISDIR');
      return true;
    });
    assert.equal(fs.typeSync(stuckOperationsPath(ROOT)), 'directory');
  });
});

describe('parseStuckOperationsFile: what it accepts', () => {
  it('returns the entry as written, with no grpcCode key when the file has none', () => {
    const parsed = parse(file([ENTRY]));
    assert.deepEqual(parsed, { version: 1, writtenAt: '2026-12-01T03:01:00.000Z', entries: [ENTRY] });
    assert.equal(Object.hasOwn(parsed.entries[0] ?? {}, 'grpcCode'), false);
  });

  it('keeps a grpcCode the file has', () => {
    assert.equal(parse(file([{ ...ENTRY, grpcCode: 'Internal' }])).entries[0]?.grpcCode, 'Internal');
  });

  it('accepts failures: 1 (the first failure)', () => {
    assert.equal(parse(file([{ ...ENTRY, failures: 1 }])).entries[0]?.failures, 1);
  });

  it('accepts exactly MAX_STUCK_TARGETS targets', () => {
    const targets = Array.from({ length: MAX_STUCK_TARGETS }, (_, i) => `${ROOT}/pods/p${i}/volumes/kubernetes.io~csi/pv-1`);
    assert.deepEqual(parse(file([{ ...ENTRY, targets }])).entries[0]?.targets, targets);
  });

  it('accepts exactly MAX_STUCK_ENTRIES entries', () => {
    assert.equal(parse(file(Array.from({ length: MAX_STUCK_ENTRIES }, () => ENTRY))).entries.length, MAX_STUCK_ENTRIES);
  });
});

describe('parseStuckOperationsFile: the reason it gives for a bad field', () => {
  it('a top level that is a list, null, a number or a string is "field (top level): not an object"', () => {
    for (const top of [[], null, 7, 'x']) rejectsWith(top, 'f: field (top level): not an object');
  });

  it('a writtenAt that is no time is "field writtenAt: not an RFC 3339 time"', () => {
    rejectsWith({ ...file([]), writtenAt: 'yesterday' }, 'f: field writtenAt: not an RFC 3339 time');
  });

  it('entries that are no list are "field entries: not a list"', () => {
    rejectsWith({ ...file([]), entries: {} }, 'f: field entries: not a list');
  });

  it('an entry that is null or a number is "field entries[i]: not an object"', () => {
    rejectsWith(file([ENTRY, null]), 'f: field entries[1]: not an object');
    rejectsWith(file([7]), 'f: field entries[0]: not an object');
  });

  it('MAX_STUCK_TARGETS + 1 targets, or a target that is no string, is "field entries[i].targets: not a list of at most 16 strings"', () => {
    const tooMany = Array.from({ length: MAX_STUCK_TARGETS + 1 }, (_, i) => `t${i}`);
    rejectsWith(file([{ ...ENTRY, targets: tooMany }]), 'f: field entries[0].targets: not a list of at most 16 strings');
    rejectsWith(file([{ ...ENTRY, targets: ['t0', 7] }]), 'f: field entries[0].targets: not a list of at most 16 strings');
  });

  it('a grpcCode that is no string is "field entries[i].grpcCode: not a string"', () => {
    rejectsWith(file([{ ...ENTRY, grpcCode: 13 }]), 'f: field entries[0].grpcCode: not a string');
  });
});
