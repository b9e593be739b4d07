/**
 * The simulator's filesystem with a durability model: an in-memory MemFs (the page cache, what
 * every process sees) plus the image that would survive a power cut (what the disk holds).
 *
 * Model (ext4 with data=ordered, the default, and its journal): the journal commits in order, so
 * what survives a crash is always a PREFIX of the operations. A commit happens when anyone calls
 * fsync on a file (writeFile with `fsync`) or a directory (fsyncDir) — fsync forces the running
 * transaction, with every earlier metadata change and, in ordered mode, the data of those files —
 * and every {@link JOURNAL_COMMIT_INTERVAL_MS} of virtual time (ext4's `commit=5`). At a reboot
 * everything after the last commit is lost: a file written without fsync, a rename whose
 * directory was not fsynced, a directory created or removed since. This is exactly what our
 * vol_data.json write relies on (temp file + fsync, rename, fsync of the directory) and what
 * kubelet's plain writes (pod directories, truncate-in-place JSON) do not get.
 *
 * File data is durable per file, not with the journal: a file written without fsync has its new
 * size and name committed with the journal, but its bytes reach the disk only when the kernel
 * writes them back ({@link WRITEBACK_MS} after the write, vm.dirty_expire_centisecs) or the file
 * itself is fsynced; an fsync of another file does not carry them. A power cut before that leaves
 * the write torn: a prefix of the new bytes, cut at any byte ({@link DurableFs.tear} picks where,
 * from the run's seed, the file and the power cut). A file written with fsync is whole, which is
 * why our vol_data.json write (temp file + fsync, rename, fsync of the directory) never tears
 * and kubelet's truncate-in-place write can.
 *
 * Not modelled: reordering across commits (ordered mode forbids it); directory entries durable
 * per directory (the journal commits every directory's changes together).
 */
import { Link, Node, Superblock } from '@jsonjoy.com/fs-core';
import { Volume } from 'memfs';

import { isCleanAbsolute, MemFs } from '../adapters/memory/memFs.js';
import { quietFsError, type DirEntry, type FileStat, type FileSystem, type WriteFileOptions } from '../ports/fs.js';
import { fnv1a } from './prng.js';

/** ext4's default journal commit interval (mount option commit=5). */
export const JOURNAL_COMMIT_INTERVAL_MS = 5000;
/** How long dirty file data waits in the page cache before writeback (vm.dirty_expire_centisecs=3000). */
export const WRITEBACK_MS = 30_000;

type ImageEntry =
  | { readonly path: string; readonly type: 'dir'; readonly mode: number }
  | { readonly path: string; readonly type: 'file'; readonly mode: number; readonly data: Uint8Array }
  | { readonly path: string; readonly type: 'link'; readonly target: string };

/**
 * The simulator's memfs superblock: memfs' own, made cheaper where a simulated run spends its time
 * in memfs (a profile of medium workloads), with the same answers. A test holds it to memfs' own
 * superblock for the same calls (inode numbers, modes, link counts, errors).
 *  - One user, the process's (`uid`, `gid`): memfs checks an access against the user it is given
 *    or, given none (most of its read and write checks), against the real process's, read with two
 *    syscalls per check (3.7 % of a run). Its path walks and new inodes take the user from the
 *    injected identity, and its inodes answer checks asked without a user for that user; the
 *    process's user does not change.
 *  - A child's lookup does not stamp its directory's atime (a new Date per path component in
 *    memfs, and per entry of a listing; a path lookup on Linux does not touch it either). Nothing
 *    reads an atime here: the FileSystem port's stat has none.
 *  - A clean absolute path (no empty, "." or ".." component, no trailing "/", all that MemFs hands
 *    memfs) is split without path.resolve, which returns it unchanged.
 *  - Every time an inode gets (made, written, linked, read) is the world's virtual now
 *    (`nowMs`), not the host's clock, which memfs reads: the orphaned pod dir sweep compares its
 *    pods dir's mtime and ctime between sweeps, so with the host's milliseconds a sweep was
 *    skipped or not by how fast the host ran, and the same seed could give another run. At
 *    virtual time, two changes in one instant share a time, as two in one jiffy do on ext4.
 * The classes are made once per user, so memfs' code sees one inode and one link class.
 */
