import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  MountCommandError,
  NodeMounter,
  errnoFromMountOutput,
  spawnRunner,
  type CommandResult,
  type CommandRunner,
} from '../../../src/adapters/node/nodeMounter.js';
import { FsError } from '../../../src/ports/fs.js';
import { isMountRootByMountId, liveMountIdProbe, parseMountId, type MountIdProbe } from '../../../src/adapters/node/mountId.js';
import type { MountInfoSource } from '../../../src/mount/mountTable.js';
import { withTimeout } from '../../support/e2e/waitFor.js';
import { RecordingLogger } from '../../support/hosts.js';

const OK: CommandResult = { exitCode: 0, signal: null, stdout: '', stderr: '', timedOut: false };

/** A runner that records every call and answers from a queue (OK when empty). */
function recorder(...answers: (CommandResult | Error)[]): { run: CommandRunner; calls: { cmd: string; args: readonly string[]; timeoutMs: number }[] } {
  const calls: { cmd: string; args: readonly string[]; timeoutMs: number }[] = [];
  const run: CommandRunner = (cmd, args, options) => {
    calls.push({ cmd, args: [...args], timeoutMs: options.timeoutMs });
    const answer = answers.shift() ?? OK;
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  };
  return { run, calls };
}

function failed(exitCode: number, stderr: string): CommandResult {
  return { exitCode, signal: null, stdout: '', stderr, timedOut: false };
}

function tableSource(text: string): MountInfoSource {
  return { name: 'test-mountinfo', read: () => Promise.resolve(text) };
}

function line(id: number, mountPoint: string, root = '/'): string {
  return `${id} 1 8:1 ${root} ${mountPoint} rw,relatime shared:1 - ext4 /dev/sda1 rw`;
}

async function rejectsWith(p: Promise<unknown>, code: string, messageIncludes: readonly string[] = []): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof FsError, `expected an FsError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    for (const s of messageIncludes) assert.ok(err.message.includes(s), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(s)}`);
    return true;
  });
}

