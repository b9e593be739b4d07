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
 * Sockets are bound and connected through `/proc/self/fd/<fd of the lock dir>/<name>` when the
 * plain path is longer than sun_path holds (Node would cut it silently).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, linkSync, lstatSync, mkdirSync, openSync, readdirSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import * as posix from 'node:path/posix';

import { errorCode, errorMessage, writeFileAtomic } from '../../ports/fs.js';
import { MAX_UNIX_SOCKET_PATH_BYTES } from '../grpc/endpoint.js';
import { fsPath, NodeFileSystem } from './nodeFs.js';

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

/** The lock dir opened, for the socket paths too long for sun_path. */
class LockDir {
  readonly fd: number;
  constructor(readonly dir: string) {
    this.fd = openSync(fsPath(dir), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  }

  path(name: string): string {
    return posix.join(this.dir, name);
  }

  /** The path to bind or connect `name` with: the plain one, or through /proc/self/fd when too long (or not UTF-8). */
  socketPath(name: string): string {
    const plain = this.path(name);
    return typeof fsPath(plain) === 'string' && Buffer.byteLength(plain) <= MAX_UNIX_SOCKET_PATH_BYTES ? plain : `/proc/self/fd/${this.fd}/${name}`;
  }

  /** The names in the directory (this module's own names are ASCII; any other is left alone). */
  names(): string[] {
    return readdirSync(fsPath(this.dir), { encoding: 'buffer' }).map((b) => b.toString('latin1'));
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
      if (!lstatSync(fsPath(this.path(name))).isSocket()) return 'dead';
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return 'gone';
      return { unknown: `lstat ${this.path(name)}: ${errorMessage(err)}` };
    }
    return new Promise<Probe>((resolve) => {
      const socket = connect(this.socketPath(name));
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
      const text = new TextDecoder().decode(await new NodeFileSystem().readFile(this.path(`${n}.json`), MAX_RECORD_BYTES, { noFollow: true }));
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

  unlinkQuietly(name: string): void {
    try {
      unlinkSync(fsPath(this.path(name)));
    } catch {
      // already gone, or not ours to remove: the next holder tries again
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Creates `dir` (mode {@link LOCK_DIR_MODE}) when missing, below a `base` that must exist; every component must be a real directory. */
function ensureLockDir(base: string, dir: string): void {
  const rel = posix.relative(base, dir);
  if (rel === '' || rel.startsWith('..') || posix.isAbsolute(rel)) throw new Error(`lock dir ${dir} is not below ${base}`);
  let at = base;
  for (const part of rel.split('/')) {
    at = posix.join(at, part);
    try {
      mkdirSync(fsPath(at), { mode: LOCK_DIR_MODE });
    } catch (err) {
      if (errorCode(err) !== 'EEXIST') throw new Error(`creating the lock dir ${at}: ${errorMessage(err)}`, { cause: err });
    }
    const st = lstatSync(fsPath(at));
    if (!st.isDirectory()) throw new Error(`lock dir ${at} is not a directory (${st.isSymbolicLink() ? 'a symlink' : 'another file type'}): not followed`);
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
  ensureLockDir(base, dir);
  const lockDir = new LockDir(dir);
  const taking = `.taking-${process.pid}-${randomBytes(8).toString('hex')}`;
  const server = createServer((connection) => {
    // A probe only needs the connection to be accepted.
    connection.on('error', () => undefined);
    connection.destroy();
  });
  let held: HeldLock | undefined;
  try {
    await listen(server, lockDir.socketPath(taking));
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
        linkSync(fsPath(lockDir.path(taking)), fsPath(lockDir.path(String(n))));
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
      await writeFileAtomic(new NodeFileSystem(), lockDir.path(`${n}.json`), new TextEncoder().encode(`${JSON.stringify(record)}\n`), { mode: 0o640 });
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
export async function processLockHolder(dir: string): Promise<BusyLock | undefined> {
  let lockDir: LockDir;
  try {
    lockDir = new LockDir(dir);
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