export function simSuperblock(uid: number, gid: number, nowMs: () => number = () => 0): Superblock {
  const key = `${uid}:${gid}`;
  let Made = superblockClasses.get(key);
  if (Made === undefined) {
    Made = simSuperblockClass(uid, gid);
    superblockClasses.set(key, Made);
  }
  return new Made(virtualStamp(nowMs));
}

const superblockClasses = new Map<string, new (stamp: () => Date) => Superblock>();

/** Where an inode of the simulator's superblock takes its times: its world's virtual now. */
const STAMP = Symbol('virtual time stamp');
interface Stamped {
  [STAMP]?: () => Date;
}

/**
 * The Date of `nowMs()`, one per instant, shared by every inode stamped in it: memfs replaces an
 * inode's time with another Date and never changes one in place.
 */
function virtualStamp(nowMs: () => number): () => Date {
  let at = Number.NaN;
  let date = new Date(0);
  return () => {
    const t = nowMs();
    if (t !== at) {
      at = t;
      date = new Date(t);
    }
    return date;
  };
}

/** A regular file, mode 0666: memfs' default for a child made without an inode. */
const S_IFREG_0666 = 0o100666;

function simSuperblockClass(uid: number, gid: number): new (stamp: () => Date) => Superblock {
  class OneUserNode extends Node {
    override canRead(u = uid, g = gid): boolean {
      return super.canRead(u, g);
    }
    override canWrite(u = uid, g = gid): boolean {
      return super.canWrite(u, g);
    }
    override canExecute(u = uid, g = gid): boolean {
      return super.canExecute(u, g);
    }
    // memfs hands each setter the host's now; the inode keeps its world's virtual now instead.
    override get atime(): Date {
      return super.atime;
    }
    override set atime(host: Date) {
      super.atime = (this as Stamped)[STAMP]?.() ?? host;
    }
    override get mtime(): Date {
      return super.mtime;
    }
    override set mtime(host: Date) {
      super.mtime = (this as Stamped)[STAMP]?.() ?? host;
    }
    override get ctime(): Date {
      return super.ctime;
    }
    override set ctime(host: Date) {
      super.ctime = (this as Stamped)[STAMP]?.() ?? host;
    }
  }

  class LookupLink extends Link {
    override getChild(name: string): Link | undefined {
      return this.children.get(name);
    }
    /** memfs' own (Link.createChild), the child a LookupLink. */
    override createChild(name: string, node: Node = this.vol.createNode(S_IFREG_0666)): Link {
      const link = new LookupLink(this.vol, this, name);
      link.setNode(node);
      if (node.isDirectory()) {
        link.children.set('.', link);
        link.getNode().nlink++;
      }
      this.setChild(name, link);
      return link;
    }
  }

  const newNode = inodeMaker(OneUserNode, uid, gid);

  class SimSuperblock extends Superblock {
    /** The virtual clock's Date (unset while memfs' constructor makes the root directory). */
    declare stamp: (() => Date) | undefined;
    constructor(stamp: () => Date) {
      super({ process: { getuid: () => uid, getgid: () => gid, cwd: () => '/', platform: 'linux', emitWarning: () => undefined, env: {} } });
      this.stamp = stamp;
      // The root directory, made before the clock was set.
      for (const node of Object.values(this.inodes)) stampInode(node, stamp);
    }
    /** memfs' own (Superblock.createLink), the root a LookupLink (its children are too). */
    override createLink(): Link;
    override createLink(parent: Link, name: string, isDirectory?: boolean, mode?: number): Link;
    override createLink(parent?: Link, name?: string, isDirectory?: boolean, mode?: number): Link {
      if (parent === undefined) return new LookupLink(this, undefined, '');
      return super.createLink(parent, name ?? '', isDirectory, mode);
    }
    /**
     * memfs' own (Superblock.createNode), the inode a OneUserNode (memfs' constructor makes the
     * root directory through it too): the next inode number, a released one first.
     */
    override createNode(mode: number): Node {
      const ino = this.releasedInos.pop() || (this.ino = (this.ino + 1) % 0xffffffff);
      const node = newNode(ino, mode, this.stamp);
      this.inodes[ino] = node;
      return node;
    }
  }
  // memfs declares filenameToSteps private, so the clean-path split goes on the prototype.
  const proto = SimSuperblock.prototype as unknown as { filenameToSteps: (this: Superblock, filename: string) => string[] };
  const general = proto.filenameToSteps;
  proto.filenameToSteps = function (this: Superblock, filename: string): string[] {
    if (!isCleanAbsolute(filename)) return general.call(this, filename);
    return filename === '/' ? [] : filename.slice(1).split('/');
  };
  return SimSuperblock;
}