describe('NodeMounter commands (injected runner)', () => {
  it('mount passes -t, -o and the operands as one argument array', async () => {
    const { run, calls } = recorder();
    const m = new NodeMounter({ run, mountCommand: '/sbin/mount', umountCommand: '/sbin/umount', timeoutMs: 1234 });
    await m.mount('/dev/nvme1n1', '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount', 'ext4', ['noatime', 'discard']);
    assert.deepEqual(calls, [
      {
        cmd: '/sbin/mount',
        args: ['-t', 'ext4', '-o', 'noatime,discard', '/dev/nvme1n1', '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount'],
        timeoutMs: 1234,
      },
    ]);
  });

  it('a bind mount is -o bind with no -t; an fsType with no options gets no -o', async () => {
    const { run, calls } = recorder();
    const m = new NodeMounter({ run, mountCommand: 'mount' });
    await m.mount('/src dir', '/tar get', '', ['bind']);
    await m.mount('/src', '/dst', '', ['bind', 'ro']);
    await m.mount('tmpfs', '/mnt/t', 'tmpfs', []);
    await m.mount('/a', '/b', '', []);
    assert.deepEqual(
      calls.map((c) => [c.cmd, ...c.args]),
      [
        ['mount', '-o', 'bind', '/src dir', '/tar get'],
        ['mount', '-o', 'bind,ro', '/src', '/dst'],
        ['mount', '-t', 'tmpfs', 'tmpfs', '/mnt/t'],
        ['mount', '/a', '/b'],
      ],
    );
    assert.equal(calls[0]?.timeoutMs, 60_000, 'default timeout');
  });

  it('umount runs with the target as its only argument', async () => {
    const { run, calls } = recorder();
    await new NodeMounter({ run, umountCommand: '/usr/bin/umount' }).unmount('/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount');
    assert.deepEqual(calls.map((c) => [c.cmd, ...c.args]), [['/usr/bin/umount', '/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount']]);
  });

  it('refuses operands that mount would read as options, before running anything', async () => {
    const { run, calls } = recorder();
    const m = new NodeMounter({ run });
    await rejectsWith(m.mount('-oremount', '/mnt', '', ['bind']), 'EINVAL', ['source', '-oremount']);
    await rejectsWith(m.mount('/src', '--all', '', []), 'EINVAL', ['target']);
    await rejectsWith(m.mount('', '/mnt', 'ext4', []), 'EINVAL', ['empty']);
    await rejectsWith(m.unmount('-a'), 'EINVAL');
    await rejectsWith(m.unmount('/mnt/a\0b'), 'EINVAL', ['NUL']);
    assert.equal(calls.length, 0);
  });

  it('umount "not mounted" rejects with EINVAL and a message naming command, target and output', async () => {
    const { run } = recorder(failed(32, 'umount: /mnt/x: not mounted.\n'));
    const p = new NodeMounter({ run, umountCommand: '/usr/bin/umount' }).unmount('/mnt/x');
    await rejectsWith(p, 'EINVAL', ['umount of /mnt/x failed: exit status 32', 'Unmounting command: /usr/bin/umount', 'Unmounting arguments: /mnt/x', 'not mounted']);
    await assert.rejects(p, (err: unknown) => err instanceof MountCommandError && err.exitCode === 32 && err.syscall === 'umount' && err.path === '/mnt/x');
  });

  it('maps util-linux messages to errno codes, EMOUNT when none applies', async () => {
    const cases: [syscall: 'mount' | 'umount', stderr: string, code: string | undefined][] = [
      ['umount', 'umount: /x: not mounted.', 'EINVAL'],
      ['umount', 'umount: /nope: no mount point specified.', 'ENOENT'],
      ['umount', 'umount: /x: target is busy.', 'EBUSY'],
      ['umount', 'umount: /x: must be superuser to unmount.', 'EPERM'],
      ['mount', 'mount: /x: mount point does not exist.', 'ENOENT'],
      ['mount', 'mount: /x: special device /dev/nope does not exist.', 'ENOENT'],
      ['mount', 'mount: /x: mount point is not a directory.', 'ENOTDIR'],
      ['mount', 'mount: /x: /dev/sdb already mounted on /y.', 'EBUSY'],
      ['mount', 'mount: /x: permission denied.', 'EACCES'],
      ['mount', 'mount: /x: wrong fs type, bad option, bad superblock on /dev/sdb, missing codepage or helper program, or other error.', undefined],
      ['mount', 'mount: /x: not mounted.', undefined],
    ];
    for (const [syscall, stderr, code] of cases) assert.equal(errnoFromMountOutput(syscall, stderr), code, stderr);

    const { run } = recorder(failed(32, 'mount: /x: wrong fs type, bad option, bad superblock on /dev/sdb.'), failed(32, 'mount: /x: mount point does not exist.'));
    const m = new NodeMounter({ run, mountCommand: 'mount' });
    await rejectsWith(m.mount('/dev/sdb', '/x', 'xfs', ['ro']), 'EMOUNT', [
      'mount of /x failed: exit status 32',
      'Mounting command: mount',
      'Mounting arguments: -t xfs -o ro /dev/sdb /x',
      'wrong fs type',
    ]);
    await rejectsWith(m.mount('/dev/sdb', '/x', 'xfs', []), 'ENOENT');
  });

  it('a command that cannot be started rejects with EMOUNT naming the binary; a signal-killed one too', async () => {
    const enoent = Object.assign(new Error('spawn /nonexistent/mount ENOENT'), { code: 'ENOENT' });
    const { run } = recorder(enoent, { exitCode: null, signal: 'SIGSEGV', stdout: '', stderr: '', timedOut: false });
    const m = new NodeMounter({ run, mountCommand: '/nonexistent/mount' });
    await rejectsWith(m.mount('/a', '/b', '', ['bind']), 'EMOUNT', ['cannot run /nonexistent/mount', 'ENOENT']);
    await rejectsWith(m.mount('/a', '/b', '', ['bind']), 'EMOUNT', ['killed by SIGSEGV']);
  });

  it('a timed-out command rejects with ETIMEDOUT', async () => {
    const { run, calls } = recorder({ exitCode: null, signal: 'SIGKILL', stdout: '', stderr: '', timedOut: true });
    const m = new NodeMounter({ run, timeoutMs: 50 });
    await rejectsWith(m.mount('server:/export', '/mnt/nfs', 'nfs', ['vers=4.1']), 'ETIMEDOUT', ['timed out after 50 ms', 'killed', '/mnt/nfs']);
    assert.equal(calls[0]?.timeoutMs, 50);
  });

  it('rejects a non-positive timeout at construction', () => {
    assert.throws(() => new NodeMounter({ timeoutMs: 0 }), /positive/);
  });
});

