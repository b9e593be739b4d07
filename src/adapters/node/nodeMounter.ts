/**
 * The Mounter port over the real kernel: mount(8) and umount(8) run with argument arrays (never
 * through a shell), the mount-point check and mount table read /proc/self/mountinfo.
 *
 * Errors are {@link MountCommandError}s (an {@link FsError}): `code` is the errno the command's
 * message names when it can be told (ENOENT, ENOTDIR, EBUSY, EPERM, EACCES, EINVAL — "not
 * mounted" is EINVAL, as the umount(2) syscall says), ETIMEDOUT when the command outlived the
 * timeout and was killed, and EMOUNT otherwise. Commands run with LC_ALL=C so their messages are
 * the English ones this mapping knows.
 *
 * A timed-out mount is killed with SIGKILL and the call rejects at once, without waiting for the
 * child (a mount stuck in the kernel cannot die before its syscall returns). The mount may still
 * complete afterwards: callers re-check the table, as kubelet's reconciler does on its next pass.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as posix from 'node:path/posix';

import { FsError, errorCode, errorMessage, type FileStat, type FileSystem } from '../../ports/fs.js';
import { FreshSharedCall } from '../../ports/concurrency.js';
import { discardLogger, type Logger } from '../../ports/logger.js';
import { escapeMountPath } from '../../mount/mountInfo.js';
import { readMountTableSnapshot, type MountTableSnapshot } from '../../mount/mountRefs.js';
import type { Mounter } from '../../ports/mounter.js';
import type { MountInfoSource } from '../../mount/mountTable.js';
import { LIVE_MOUNTINFO, mountInfoFileSource } from './mountInfoFile.js';
import { isMountRootByMountId, liveMountIdProbe, type MountIdProbe } from './mountId.js';
import { NodeFileSystem } from './nodeFs.js';

/** What a finished (or killed) command left behind. */
export interface CommandResult {
  /** Exit status; null when the child was killed by a signal or abandoned on timeout. */
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The command outlived the timeout: it was sent SIGKILL and not waited for. */
  readonly timedOut: boolean;
}

export interface RunOptions {
  readonly timeoutMs: number;
}

/**
 * Runs `cmd` with `args` (no shell). Resolves with the result whatever the exit status; rejects
 * only when the command could not be started (e.g. ENOENT for a missing binary).
 */
export type CommandRunner = (cmd: string, args: readonly string[], options: RunOptions) => Promise<CommandResult>;

/** Default timeout of one mount or umount command. */
export const DEFAULT_MOUNT_TIMEOUT_MS = 60_000;
/** Bytes of stdout and of stderr kept from a command; the rest is read and dropped. */
export const MAX_COMMAND_OUTPUT_BYTES = 64 * 1024;

/**
 * The real runner: child_process.spawn with an argument array, stdin closed, LC_ALL=C, output
 * bounded, and a timer that SIGKILLs the child and settles without waiting for it to exit.
 */
export const spawnRunner: CommandRunner = (cmd, args, options) =>
  new Promise<CommandResult>((resolve, reject) => {
    let settled = false;
    const out = new BoundedText(MAX_COMMAND_OUTPUT_BYTES);
    const err = new BoundedText(MAX_COMMAND_OUTPUT_BYTES);
    const child = spawn(cmd, [...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
      shell: false,
    });
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      child.kill('SIGKILL');
      resolve({ exitCode: null, signal: 'SIGKILL', stdout: out.text(), stderr: err.text(), timedOut: true });
    }, options.timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', (e) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      resolve({ exitCode: code, signal, stdout: out.text(), stderr: err.text(), timedOut: false });
    });
  });