/**
 * How the simulator's superblock makes an inode, the same as `new Made(ino, mode, uid, gid)`
 * without asking the process. memfs' Node constructor reads the process's uid and gid (two
 * syscalls) for every inode before it takes the ones it is given (1.3 % of a medium run). One
 * inode made by the constructor is the pattern: each new one gets its own fields in the same
 * order (one object shape), a fresh `changes` fan-out and fresh times; every other field is the
 * pattern's, which holds nothing but numbers and memfs' shared empty buffer. Should memfs' inode
 * gain a field of any other kind, the constructor is used instead.
 */
export function inodeMaker(
  Made: new (ino: number, mode: number, uid: number, gid: number) => Node,
  uid: number,
  gid: number,
): (ino: number, mode: number, stamp?: () => Date) => Node {
  const pattern = new Made(0, S_IFREG_0666, uid, gid);
  const fields = Object.entries(pattern);
  const emptyBuffer = pattern.buf;
  const fanOut: unknown = Object.getOwnPropertyDescriptor(pattern, 'changes')?.value;
  const FanOut = typeof fanOut === 'object' && fanOut !== null ? (fanOut.constructor as new () => unknown) : undefined;
  const plain = fields.every(
    ([key, value]) => typeof value === 'number' || value instanceof Date || (key === 'changes' && FanOut !== undefined) || (key === 'buf' && value === emptyBuffer && emptyBuffer.length === 0),
  );
  if (FanOut === undefined || !plain || !fields.some(([key]) => key === 'ino') || !fields.some(([key]) => key === 'mode')) {
    return (ino, mode, stamp) => {
      const node = new Made(ino, mode, uid, gid);
      if (stamp !== undefined) stampInode(node, stamp);
      return node;
    };
  }
  const proto = Made.prototype as object;
  return (ino, mode, stamp) => {
    const node = Object.create(proto) as Record<string | symbol, unknown>;
    for (const [key, value] of fields) {
      node[key] = key === 'ino' ? ino : key === 'mode' ? mode : key === 'changes' ? new FanOut() : value instanceof Date ? (stamp?.() ?? new Date()) : value;
    }
    if (stamp !== undefined) node[STAMP] = stamp;
    return node as unknown as Node;
  };
}

/** Gives an inode made otherwise its stamp, and its times from it. */
function stampInode(node: Node, stamp: () => Date): void {
  (node as Stamped)[STAMP] = stamp;
  const now = stamp();
  node.atime = now;
  node.mtime = now;
  node.btime = now;
}

export class DurableFs implements FileSystem {
  readonly #vol: Volume;
  /** What every process sees. */
  readonly mem: MemFs;
  /** What the disk holds: the page cache as of the last commit, by path. */
  readonly #durable = new Map<string, ImageEntry>();
  /**
   * Paths changed in the page cache since the last commit (MemFs reports every change it makes):
   * a commit re-reads only these, and what lies below them.
   */
  readonly #changed = new Set<string>();
  #dirty = false;
  #lastCommitMs = 0;
  /** Called after every change to the page cache (whoever makes it). */
  onChange: () => void = () => undefined;
  /** How many journal commits happened (fsyncs and periodic). */
  commits = 0;
  /**
   * Where a power cut tears a file's unsynced write: how many of its `length` new bytes reach the
   * disk (0..length); `cut` counts the power cuts. Default: none (the write is lost whole).
   */
  tear: (path: string, length: number, cut: number) => number = () => 0;
  /**
   * Files written without fsync whose bytes are not on disk yet: path → virtual time of the write
   * and the journal commits made before it.
   */
  readonly #unsynced = new Map<string, { readonly at: number; readonly commits: number }>();
  #powerCuts = 0;
  #pageVersion = 0;