describe('spawnRunner (real child processes, nothing mounted)', () => {
  it('returns exit status and output, passes arguments verbatim (no shell) and sets LC_ALL=C', async () => {
    const r = await spawnRunner(process.execPath, ['-e', 'process.stdout.write(JSON.stringify([process.argv.slice(1), process.env.LC_ALL])); process.stderr.write("e"); process.exit(3)', '$(touch /tmp/x)', 'a b;c'], { timeoutMs: 10_000 });
    assert.equal(r.exitCode, 3);
    assert.equal(r.timedOut, false);
    assert.equal(r.stderr, 'e');
    assert.deepEqual(JSON.parse(r.stdout), [['$(touch /tmp/x)', 'a b;c'], 'C']);
  });

  it('kills a command that outlives the timeout and settles without waiting for it', async () => {
    // The child never exits by itself: only the runner's timer can settle the run (bounded here, so
    // a runner that waited for the child fails with a message instead of hanging the suite).
    const r = await withTimeout(
      spawnRunner(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { timeoutMs: 200 }),
      60_000,
      'the runner to settle after its 200 ms timeout, without the child ever exiting by itself',
    );
    assert.equal(r.timedOut, true);
    assert.equal(r.signal, 'SIGKILL');
  });

  it('rejects when the binary does not exist', async () => {
    await assert.rejects(spawnRunner('/nonexistent/nodevol-mount', [], { timeoutMs: 1000 }), (err: unknown) => (err as { code?: unknown }).code === 'ENOENT');
  });

  it('NodeMounter over the real runner: a missing mount binary is EMOUNT, a timeout ETIMEDOUT', async () => {
    await rejectsWith(new NodeMounter({ mountCommand: '/nonexistent/nodevol-mount' }).mount('/a', '/b', '', ['bind']), 'EMOUNT', ['/nonexistent/nodevol-mount']);
    // `sleep` stands in for a hung mount: it ignores the arguments' meaning but not the timeout.
    const sleep = spawnSync('sh', ['-c', 'command -v sleep'], { encoding: 'utf8' }).stdout.trim();
    if (sleep === '') return;
    await rejectsWith(new NodeMounter({ umountCommand: sleep, timeoutMs: 150 }).unmount('30'), 'ETIMEDOUT');
  });
});

describe('NodeMounter.isLikelyNotMountPoint / readMountTable', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nodevol-mounter-'));
    mkdirSync(join(dir, 'mounted'));
    mkdirSync(join(dir, 'plain'));
    mkdirSync(join(dir, 'with space'));
    symlinkSync(join(dir, 'mounted'), join(dir, 'link'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function mounterWith(text: string, logger?: RecordingLogger): NodeMounter {
    return new NodeMounter({ mountInfo: tableSource(text), run: recorder().run, ...(logger !== undefined ? { logger } : {}) });
  }

  it('is a mount point iff the table has an entry at its real path (bind mounts on the same fs included)', async () => {
    const m = mounterWith([line(1, '/'), line(2, join(dir, 'mounted'), '/some/bound/dir')].join('\n'));
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'mounted')), false);
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'mounted') + '/'), false);
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'link')), false, 'symlinks are resolved');
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'plain')), true);
  });

  it('compares with the path escaped as the kernel escapes it', async () => {
    const escaped = join(dir, 'with space').replaceAll(' ', '\\040');
    assert.equal(await mounterWith([line(1, '/'), line(2, escaped)].join('\n')).isLikelyNotMountPoint(join(dir, 'with space')), false);
    const verbatim = `${line(1, '/')}\n3 1 8:1 / ${join(dir, 'with')} rw - ext4 /dev/sda1 rw`;
    assert.equal(await mounterWith(verbatim).isLikelyNotMountPoint(join(dir, 'with space')), true);
  });

  it('a missing path rejects with an FsError ENOENT', async () => {
    await rejectsWith(mounterWith(line(1, '/')).isLikelyNotMountPoint(join(dir, 'nope')), 'ENOENT');
  });

  it('falls back to comparing st_dev with the parent when the table cannot be read (and warns)', async () => {
    const logger = new RecordingLogger();
    const broken = new NodeMounter({
      mountInfo: { name: 'broken', read: () => Promise.reject(new Error('EIO on purpose')) },
      logger,
    });
    // Same filesystem as its parent: "not a mount point", even though the table says otherwise.
    assert.equal(await broken.isLikelyNotMountPoint(join(dir, 'plain')), true);
    assert.ok(logger.lines.some((l) => l.severity === 'W' && l.values.mountTable === 'broken'));
    // /proc is a different filesystem from / on any Linux.
    assert.equal(await broken.isLikelyNotMountPoint('/proc'), false);
    const unparsable = mounterWith('this is not mountinfo');
    assert.equal(await unparsable.isLikelyNotMountPoint(join(dir, 'plain')), true);
  });

  it('readMountTable parses strictly and reads consistently on kernels before 5.8', async () => {
    await assert.rejects(mounterWith('garbage line').readMountTable(), /test-mountinfo:1/);
    const texts = [line(1, '/a'), line(1, '/b'), line(1, '/b')];
    let reads = 0;
    const old = new NodeMounter({
      mountInfo: { name: 'old', kernelRelease: '5.4.0-150-generic', read: () => Promise.resolve(texts[Math.min(reads++, 2)] ?? '') },
    });
    const table = await old.readMountTable();
    assert.equal(reads, 3);
    assert.deepEqual(table.entries.map((e) => e.mountPoint), ['/b']);
  });

  it('by default reads the live /proc/self/mountinfo', async () => {
    const table = await new NodeMounter().readMountTable();
    assert.ok(table.entries.length > 0);
    assert.equal(await new NodeMounter().isLikelyNotMountPoint('/proc'), false);
    assert.equal(await new NodeMounter().isLikelyNotMountPoint(join(dir, 'plain')), true);
  });
});

