/**
 * An exclusive lock on a directory, held by one process for as long as it runs and released by
 * its end, whatever the end: a clean exit, SIGKILL, a crash, a power cut, or the end of its PID
 * namespace. `nodevol agent` and `nodevol recover --yes` take the one of the kubelet root dir,
 * `nodevol mock-driver` the one of its state dir (docs/security.md, "Concurrency").
 *
 * Node has no flock(2); the lock is built from two things the kernel guarantees:
 *
 * - **Liveness**: the holder listens on a unix socket for as long as it holds the lock. connect(2)
 *   to it succeeds while the holder runs (even stopped or busy: the kernel queues the connection)
 *   and is refused (ECONNREFUSED) once the holder is gone, because the kernel closes the sockets of
 *   a process that ends. No pid is compared, so neither pid reuse nor another PID namespace (a
 *   container, or a node "rebooted" by the end of its namespace) can make a live holder look dead
 *   or a dead one look live. The socket is opened close-on-exec: a program the holder runs does
 *   not inherit it.
 * - **Exclusivity**: link(2) fails with EEXIST when the name exists. A process takes the lock by
 *   linking its listening socket into the lock dir under a number; the holder is the process whose
 *   socket is linked under the highest number.
 *
 * The rules:
 *
 * 1. A process links number n+1 only after it read n as the highest number and connect(2) to n was
 *    refused (or the directory held no number and n+1 = 1).
 * 2. Right after linking, it lists the directory again; when a higher number is there it removes
 *    its own and starts over. Otherwise it holds the lock.
 * 3. No process ever removes the highest number: a holder removes only numbers below its own, a
 *    process that starts over removes only its own (a higher one exists), and a release closes the
 *    socket but leaves the name. So the highest number never decreases.
 *
 * Why two running processes never hold it together: by rule 3 the highest number never decreases.
 * Say A holds a; at A's check (rule 2) the highest was a. Take the first number m > a linked after
 * that check: its linker read the highest number h at some moment t and linked h + 1 = m. If t came
 * after A linked a, then h = a (a existed, the highest was at most a until A's check, and no number
 * above a was linked between the check and this first link), so connect(2) to A's socket was
 * refused: not while A runs. If t came before A linked a, h < a (a did not exist; a higher number
 * would have kept the highest above a at A's check), so m <= a. So while A runs nothing is linked
 * above a, and a process holding b < a would, by the same argument, have kept A from linking a.
 * Removing a stale entry and creating a fresh one under a fixed name instead would let two
 * processes that both found it stale each remove the other's fresh one.
 *
 * Each number `<n>` has a record `<n>.json` (`{"version":1,"pid":…,"command":…,"since":…}`),
 * written by its holder once it holds the lock, for messages only: who holds it. Numbers below
 * the holder's, their records and the sockets of processes that died while taking the lock are
 * removed by the next holder.
 *
 * The lock dir is reached from its base through real directories only and held open; every name
 * in it is used relative to that descriptor (`/proc/self/fd/<fd>/<name>`), never by path: a
 * directory swapped for a symlink cannot send a link, an unlink or a bind elsewhere, and socket
 * paths stay within sun_path however long the dir's path is.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, linkSync, lstatSync, readdirSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import * as posix from 'node:path/posix';

import { errorCode, errorMessage, writeFileAtomic } from '../../ports/fs.js';
import { Beneath, locate } from './beneath.js';
import { NodeFileSystem } from './nodeFs.js';

export const PROCESS_LOCK_RECORD_VERSION = 1;
/** A number of the lock dir: the name a holder's socket is linked under. */
const NUMBER = /^[1-9][0-9]{0,14}$/;
const RECORD = /^([1-9][0-9]{0,14})\.json(\.tmp)?$/;
const TAKING = /^\.taking-[0-9]+-[0-9a-f]{16}$/;
/** Rounds of rules 1–2 before giving up (each lost round means another process moved meanwhile). */
const MAX_ROUNDS = 32;
/** How long a connect(2) to a holder's socket may take before "cannot tell". */
export const PROBE_TIMEOUT_MS = 5_000;
const MAX_RECORD_BYTES = 4096;
/** The lock directory's permission bits: the holders' processes only (and their group). */
export const LOCK_DIR_MODE = 0o750;

/** Who holds a lock, as its record says. */
export interface LockOwner {
  readonly pid: number;
  /** What it is: `nodevol agent`, `nodevol recover --yes`, `nodevol mock-driver`. */
  readonly command: string;
  /** When it took the lock (RFC 3339). */
  readonly since: string;
}

/** The lock, held by this process until {@link HeldLock.release} or its end. */
export interface HeldLock {
  readonly held: true;
  readonly dir: string;
  /** The holder's number, a path in `dir`. */
  readonly entry: string;
  /** Closes the socket: the next process takes the lock. Idempotent. */
  release(): Promise<void>;
}