  /** Changes whenever the page cache changes. */
  get pageVersion(): number {
    return this.#pageVersion;
  }

  constructor(private readonly now: () => number) {
    // The user, read once: memfs' inodes are owned by it and checked against it (a non-root user
    // would get EACCES on the simulator's own files if the two differed).
    this.#vol = new Volume(simSuperblock(process.getuid?.() ?? 0, process.getgid?.() ?? 0, now));
    this.mem = new MemFs(this.#vol);
    this.mem.onChange = (realPath) => {
      this.#changed.add(realPath);
      this.#pageVersion++;
      this.#forgetTextHashes(realPath);
    };
  }

  /** Everything written so far is on disk (setup is durable). */
  commit(nowMs: number): void {
    this.#lastCommitMs = nowMs;
    if (!this.#dirty) return;
    // A changed path covers what lies below it: re-read the outermost ones only.
    const changed = [...this.#changed].sort();
    let covered: string | undefined;
    for (const p of changed) {
      if (covered !== undefined && p.startsWith(`${covered}/`)) continue;
      covered = p;
      for (const key of this.#durable.keys()) if (key === p || key.startsWith(`${p}/`)) this.#durable.delete(key);
      this.#read(p);
    }
    this.#changed.clear();
    this.#dirty = false;
    this.commits++;
  }

  /** The periodic journal commit: call as virtual time moves. */
  tick(nowMs: number): void {
    if (nowMs - this.#lastCommitMs >= JOURNAL_COMMIT_INTERVAL_MS) this.commit(nowMs);
  }

  /** Whether something would be lost if the power went now. */
  get dirty(): boolean {
    return this.#dirty;
  }

  /** The unsynced writes that a power cut now would tear ('' when none), for the world-state hash. */
  unsyncedState(): string {
    if (this.#unsynced.size === 0) return '';
    const now = this.now();
    return [...this.#unsynced]
      .filter(([, w]) => now - w.at < WRITEBACK_MS)
      .map(([p]) => p)
      .sort()
      .join(',');
  }

  /**
   * The unsynced writes whose name and size the journal committed and whose bytes are not written
   * back: the disk holds a torn prefix of them. Writes older than {@link WRITEBACK_MS} are whole.
   */
  #tearUnsynced(): boolean {
    let torn = false;
    const now = this.now();
    for (const [p, w] of [...this.#unsynced]) {
      this.#unsynced.delete(p);
      const e = this.#durable.get(p);
      // Written back, or written after the last commit (then the journal lost it whole), or gone.
      if (now - w.at >= WRITEBACK_MS || w.commits === this.commits || e === undefined || e.type !== 'file') continue;
      const keep = Math.max(0, Math.min(e.data.length, this.tear(p, e.data.length, this.#powerCuts)));
      if (keep === e.data.length) continue;
      this.#durable.set(p, { ...e, data: e.data.slice(0, keep) });
      torn = true;
    }
    return torn;
  }

  /** Power cut: the page cache is gone; the disk image is what is left. Returns whether anything was lost. */
  powerCut(): boolean {
    this.#powerCuts++;
    const torn = this.#tearUnsynced();
    if (!this.#dirty && !torn) return false;
    this.#vol.reset();
    // Parents before their children.
    const entries = [...this.#durable.values()].sort((a, b) => a.path.split('/').length - b.path.split('/').length || (a.path < b.path ? -1 : 1));
    for (const e of entries) {
      if (e.path === '/') continue;
      if (e.type === 'dir') this.#vol.mkdirSync(e.path, { mode: e.mode });
      else if (e.type === 'file') this.#vol.writeFileSync(e.path, e.data, { mode: e.mode });
      else this.#vol.symlinkSync(e.target, e.path);
    }
    this.mem.rescanSymlinks();
    this.#textHashes.clear();
    this.#changed.clear();
    this.#pageVersion++;
    this.#dirty = false;
    return true;
  }

  /**
   * The FNV-1a hash of a file's text ('?' read as the text when it cannot be read), for the
   * world-state hash: remembered per file until anything changes at its path or above it (the
   * state is hashed at every crash point of a run, and most files do not change in between).
   */
  textHash(path: string): string {
    const known = this.#textHashes.get(path);
    if (known !== undefined) return known;
    let text: string;
    try {
      text = this.readTextSync(path);
    } catch {
      return fnv1a('?');
    }
    const hash = fnv1a(text);
    // Only a plain file (what a symlink points to can change without a change at its path).
    if (this.mem.lstatRealSync(path)?.type === 'file') this.#textHashes.set(path, hash);
    return hash;
  }

  readonly #textHashes = new Map<string, string>();

  #forgetTextHashes(realPath: string): void {
    if (this.#textHashes.size === 0) return;
    for (const p of this.#textHashes.keys()) if (p === realPath || (p.startsWith(realPath) && p.charCodeAt(realPath.length) === 0x2f)) this.#textHashes.delete(p);
  }

  /** Test and simulator helper: a file's text, synchronously. */
  readTextSync(path: string): string {
    return String(this.#vol.readFileSync(path, 'utf8'));
  }

  /** Simulator helper: removes a file now, durably (an operator or a disk error lost it). */
  loseFile(path: string): boolean {
    try {
      this.#vol.unlinkSync(path);
    } catch {
      return false;
    }
    this.mem.forgetCachedLookups();
    this.#forgetTextHashes(path);
    this.#unsynced.delete(path);
    this.#changed.add(path);
    this.#pageVersion++;
    this.#dirty = true;
    this.commit(this.now());
    return true;
  }

  /** Simulator helper: replaces a file's bytes now, durably (a disk error or an operator did it). */
  replaceFile(path: string, data: Uint8Array): boolean {
    try {
      this.#vol.writeFileSync(path, data);
    } catch {
      return false;
    }
    this.#forgetTextHashes(path);
    this.#unsynced.delete(path);
    this.#changed.add(path);
    this.#pageVersion++;
    this.#dirty = true;
    this.commit(this.now());
    return true;
  }

  /** Copies what is at `path` in the page cache, and below it, into the disk image. */
  #read(path: string): void {
    // The page cache's paths are real ones, and every change to it goes through (or is told to)
    // the MemFs: its record of lookups and listings is current, and cheaper than memfs' walks.
    const st = this.mem.lstatRealSync(path);
    if (st === undefined) return;
    if (st.type === 'symlink') {
      this.#durable.set(path, { path, type: 'link', target: String(this.#vol.readlinkSync(path)) });
    } else if (st.type === 'directory') {
      this.#durable.set(path, { path, type: 'dir', mode: st.mode });
      for (const name of this.mem.namesSync(path) ?? []) this.#read(path === '/' ? `/${name}` : `${path}/${name}`);
    } else {
      const data = this.#vol.readFileSync(path);
      this.#durable.set(path, { path, type: 'file', mode: st.mode, data: typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data) });
    }
  }

  // ---------------------------------------------------------------- FileSystem

  readdir(path: string): Promise<DirEntry[]> {
    return this.mem.readdir(path);
  }
  lstat(path: string): Promise<FileStat> {
    return this.mem.lstat(path);
  }
  stat(path: string): Promise<FileStat> {
    return this.mem.stat(path);
  }
  realpath(path: string): Promise<string> {
    return this.mem.realpath(path);
  }
  readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array> {
    return this.mem.readFile(path, maxBytes, options);
  }
  readlink(path: string): Promise<string> {
    return this.mem.readlink(path);
  }
  async mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void> {
    if (this.#writeFaultCovers(path)) {
      // mkdir(2) looks the name up before it asks for space or a writable mount: an existing
      // path fails with EEXIST (which a recursive mkdir takes as done), never ENOSPC or EROFS.
      const existing = await this.mem.lstat(path).then(
        () => true,
        () => false,
      );
      if (existing) return this.mem.mkdir(path, options);
    }
    return this.#guard('mkdir', path, 'grow') ?? this.#mutate(this.mem.mkdir(path, options));
  }
  async writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    const refused = this.#guard('open', path, 'grow');
    if (refused !== undefined) return refused;
    await this.#mutate(this.mem.writeFile(path, data, options));
    if (options?.fsync === true) {
      this.#unsynced.delete(path);
      this.commit(this.now());
    } else if (data.length > 0) this.#unsynced.set(path, { at: this.now(), commits: this.commits });
    else this.#unsynced.delete(path);
  }
  async rename(from: string, to: string): Promise<void> {
    const refused = this.#guard('rename', to, 'grow');
    if (refused !== undefined) return refused;
    await this.#mutate(this.mem.rename(from, to));
    // The bytes go with the inode: an unsynced write stays unsynced under its new name.
    const w = this.#unsynced.get(from);
    this.#unsynced.delete(from);
    if (w === undefined) this.#unsynced.delete(to);
    else this.#unsynced.set(to, w);
  }
  async fsyncDir(path: string): Promise<void> {
    await this.mem.fsyncDir(path);
    this.commit(this.now());
  }
  rmdir(path: string): Promise<void> {
    return this.#guard('rmdir', path, 'shrink') ?? this.#mutate(this.mem.rmdir(path));
  }
  async unlink(path: string): Promise<void> {
    const refused = this.#guard('unlink', path, 'shrink');
    if (refused !== undefined) return refused;
    await this.#mutate(this.mem.unlink(path));
    this.#unsynced.delete(path);
  }
  symlink(target: string, path: string): Promise<void> {
    return this.#guard('symlink', path, 'grow') ?? this.#mutate(this.mem.symlink(target, path));
  }

  /**
   * The filesystem under `root` is full (ENOSPC: nothing can be created or written; removals
   * still work) or read-only (EROFS: nothing changes) until virtual time `untilMs`, for every
   * writer: the engine and the driver alike.
   */
  failWrites(root: string, code: 'ENOSPC' | 'EROFS', untilMs: number): void {
    this.#writeFault = { root, code, untilMs };
  }

  /** The write fault in force ('' when none), for the world-state hash. */
  writeFaultState(): string {
    const f = this.#writeFault;
    return f === undefined || this.now() >= f.untilMs ? '' : `${f.code}<${f.untilMs}`;
  }

  /** Whether a write fault is in force for `path` now. */
  #writeFaultCovers(path: string): boolean {
    const f = this.#writeFault;
    return f !== undefined && this.now() < f.untilMs && (path === f.root || path.startsWith(`${f.root}/`));
  }

  /** The error a change refused by {@link failWrites} rejects with; undefined when it may go ahead. */
  #guard(syscall: string, path: string, kind: 'grow' | 'shrink'): Promise<never> | undefined {
    const f = this.#writeFault;
    if (f === undefined) return undefined;
    if (this.now() >= f.untilMs) {
      this.#writeFault = undefined;
      return undefined;
    }
    if (path !== f.root && !path.startsWith(`${f.root}/`)) return undefined;
    if (f.code === 'ENOSPC' && kind === 'shrink') return undefined;
    return Promise.reject(quietFsError(f.code, path, syscall));
  }

  #writeFault: { readonly root: string; readonly code: 'ENOSPC' | 'EROFS'; readonly untilMs: number } | undefined;

  #mutate(p: Promise<void>): Promise<void> {
    // MemFs applies the change synchronously; a failed call changed nothing.
    return p.then(() => {
      this.#dirty = true;
      this.onChange();
    });
  }
}