class BoundedText {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #truncated = false;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    const room = this.max - this.#size;
    if (room <= 0) {
      this.#truncated = true;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (kept.length < chunk.length) this.#truncated = true;
    this.#chunks.push(kept);
    this.#size += kept.length;
  }
  text(): string {
    const s = Buffer.concat(this.#chunks, this.#size).toString('utf8');
    return this.#truncated ? `${s}...(truncated)` : s;
  }
}

/** A failed mount or umount command. */
export class MountCommandError extends FsError {
  constructor(
    code: string,
    target: string,
    syscall: 'mount' | 'umount',
    message: string,
    /** The command and its arguments, as run. */
    readonly command: readonly string[],
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(code, target, syscall, message);
  }
}

export interface NodeMounterOptions {
  /** mount(8) binary; default /bin/mount when it exists, else "mount" looked up in PATH. */
  readonly mountCommand?: string;
  /** umount(8) binary; default /bin/umount when it exists, else "umount" looked up in PATH. */
  readonly umountCommand?: string;
  /** Per-command timeout in ms (default 60 s). */
  readonly timeoutMs?: number;
  /** Runs the commands; default {@link spawnRunner}. Tests inject a recorder. */
  readonly run?: CommandRunner;
  /** stat/realpath for the mount-point check; default NodeFileSystem. */
  readonly fs?: FileSystem;
  /** The mount table; default the live /proc/self/mountinfo (with os.release()). */
  readonly mountInfo?: MountInfoSource;
  /** Where the fall-back to the st_dev comparison is reported. */
  readonly logger?: Logger;
  /**
   * Mount ids for the check of a directory (see mountId.ts); false to always read the table.
   * Default: the live probe, unless `mountInfo` is given (then the table given is the truth).
   */
  readonly mountIds?: MountIdProbe | false;
}

function defaultBinary(absolute: string, name: string): string {
  return existsSync(absolute) ? absolute : name;
}

/** How the command line is shown in messages: arguments with blanks or quotes are JSON-quoted. */
function showArgs(args: readonly string[]): string {
  return args.map((a) => (a === '' || /[\s"'\\]/.test(a) ? JSON.stringify(a) : a)).join(' ');
}

interface ErrnoRule {
  readonly pattern: RegExp;
  readonly code: string;
}

/** util-linux messages (LC_ALL=C) -> errno, first match wins. */
const UMOUNT_RULES: readonly ErrnoRule[] = [
  { pattern: /not mounted|not a mount point/i, code: 'EINVAL' },
  { pattern: /no mount point specified|No such file or directory/i, code: 'ENOENT' },
  { pattern: /target is busy|device is busy|Device or resource busy/i, code: 'EBUSY' },
  { pattern: /must be superuser|only root can|Operation not permitted/i, code: 'EPERM' },
  { pattern: /Permission denied/i, code: 'EACCES' },
  { pattern: /Invalid argument/i, code: 'EINVAL' },
];
const MOUNT_RULES: readonly ErrnoRule[] = [
  { pattern: /does not exist|No such file or directory/i, code: 'ENOENT' },
  { pattern: /Not a directory/i, code: 'ENOTDIR' },
  { pattern: /already mounted|target is busy|Device or resource busy/i, code: 'EBUSY' },
  { pattern: /must be superuser|only root can|Operation not permitted/i, code: 'EPERM' },
  { pattern: /Permission denied/i, code: 'EACCES' },
];

/** The errno a mount(8)/umount(8) message names, if any. */
export function errnoFromMountOutput(syscall: 'mount' | 'umount', stderr: string): string | undefined {
  const rules = syscall === 'mount' ? MOUNT_RULES : UMOUNT_RULES;
  return rules.find((r) => r.pattern.test(stderr))?.code;
}

function toFsError(err: unknown, path: string, syscall: string): FsError {
  if (err instanceof FsError) return err;
  const code = errorCode(err) ?? 'EIO';
  return new FsError(code, path, syscall, `${syscall} ${path}: ${errorMessage(err)}`);
}

export class NodeMounter implements Mounter {
  readonly #mountCommand: string;
  readonly #umountCommand: string;
  readonly #timeoutMs: number;
  readonly #run: CommandRunner;
  readonly #fs: FileSystem;
  readonly #mountInfo: MountInfoSource;
  readonly #logger: Logger;
  /** undefined once the kernel was found not to report mount ids (or when not to be used). */
  #mountIds: MountIdProbe | undefined;
  /** Mount table reads, shared by concurrent callers (each answered by a read started after it asked). */
  readonly #tableReads = new FreshSharedCall(() => readMountTableSnapshot(this.#mountInfo, { strict: true }));

  constructor(options: NodeMounterOptions = {}) {
    this.#mountCommand = options.mountCommand ?? defaultBinary('/bin/mount', 'mount');
    this.#umountCommand = options.umountCommand ?? defaultBinary('/bin/umount', 'umount');
    const timeoutMs = options.timeoutMs ?? DEFAULT_MOUNT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error(`mount timeout must be a positive number of ms, got ${timeoutMs}`);
    this.#timeoutMs = timeoutMs;
    this.#run = options.run ?? spawnRunner;
    this.#fs = options.fs ?? new NodeFileSystem();
    this.#mountInfo = options.mountInfo ?? mountInfoFileSource(LIVE_MOUNTINFO);
    this.#logger = options.logger ?? discardLogger;
    this.#mountIds = options.mountIds === false ? undefined : (options.mountIds ?? (options.mountInfo === undefined ? liveMountIdProbe() : undefined));
  }

  /**
   * mount [-t fsType] [-o opt1,opt2] source target. fsType '' and empty options are left out; a
   * bind mount is options ['bind'] (-o bind). A source or target that is empty, starts with "-"
   * (it would be read as an option) or holds a NUL byte is refused with EINVAL before anything runs.
   */
  async mount(source: string, target: string, fsType: string, options: readonly string[]): Promise<void> {
    checkOperand('mount', target, 'source', source);
    checkOperand('mount', target, 'target', target);
    const args: string[] = [];
    if (fsType !== '') args.push('-t', fsType);
    if (options.length > 0) args.push('-o', options.join(','));
    args.push(source, target);
    await this.#exec('mount', this.#mountCommand, args, target);
  }

  /** umount target; EINVAL when target is not mounted, ENOENT when it does not exist. */
  async unmount(target: string): Promise<void> {
    checkOperand('umount', target, 'target', target);
    await this.#exec('umount', this.#umountCommand, [target], target);
  }

  /**
   * false iff `path` is a mount point; a missing path rejects with an FsError ENOENT. A directory
   * is checked by mount ids (mountId.ts): its mount differs from its parent's. Anything else (a
   * file, "/", a kernel without mnt_id in fdinfo, an open refused) is stat'ed (rejecting with its
   * FsError) and asks the live mount table: some entry must have mountPoint equal to realpath(path) escaped as
   * the kernel escapes it. Both see bind mounts on the same filesystem, as kubelet >= 1.30's
   * statx STATX_ATTR_MOUNT_ROOT does. When the table cannot be read or parsed, falls back to
   * kubelet's pre-1.30 check: a different st_dev than the parent directory's (which misses
   * same-filesystem bind mounts).
   *
   * Known limit of the table: an entry hidden by a later mount over one of its ancestors still counts.
   */
  async isLikelyNotMountPoint(path: string): Promise<boolean> {
    const probe = this.#mountIds;
    if (probe !== undefined) {
      const answer = await this.#notMountPointByMountId(probe, path);
      if (answer !== undefined) return answer;
    }
    let st: FileStat;
    try {
      st = await this.#fs.stat(path);
    } catch (err) {
      throw toFsError(err, path, 'stat');
    }
    let table: MountTableSnapshot;
    try {
      table = await this.readMountTable();
    } catch (err) {
      this.#logger.warning('Cannot read the mount table; comparing device numbers with the parent directory instead', {
        path,
        mountTable: this.#mountInfo.name,
        err: errorMessage(err),
      });
      return this.#sameDeviceAsParent(path, st);
    }
    let real: string;
    try {
      real = await this.#fs.realpath(path);
    } catch (err) {
      throw toFsError(err, path, 'realpath');
    }
    const escaped = escapeMountPath(real);
    return !table.entries.some((e) => e.mountPoint === escaped);
  }

  /**
   * The check by mount ids, with no stat first (the opens say what stat would: ENOENT for a
   * missing path, ENOTDIR for a file). undefined when the table must decide: not a directory,
   * "/", an open refused for another reason, or a kernel without mnt_id (then never asked again).
   */
  async #notMountPointByMountId(probe: MountIdProbe, path: string): Promise<boolean | undefined> {
    let root: boolean | undefined;
    try {
      root = await isMountRootByMountId(probe, path);
    } catch (err) {
      if (errorCode(err) === 'ENOENT') throw new FsError('ENOENT', path, 'stat', `ENOENT: no such file or directory, stat '${path}'`);
      return undefined;
    }
    if (root !== undefined) return !root;
    if (path.replace(/\/+$/, '') !== '' && this.#mountIds !== undefined) {
      this.#mountIds = undefined;
      this.#logger.v(2).info('The kernel does not report mount ids in /proc/self/fdinfo; checking mount points in the mount table', { path });
    }
    return undefined;
  }

  /**
   * A fresh snapshot of the mount table, read consistently on kernels < 5.8, parsed strictly:
   * read after this call was made. Concurrent callers share reads: while one read runs, every
   * new caller waits for the single read that starts when it ends (a read already running may
   * have started before their question). A thousand operations asking at once then cost a few
   * reads of the table, not a thousand; the snapshots are read-only, so sharing one is safe.
   */
  readMountTable(): Promise<MountTableSnapshot> {
    return this.#tableReads.call();
  }

  /** kubelet's stat-based IsLikelyNotMountPoint: st_dev of path vs st_dev of its parent. */
  async #sameDeviceAsParent(path: string, st: FileStat): Promise<boolean> {
    const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    const parent = posix.dirname(trimmed);
    let parentStat: FileStat;
    try {
      parentStat = await this.#fs.stat(parent);
    } catch (err) {
      throw toFsError(err, parent, 'stat');
    }
    return st.dev === parentStat.dev;
  }