/** The lock is held by another process, or by one whose state cannot be told (then treated as held). */
export interface BusyLock {
  readonly held: false;
  readonly dir: string;
  /** The holder's number, a path in `dir`. */
  readonly entry: string;
  /** From its record; undefined when that is missing or unreadable. */
  readonly owner?: LockOwner;
  /** Set when whether the holder runs cannot be told (connect(2) neither succeeded nor was refused). */
  readonly unknown?: string;
}

/** One sentence: who holds the lock, and, when that cannot be told, what to do. */
export function describeBusyLock(busy: BusyLock): string {
  const who = busy.owner === undefined ? 'another process' : `${busy.owner.command} (pid ${busy.owner.pid}, since ${busy.owner.since})`;
  if (busy.unknown === undefined) return `${who} holds ${busy.dir} (${busy.entry})`;
  return `${who} may hold ${busy.dir}: whether it still runs cannot be told (${busy.unknown}); if no such process runs, remove ${busy.entry}`;
}

type Probe = 'live' | 'dead' | 'gone' | { readonly unknown: string };

/**
 * The lock dir, held open: every name in it is listed, looked at, linked, unlinked, bound and
 * connected relative to that descriptor (`/proc/self/fd/<fd>/<name>`, beneath.ts), never by path,
 * so a directory above it swapped for a symlink cannot send any of it elsewhere; socket paths stay
 * short whatever the dir's path.
 */
class LockDir {
  private constructor(
    readonly dir: string,
    readonly fd: number,
  ) {}

  /** Opens `dir` below `base` (made with {@link LOCK_DIR_MODE} where missing when `create`), every component a real directory. */
  static async open(base: string, dir: string, create: boolean): Promise<LockDir> {
    const loc = locate([base], dir);
    if (loc === undefined || loc.name === '') throw new Error(`lock dir ${dir} is not below ${base}`);
    try {
      return new LockDir(dir, await new Beneath([base]).openDir(dir, loc, create ? { mode: LOCK_DIR_MODE } : undefined));
    } catch (err) {
      if (errorCode(err) === 'ENOENT' && !create) throw err;
      throw new Error(`lock dir ${dir}: ${errorMessage(err)}`, { cause: err });
    }
  }

  path(name: string): string {
    return posix.join(this.dir, name);
  }

