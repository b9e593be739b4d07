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
 * Not modelled: torn writes inside a file, reordering across commits (ordered mode forbids it).
 */
import { Volume } from 'memfs';

import { MemFs } from '../adapters/memory/memFs.js';
import type { DirEntry, FileStat, FileSystem, WriteFileOptions } from '../host/fs.js';

/** ext4's default journal commit interval (mount option commit=5). */
export const JOURNAL_COMMIT_INTERVAL_MS = 5000;

type ImageEntry =
  | { readonly path: string; readonly type: 'dir'; readonly mode: number }
  | { readonly path: string; readonly type: 'file'; readonly mode: number; readonly data: Uint8Array }
  | { readonly path: string; readonly type: 'link'; readonly target: string };

interface StatLike {
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  readonly mode: number;
}

export class DurableFs implements FileSystem {
  readonly #vol: Volume;
  /** What every process sees. */
  readonly mem: MemFs;
  #durable: ImageEntry[] = [];
  #dirty = false;
  #lastCommitMs = 0;
  /** Called after every change to the page cache (whoever makes it). */
  onChange: () => void = () => undefined;
  /** How many journal commits happened (fsyncs and periodic). */
  commits = 0;

  constructor(private readonly now: () => number) {
    // memfs owns new nodes by this injected identity but checks most accesses (canWrite(),
    // canRead() with no argument) against the real process's: the two must be the same user, or
    // a non-root user gets EACCES on the simulator's own files. Read once, not on every path walk
    // (two syscalls per lookup dominated the simulator's time).
    const uid = process.getuid?.() ?? 0;
    const gid = process.getgid?.() ?? 0;
    this.#vol = Volume.fromJSON({}, '/', {
      process: { getuid: () => uid, getgid: () => gid, cwd: () => '/', platform: 'linux', emitWarning: () => undefined, env: {} },
    });
    this.mem = new MemFs(this.#vol);
  }

  /** Everything written so far is on disk (setup is durable). */
  commit(nowMs: number): void {
    this.#lastCommitMs = nowMs;
    if (!this.#dirty) return;
    this.#durable = this.#image();
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

  /** Power cut: the page cache is gone; the disk image is what is left. Returns whether anything was lost. */
  powerCut(): boolean {
    if (!this.#dirty) return false;
    this.#vol.reset();
    for (const e of this.#durable) {
      if (e.path === '/') continue;
      if (e.type === 'dir') this.#vol.mkdirSync(e.path, { mode: e.mode });
      else if (e.type === 'file') this.#vol.writeFileSync(e.path, e.data, { mode: e.mode });
      else this.#vol.symlinkSync(e.target, e.path);
    }
    this.#dirty = false;
    return true;
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
    this.#dirty = true;
    this.commit(this.now());
    return true;
  }

  #image(): ImageEntry[] {
    const out: ImageEntry[] = [];
    const walk = (dir: string): void => {
      for (const name of (this.#vol.readdirSync(dir) as string[]).map(String).sort()) {
        const p = dir === '/' ? `/${name}` : `${dir}/${name}`;
        const st = this.#vol.lstatSync(p) as unknown as StatLike;
        if (st.isSymbolicLink()) out.push({ path: p, type: 'link', target: String(this.#vol.readlinkSync(p)) });
        else if (st.isDirectory()) {
          out.push({ path: p, type: 'dir', mode: st.mode & 0o7777 });
          walk(p);
        } else {
          const data = this.#vol.readFileSync(p);
          out.push({ path: p, type: 'file', mode: st.mode & 0o7777, data: typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data) });
        }
      }
    };
    walk('/');
    return out;
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
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void> {
    return this.#mutate(this.mem.mkdir(path, options));
  }
  async writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    await this.#mutate(this.mem.writeFile(path, data, options));
    if (options?.fsync === true) this.commit(this.now());
  }
  rename(from: string, to: string): Promise<void> {
    return this.#mutate(this.mem.rename(from, to));
  }
  async fsyncDir(path: string): Promise<void> {
    await this.mem.fsyncDir(path);
    this.commit(this.now());
  }
  rmdir(path: string): Promise<void> {
    return this.#mutate(this.mem.rmdir(path));
  }
  unlink(path: string): Promise<void> {
    return this.#mutate(this.mem.unlink(path));
  }
  symlink(target: string, path: string): Promise<void> {
    return this.#mutate(this.mem.symlink(target, path));
  }

  #mutate(p: Promise<void>): Promise<void> {
    // MemFs applies the change synchronously; a failed call changed nothing.
    return p.then(() => {
      this.#dirty = true;
      this.onChange();
    });
  }
}