describe('mount ids (mountId.ts)', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nodevol-mountid-'));
    mkdirSync(join(dir, 'plain'));
    mkdirSync(join(dir, 'real'));
    symlinkSync(join(dir, 'real'), join(dir, 'link'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('parseMountId reads the mnt_id field of an fdinfo text, and nothing else', () => {
    assert.equal(parseMountId('pos:\t0\nflags:\t012100000\nmnt_id:\t27\nino:\t1234\n'), 27);
    assert.equal(parseMountId('pos:\t0\nflags:\t012100000\n'), undefined, 'a kernel before 3.15');
    assert.equal(parseMountId('mnt_id:\tx\n'), undefined);
    assert.equal(parseMountId('not_mnt_id:\t5\n'), undefined);
  });

  it('isMountRootByMountId: a mount root differs from its parent ("..", not a folded path); "/" cannot tell', async () => {
    const asked: string[] = [];
    const ids = new Map([['/a/mnt', 2], ['/a/mnt/..', 1], ['/a/dir', 1], ['/a/dir/..', 1]]);
    const probe: MountIdProbe = {
      mountIdOf: (p) => {
        asked.push(p);
        return Promise.resolve(ids.get(p));
      },
    };
    assert.equal(await isMountRootByMountId(probe, '/a/mnt'), true);
    assert.equal(await isMountRootByMountId(probe, '/a/mnt/'), true);
    assert.equal(await isMountRootByMountId(probe, '/a/dir'), false);
    assert.equal(await isMountRootByMountId(probe, '/a/unknown'), undefined);
    assert.equal(await isMountRootByMountId(probe, '/'), undefined);
    assert.ok(asked.includes('/a/mnt/..'), 'the kernel resolves "..", the path is not normalized');
  });

  it('the live probe: /proc is a mount root, a plain directory is not, symlinks are followed', async (t) => {
    const probe = liveMountIdProbe();
    if (probe === undefined) {
      t.skip(`no O_PATH mount ids on ${process.platform}/${process.arch}`);
      return;
    }
    assert.equal(await isMountRootByMountId(probe, '/proc'), true);
    assert.equal(await isMountRootByMountId(probe, join(dir, 'plain')), false);
    assert.equal(await probe.mountIdOf(join(dir, 'link')), await probe.mountIdOf(join(dir, 'real')));
    await assert.rejects(probe.mountIdOf(join(dir, 'nope')), (err: unknown) => (err as { code?: string }).code === 'ENOENT');
  });

  it('the default NodeMounter: a missing path is an FsError ENOENT, a file is answered by the table', async (t) => {
    if (liveMountIdProbe() === undefined) {
      t.skip(`no O_PATH mount ids on ${process.platform}/${process.arch}`);
      return;
    }
    const m = new NodeMounter();
    await rejectsWith(m.isLikelyNotMountPoint(join(dir, 'nope')), 'ENOENT');
    await rejectsWith(m.isLikelyNotMountPoint(join(dir, 'plain', 'nope')), 'ENOENT');
    writeFileSync(join(dir, 'file'), 'x');
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'file')), true);
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'link')), true);
    assert.equal(await m.isLikelyNotMountPoint('/proc'), false);
    assert.equal(await m.isLikelyNotMountPoint('/proc/'), false);
  });

  it('NodeMounter checks directories by mount id, files and unknown answers by the table', async () => {
    const checked: string[] = [];
    const logger = new RecordingLogger();
    let answer: number | undefined = 7;
    const probe: MountIdProbe = {
      mountIdOf: (p) => {
        checked.push(p);
        return Promise.resolve(p.endsWith('/..') ? 1 : answer);
      },
    };
    // The table says "not mounted"; the probe says the directory is a mount root: the probe wins.
    const m = new NodeMounter({ mountInfo: tableSource(line(1, '/')), mountIds: probe, run: recorder().run, logger });
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'plain')), false);
    // A kernel without mnt_id: the table answers, now and afterwards, and it is said once.
    answer = undefined;
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'plain')), true);
    const asked = checked.length;
    assert.equal(await m.isLikelyNotMountPoint(join(dir, 'plain')), true);
    assert.equal(checked.length, asked, 'the probe is not asked again');
    assert.equal(logger.lines.filter((l) => /mount ids/.test(l.msg)).length, 1);
    // With mountInfo given and no probe, the table given is the truth.
    const tableOnly = new NodeMounter({ mountInfo: tableSource(line(1, '/')), run: recorder().run });
    assert.equal(await tableOnly.isLikelyNotMountPoint('/proc'), true);
  });
});