  /** `name` relative to the open dir: for every system call on it. */
  at(name: string): string {
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  /** The names in the directory (this module's own names are ASCII; any other is left alone). */
  names(): string[] {
    return readdirSync(`/proc/self/fd/${this.fd}`, { encoding: 'buffer' }).map((b) => b.toString('latin1'));
  }

  /** The highest number in the directory, 0 when there is none. */
  highest(names: readonly string[] = this.names()): number {
    let max = 0;
    for (const n of names) if (NUMBER.test(n)) max = Math.max(max, Number(n));
    return max;
  }

  /** Whether the socket at `name` has a listener: connect(2), bounded. */
  async probe(name: string): Promise<Probe> {
    try {
      // Only a socket this module linked can be a holder: anything else (a file, a symlink) is not followed.
      if (!lstatSync(this.at(name)).isSocket()) return 'dead';
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return 'gone';
      return { unknown: `lstat ${this.path(name)}: ${errorMessage(err)}` };
    }
    return new Promise<Probe>((resolve) => {
      const socket = connect(this.at(name));
      const done = (p: Probe): void => {
        clearTimeout(timer);
        socket.destroy();
        resolve(p);
      };
      const timer = setTimeout(() => done({ unknown: `connect to ${this.path(name)} did not complete in ${PROBE_TIMEOUT_MS} ms` }), PROBE_TIMEOUT_MS);
      socket.once('connect', () => done('live'));
      socket.once('error', (err) => {
        const code = errorCode(err);
        done(code === 'ECONNREFUSED' ? 'dead' : code === 'ENOENT' ? 'gone' : { unknown: `connect to ${this.path(name)}: ${errorMessage(err)}` });
      });
    });
  }

  async owner(n: number): Promise<LockOwner | undefined> {
    try {
      const text = new TextDecoder().decode(await new NodeFileSystem().readFile(this.at(`${n}.json`), MAX_RECORD_BYTES, { noFollow: true }));
      const raw: unknown = JSON.parse(text);
      if (typeof raw !== 'object' || raw === null) return undefined;
      const r = raw as Record<string, unknown>;
      const { pid, command, since } = r;
      if (r['version'] !== PROCESS_LOCK_RECORD_VERSION || typeof pid !== 'number' || !Number.isSafeInteger(pid) || typeof command !== 'string' || typeof since !== 'string') return undefined;
      return { pid, command: command.slice(0, 200), since: since.slice(0, 64) };
    } catch {
      return undefined;
    }
  }

  link(from: string, to: string): void {
    linkSync(this.at(from), this.at(to));
  }

  unlinkQuietly(name: string): void {
    try {
      unlinkSync(this.at(name));
    } catch {
      // already gone, or not ours to remove: the next holder tries again
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}

function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * Takes the lock of `dir` (created below `base`, which must exist) for `command`, or says who
 * holds it. Rejects when the directory cannot be created or read, or when other processes kept
 * taking and releasing it for {@link MAX_ROUNDS} rounds.
 */
export async function acquireProcessLock(options: {
  readonly base: string;
  readonly dir: string;
  readonly command: string;
  /** The record's `since`; default the wall clock. */
  readonly now?: () => Date;
  /** Runs between finding the holder of number n - 1 gone and linking n, where other processes may move meanwhile (tests). */
  readonly beforeLink?: (n: number) => Promise<void>;
}): Promise<HeldLock | BusyLock> {
  const { base, dir, command } = options;
  const lockDir = await LockDir.open(base, dir, true);
  const taking = `.taking-${process.pid}-${randomBytes(8).toString('hex')}`;
  const server = createServer((connection) => {
    // A probe only needs the connection to be accepted.
    connection.on('error', () => undefined);
    connection.destroy();
  });
  let held: HeldLock | undefined;
  try {
    await listen(server, lockDir.at(taking));
    // The lock never keeps the process alive on its own.
    server.unref();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const highest = lockDir.highest();
      if (highest > 0) {
        const probe = await lockDir.probe(String(highest));
        if (probe === 'gone') continue;
        if (probe !== 'dead') {
          const owner = await lockDir.owner(highest);
          return { held: false, dir, entry: lockDir.path(String(highest)), ...(owner === undefined ? {} : { owner }), ...(probe === 'live' ? {} : { unknown: probe.unknown }) };
        }
      }
      const n = highest + 1;
      if (!NUMBER.test(String(n))) throw new Error(`lock dir ${dir}: number ${highest} is too high to take the next one; remove the directory once no process uses it`);
      await options.beforeLink?.(n);
      try {
        lockDir.link(taking, String(n));
      } catch (err) {
        if (errorCode(err) === 'EEXIST') continue;
        throw new Error(`taking the lock ${lockDir.path(String(n))}: ${errorMessage(err)}`, { cause: err });
      }
      if (lockDir.highest() > n) {
        lockDir.unlinkQuietly(String(n));
        continue;
      }
      lockDir.unlinkQuietly(taking);
      const record: LockOwner & { version: number } = { version: PROCESS_LOCK_RECORD_VERSION, pid: process.pid, command, since: (options.now ?? (() => new Date()))().toISOString() };
      // The record is written and renamed beneath the base, never through a symlink either.
      await writeFileAtomic(new NodeFileSystem({ confineChangesTo: [base] }), lockDir.path(`${n}.json`), new TextEncoder().encode(`${JSON.stringify(record)}\n`), { mode: 0o640 });
      await collectGarbage(lockDir, n, taking);
      let released: Promise<void> | undefined;
      held = {
        held: true,
        dir,
        entry: lockDir.path(String(n)),
        release: () =>
          (released ??= closeServer(server).then(() => {
            lockDir.close();
          })),
      };
      return held;
    }
    throw new Error(`lock dir ${dir}: other processes kept taking the lock; gave up after ${MAX_ROUNDS} rounds`);
  } finally {
    if (held === undefined) {
      await closeServer(server);
      lockDir.unlinkQuietly(taking);
      lockDir.close();
    }
  }
}

/** The holder of number `n` removes what no holder needs: lower numbers and their records, sockets of processes that died taking the lock. */
async function collectGarbage(lockDir: LockDir, n: number, own: string): Promise<void> {
  for (const name of lockDir.names()) {
    if (name === own) continue;
    if (NUMBER.test(name)) {
      if (Number(name) < n) lockDir.unlinkQuietly(name);
      continue;
    }
    const record = RECORD.exec(name);
    if (record !== null) {
      if (Number(record[1]) < n || record[2] !== undefined) lockDir.unlinkQuietly(name);
      continue;
    }
    // Another process taking the lock right now keeps its socket; one that died doing so does not.
    if (TAKING.test(name) && (await lockDir.probe(name)) === 'dead') lockDir.unlinkQuietly(name);
  }
}

/**
 * Who holds the lock of `dir`, without taking it or writing anything; undefined when nobody does
 * (or the directory does not exist). For a dry run's note.
 */
export async function processLockHolder(base: string, dir: string): Promise<BusyLock | undefined> {
  let lockDir: LockDir;
  try {
    lockDir = await LockDir.open(base, dir, false);
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const highest = lockDir.highest();
      if (highest === 0) return undefined;
      const probe = await lockDir.probe(String(highest));
      if (probe === 'gone') continue;
      if (probe === 'dead') return undefined;
      const owner = await lockDir.owner(highest);
      return { held: false, dir, entry: lockDir.path(String(highest)), ...(owner === undefined ? {} : { owner }), ...(probe === 'live' ? {} : { unknown: probe.unknown }) };
    }
    return undefined;
  } finally {
    lockDir.close();
  }
}
