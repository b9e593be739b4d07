import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  escapeMountPath,
  MountInfoParseError,
  parseMountInfo,
  splitMountOptions,
  unescapeMountPath,
  type MountInfoEntry,
} from '../../../src/mount/mountInfo.js';

const GLOBAL =
  '/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.example.com/4e29aa01861d/globalmount';
const POD = '/var/lib/kubelet/pods/6f1c0000-4e5f/volumes/kubernetes.io~csi/pvc-3f2a9e0f/mount';
const GLOBAL_LINE = `612 29 259:3 / ${GLOBAL} rw,relatime shared:301 - ext4 /dev/nvme1n1 rw`;
const POD_LINE = `640 29 259:3 / ${POD} rw,relatime shared:301 - ext4 /dev/nvme1n1 rw`;

function only(text: string): MountInfoEntry {
  const { entries, problems } = parseMountInfo(text);
  assert.deepEqual(problems, []);
  assert.equal(entries.length, 1);
  const [entry] = entries;
  assert.ok(entry);
  return entry;
}

describe('parseMountInfo', () => {
  it('parses a global mount line and a pod bind mount line into every field', () => {
    const { entries } = parseMountInfo(`${GLOBAL_LINE}\n${POD_LINE}\n`);
    assert.deepEqual(entries, [
      {
        id: 612, parentId: 29, major: 259, minor: 3, root: '/', mountPoint: GLOBAL,
        mountOptions: ['rw', 'relatime'], optionalFields: ['shared:301'],
        fsType: 'ext4', source: '/dev/nvme1n1', superOptions: ['rw'], line: 1,
      },
      {
        id: 640, parentId: 29, major: 259, minor: 3, root: '/', mountPoint: POD,
        mountOptions: ['rw', 'relatime'], optionalFields: ['shared:301'],
        fsType: 'ext4', source: '/dev/nvme1n1', superOptions: ['rw'], line: 2,
      },
    ]);
  });

  const goodLines: { name: string; line: string; check: (e: MountInfoEntry) => void }[] = [
    {
      name: 'a line without optional fields has none',
      line: '25 1 0:22 / /sys rw,nosuid - sysfs sysfs rw',
      check: (e) => {
        assert.deepEqual(e.optionalFields, []);
        assert.equal(e.fsType, 'sysfs');
      },
    },
    {
      name: 'several optional fields are all kept, in order',
      line: '30 25 0:26 / /sys/fs/cgroup ro shared:9 master:3 propagate_from:2 - cgroup2 cgroup2 rw',
      check: (e) => assert.deepEqual(e.optionalFields, ['shared:9', 'master:3', 'propagate_from:2']),
    },
    {
      name: 'commas inside double quotes do not split mount options',
      line: '41 1 8:2 / /data rw,context="system_u:object_r:c1,c2",relatime - xfs /dev/sdb rw',
      check: (e) => assert.deepEqual(e.mountOptions, ['rw', 'context="system_u:object_r:c1,c2"', 'relatime']),
    },
    {
      name: 'commas inside double quotes do not split super options',
      line: '41 1 8:2 / /data rw - xfs /dev/sdb rw,context="a:b:c1,c2",attr2',
      check: (e) => assert.deepEqual(e.superOptions, ['rw', 'context="a:b:c1,c2"', 'attr2']),
    },
    {
      name: 'empty option items are dropped',
      line: '41 1 8:2 / /data rw,,relatime, - xfs /dev/sdb rw',
      check: (e) => assert.deepEqual(e.mountOptions, ['rw', 'relatime']),
    },
    {
      name: 'octal escapes stay verbatim in root and mount point',
      line: '700 29 259:3 /dir\\040one /mnt/with\\040space\\011tab rw - ext4 /dev/nvme1n1 rw',
      check: (e) => {
        assert.equal(e.root, '/dir\\040one');
        assert.equal(e.mountPoint, '/mnt/with\\040space\\011tab');
      },
    },
    {
      name: 'fields after the super options are ignored',
      line: '50 1 8:1 / /x rw - ext4 /dev/sda1 rw extra stuff',
      check: (e) => {
        assert.equal(e.source, '/dev/sda1');
        assert.deepEqual(e.superOptions, ['rw']);
      },
    },
    {
      name: 'runs of spaces and tabs separate fields like one space, and a CR is whitespace',
      line: '50  1\t8:1 /   /x rw -  ext4 /dev/sda1 rw\r',
      check: (e) => {
        assert.equal(e.mountPoint, '/x');
        assert.deepEqual(e.superOptions, ['rw']);
      },
    },
    {
      name: 'a "-" as the mount options field is not the separator',
      line: '50 1 8:1 / /x - - ext4 /dev/sda1 rw',
      check: (e) => {
        assert.deepEqual(e.mountOptions, ['-']);
        assert.equal(e.fsType, 'ext4');
      },
    },
    {
      name: 'signed integers are accepted like strconv.Atoi',
      line: '+50 1 08:01 / /x rw - ext4 /dev/sda1 rw',
      check: (e) => {
        assert.equal(e.id, 50);
        assert.equal(e.major, 8);
        assert.equal(e.minor, 1);
      },
    },
  ];
  for (const c of goodLines) it(c.name, () => c.check(only(c.line)));

  const badLines: { name: string; line: string; error: RegExp }[] = [
    { name: 'a line with too few fields is rejected', line: '612 29 259:3 / /mnt rw - ext4', error: /wrong number of fields \(expected at least 10, got 8\)/ },
    { name: 'a line of only whitespace has zero fields', line: '   \t ', error: /got 0\)/ },
    { name: 'a line without the "-" separator is rejected', line: '612 29 259:3 / /mnt rw shared:1 master:2 x ext4 /dev/a rw', error: /no "-" separator/ },
    { name: 'fewer than 3 fields after "-" is rejected', line: '612 29 259:3 / /mnt rw a b c - ext4 /dev/a', error: /at least 3 fields after the "-" separator .*got 2/ },
    { name: 'a non-integer mount ID is rejected', line: 'x12 29 259:3 / /mnt rw - ext4 /dev/a rw', error: /mount ID "x12" is not an integer/ },
    { name: 'a non-integer parent ID is rejected', line: '612 2.9 259:3 / /mnt rw - ext4 /dev/a rw', error: /parent ID "2.9" is not an integer/ },
    { name: 'major:minor with one part is rejected', line: '612 29 259 / /mnt rw - ext4 /dev/a rw', error: /major:minor "259" does not have exactly two parts/ },
    { name: 'major:minor with three parts is rejected', line: '612 29 259:3:1 / /mnt rw - ext4 /dev/a rw', error: /exactly two parts/ },
    { name: 'a non-integer major is rejected', line: '612 29 a:3 / /mnt rw - ext4 /dev/a rw', error: /major device number in "a:3" is not an integer/ },
    { name: 'a non-integer minor is rejected', line: '612 29 259: / /mnt rw - ext4 /dev/a rw', error: /minor device number in "259:" is not an integer/ },
  ];
  for (const c of badLines) {
    it(`${c.name} (strict throws MountInfoParseError)`, () => {
      assert.throws(
        () => parseMountInfo(`${GLOBAL_LINE}\n${c.line}\n${POD_LINE}`, { source: '/captured/mountinfo' }),
        (err: unknown) => {
          assert.ok(err instanceof MountInfoParseError);
          assert.equal(err.line, 2);
          assert.equal(err.source, '/captured/mountinfo');
          assert.equal(err.text, c.line);
          assert.match(err.reason, c.error);
          assert.match(err.message, /^\/captured\/mountinfo:2: /);
          return true;
        },
      );
    });
    it(`${c.name} (non-strict collects it and keeps going)`, () => {
      const parsed = parseMountInfo(`${GLOBAL_LINE}\n${c.line}\n${POD_LINE}`, { strict: false });
      assert.deepEqual(parsed.entries.map((e) => e.id), [612, 640]);
      assert.equal(parsed.problems.length, 1);
      const [problem] = parsed.problems;
      assert.equal(problem?.line, 2);
      assert.equal(problem?.text, c.line);
      assert.match(problem?.error ?? '', c.error);
    });
  }

  it('strict is the default and stops at the first bad line', () => {
    assert.throws(() => parseMountInfo('bad\nworse'), (err: unknown) => err instanceof MountInfoParseError && err.line === 1);
  });

  it('the error message names a default source when none is given', () => {
    assert.throws(() => parseMountInfo('bad'), /^MountInfoParseError: mountinfo:1: wrong number of fields/);
  });

  it('non-strict parsing reports every bad line with its own line number', () => {
    const parsed = parseMountInfo(`bad one\n${GLOBAL_LINE}\n\nbad two`, { strict: false });
    assert.deepEqual(parsed.problems.map((p) => p.line), [1, 4]);
    assert.deepEqual(parsed.entries.map((e) => e.line), [2]);
  });

  it('empty lines are skipped but still counted in line numbers', () => {
    const { entries } = parseMountInfo(`\n\n${GLOBAL_LINE}\n\n${POD_LINE}\n`);
    assert.deepEqual(entries.map((e) => e.line), [3, 5]);
  });

  it('malformed text that defeats every search of the in-place parse still parses in one pass (a hang guard, not a speed test)', { timeout: 60_000 }, () => {
    // Lines without a space, without a major:minor colon, or without a " - " separator each made
    // an unbounded search run to the end of the text: 100,000 such lines were quadratic.
    const good = '36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue';
    for (const bad of ['x', '1 2 3 / / rw - a b c d e', '1 2 98:0 / / rw shared:1 ext4 /dev/x rw', '1 2 98:0 / / rw -']) {
      const text = `${`${bad}\n`.repeat(100_000)}${good}\n`;
      const { entries, problems } = parseMountInfo(text, { strict: false });
      assert.equal(problems.length, 100_000, bad);
      assert.deepEqual(entries.map((e) => e.line), [100_001]);
      assert.equal(entries[0]?.mountPoint, '/mnt2');
    }
  });

  it('empty text gives no entries and no problems', () => {
    assert.deepEqual(parseMountInfo(''), { entries: [], problems: [] });
  });
});