  async #exec(syscall: 'mount' | 'umount', cmd: string, args: readonly string[], target: string): Promise<void> {
    const command = [cmd, ...args];
    const verb = syscall === 'mount' ? 'Mounting' : 'Unmounting';
    const describe = (what: string, output: string): string =>
      `${syscall} of ${target} failed: ${what}\n${verb} command: ${cmd}\n${verb} arguments: ${showArgs(args)}\nOutput: ${output}`;
    let result: CommandResult;
    try {
      result = await this.#run(cmd, args, { timeoutMs: this.#timeoutMs });
    } catch (err) {
      throw new MountCommandError('EMOUNT', target, syscall, describe(`cannot run ${cmd}: ${errorMessage(err)}`, ''), command, null, '');
    }
    if (result.timedOut) {
      const msg = describe(`timed out after ${this.#timeoutMs} ms; the command was killed`, result.stderr.trim());
      throw new MountCommandError('ETIMEDOUT', target, syscall, msg, command, null, result.stderr);
    }
    if (result.exitCode === 0) return;
    const stderr = result.stderr.trim();
    const output = stderr !== '' ? stderr : result.stdout.trim();
    const status = result.exitCode !== null ? `exit status ${result.exitCode}` : `killed by ${result.signal ?? 'a signal'}`;
    const code = errnoFromMountOutput(syscall, output) ?? 'EMOUNT';
    throw new MountCommandError(code, target, syscall, describe(status, output), command, result.exitCode, result.stderr);
  }
}

function checkOperand(syscall: 'mount' | 'umount', target: string, what: string, value: string): void {
  let why: string | undefined;
  if (value === '') why = 'is empty';
  else if (value.startsWith('-')) why = 'starts with "-" and would be read as an option';
  else if (value.includes('\0')) why = 'contains a NUL byte';
  if (why !== undefined) {
    throw new FsError('EINVAL', target, syscall, `${syscall}: refusing ${what} ${JSON.stringify(value)}: it ${why}`);
  }
}