describe('NodeMounter against the kernel (root only, private mount namespace)', () => {
  const here = dirname(fileURLToPath(import.meta.url));
  const probe = resolve(here, '../../support/bindMountProbe.js');

  function whyNot(): string | undefined {
    if (process.platform !== 'linux') return `needs root and unshare: not Linux (${process.platform})`;
    if (process.getuid?.() !== 0) return `needs root and unshare: running as uid ${process.getuid?.() ?? '?'}`;
    const pre = spawnSync('unshare', ['--mount', '--propagation', 'private', 'true'], { encoding: 'utf8' });
    if (pre.error !== undefined) return `needs root and unshare: cannot run unshare (${pre.error.message})`;
    if (pre.status !== 0) return `needs root and unshare: unshare --mount failed here (${pre.stderr.trim()})`;
    return undefined;
  }

  it('bind mounts a directory onto another (name with a space), sees it as a mount point, unmounts it', (t) => {
    const reason = whyNot();
    if (reason !== undefined) {
      t.skip(reason);
      return;
    }
    const work = mkdtempSync(join(tmpdir(), 'nodevol-bind-'));
    try {
      const r = spawnSync('unshare', ['--mount', '--propagation', 'private', process.execPath, probe, work], {
        encoding: 'utf8',
        env: { ...process.env, NODEVOL_BIND_PROBE: '1' },
        timeout: 60_000,
      });
      assert.equal(r.status, 0, `probe failed: ${r.stderr}`);
      const out = JSON.parse(r.stdout) as Record<string, unknown>;
      assert.equal(out.beforeNotMountPoint, true);
      assert.equal(out.mountedNotMountPoint, false, 'a same-filesystem bind mount is seen through the mount table');
      assert.equal(out.devFallbackNotMountPoint, true, 'the st_dev fall-back cannot see a same-filesystem bind mount');
      assert.equal(out.markerThroughTarget, 'through the bind mount');
      assert.equal(out.tableHasEscapedTarget, true);
      assert.equal(out.afterNotMountPoint, true);
      if (process.arch === 'x64' || process.arch === 'arm64') {
        assert.equal(out.beforeRootByMountId, false);
        assert.equal(out.mountedRootByMountId, true, 'a same-filesystem bind mount has its own mount id');
        assert.equal(out.mountedRootByMountIdSlash, true);
        assert.equal(out.insideRootByMountId, true, '"<target>/." is the same directory');
      }
      assert.equal(out.beforeMountIdNotMountPoint, true);
      assert.equal(out.mountedMountIdNotMountPoint, false, 'the default mounter sees the bind mount by mount ids');
      assert.equal(out.afterMountIdNotMountPoint, true);
      assert.equal(out.secondUnmount, 'EINVAL');
      assert.match(String(out.secondUnmountMessage), /not mounted/);
      // Nothing leaked into this (the outer) mount namespace.
      const outer = spawnSync('sh', ['-c', 'cat /proc/self/mountinfo'], { encoding: 'utf8' }).stdout;
      assert.ok(!outer.includes(work), 'no mount of the work dir outside the namespace');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