describe('splitMountOptions', () => {
  const cases: [string, string[]][] = [
    ['rw', ['rw']],
    ['rw,relatime', ['rw', 'relatime']],
    ['a="x,y",b', ['a="x,y"', 'b']],
    [',,', []],
    ['a="unterminated,b', ['a="unterminated,b']],
  ];
  for (const [input, want] of cases) {
    it(`splits ${JSON.stringify(input)} into ${JSON.stringify(want)}`, () => assert.deepEqual(splitMountOptions(input), want));
  }
});

describe('escapeMountPath / unescapeMountPath', () => {
  const pairs: [string, string][] = [
    ['/plain/path', '/plain/path'],
    ['/with space', '/with\\040space'],
    ['/tab\there', '/tab\\011here'],
    ['/new\nline', '/new\\012line'],
    ['/back\\slash', '/back\\134slash'],
    ['/literal\\040text', '/literal\\134040text'],
  ];
  for (const [plain, escaped] of pairs) {
    it(`escapes ${JSON.stringify(plain)} as the kernel does and decodes it back`, () => {
      assert.equal(escapeMountPath(plain), escaped);
      assert.equal(unescapeMountPath(escaped), plain);
    });
  }

  it('decodes octal escapes as bytes of UTF-8', () => {
    assert.equal(unescapeMountPath('/caf\\303\\251'), '/café');
  });

  it('leaves a backslash that does not start a byte-sized octal escape alone', () => {
    assert.equal(unescapeMountPath('/a\\777b\\04'), '/a\\777b\\04');
  });

  it('leaves non-ASCII text untouched when escaping', () => {
    assert.equal(escapeMountPath('/café/ü'), '/café/ü');
  });
});
