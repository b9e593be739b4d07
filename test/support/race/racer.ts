/**
 * A racer for the removal-race tests: a process that swaps two paths atomically, over and over,
 * with renameat2(RENAME_EXCHANGE), the way an attacker flips a directory and a symlink under a
 * removal in progress. Node has no renameat2, so the loop is a few lines of Perl calling the
 * system call by number (Perl is part of every Debian base system; the e2e harness already runs
 * its namespace init in it). Not named *.test.ts: npm test runs only *.test.js files.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/** renameat2's number per architecture (the generic table for arm64 and riscv64). */
const RENAMEAT2: Readonly<Partial<Record<string, number>>> = { x64: 316, arm64: 276, riscv64: 276, ia32: 353, arm: 382, ppc64: 357, s390x: 347 };

/**
 * Loops renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) until SIGTERM, then prints how many
 * swaps succeeded and failed. "ready" after the first success, so the caller starts its removal
 * while the paths are already flipping. `b` starts as a symlink; when the removal under test
 * deletes whichever of the two is the symlink at that moment, the racer makes it again (same
 * target) and goes on, as an attacker would, so the race lasts the whole run.
 */
const PERL_EXCHANGE = [
  'use strict; my ($nr, $a, $b) = @ARGV; my $t = readlink($b); defined $t or die "racer: $b is not a symlink\\n";',
  'my ($n, $fail, $ready) = (0, 0, 0);',
  '$| = 1; $SIG{TERM} = sub { print "done $n $fail\\n"; exit 0; };',
  'for (;;) {',
  '  if (syscall($nr, -100, $a, -100, $b, 2) == 0) { $n++; if (!$ready) { print "ready\\n"; $ready = 1; } next; }',
  '  $fail++;',
  '  lstat($a) or symlink($t, $a); lstat($b) or symlink($t, $b);',
  '  select(undef, undef, undef, 0.0001) if $fail % 64 == 0;',
  '}',
].join('\n');

/** Why racers cannot run here, or false when they can. */
export function racerSkip(): string | false {
  if (process.platform !== 'linux') return 'renameat2(RENAME_EXCHANGE) is Linux only';
  if (RENAMEAT2[process.arch] === undefined) return `no renameat2 system call number known for ${process.arch}`;
  const perl = spawnSync('perl', ['-e', 'exit 0'], { stdio: 'ignore' });
  if (perl.error !== undefined || perl.status !== 0) return 'perl is not installed: the racer calls renameat2 through it';
  return false;
}

export interface Racer {
  /** Stops the racer; resolves to the swaps it made (and those that failed). */
  stop(): Promise<{ readonly swaps: number; readonly failed: number }>;
}

/** Starts swapping `a` and `b` (both must exist, on one file system); resolves once the first swap is done. */
export async function startExchangeRacer(a: string, b: string, timeoutMs = 5000): Promise<Racer> {
  const nr = RENAMEAT2[process.arch];
  if (nr === undefined) throw new Error(`racer: no renameat2 number for ${process.arch}`);
  const child: ChildProcess = spawn('perl', ['-e', PERL_EXCHANGE, String(nr), a, b], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const stdout = child.stdout;
  if (stdout === null) throw new Error('racer: no stdout');
  const lines = createInterface({ input: stdout });
  const iterator = lines[Symbol.asyncIterator]();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const first = await Promise.race([
    iterator.next().then((r) => (r.done === true ? undefined : r.value)),
    exited.then(() => undefined),
    new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), timeoutMs).unref()),
  ]);
  if (first !== 'ready') {
    child.kill('SIGKILL');
    throw new Error(`racer swapping ${a} and ${b} did not start (${first ?? 'exited'}): ${stderr.trim()}`);
  }
  return {
    async stop() {
      child.kill('SIGTERM');
      const next = await iterator.next();
      await exited;
      lines.close();
      const m = /^done (\d+) (\d+)$/.exec(next.done === true ? '' : next.value);
      if (m === null) throw new Error(`racer: unexpected end: ${stderr.trim()}`);
      return { swaps: Number(m[1]), failed: Number(m[2]) };
    },
  };
}
