/**
 * The last good store of the cluster dir view (clusterDir.ts, "Partial views never delete"): the
 * objects of each manifest file's latest clean parse, in memory and as a copy of its bytes in
 * DIR/.nodevol-last-good/<file name> (written atomically and durably), so that a file that cannot
 * be read cleanly - or is not read because a limit was hit - keeps its last good contents, across
 * restarts too. A copy is forgotten only when the file is really gone (a complete listing no
 * longer names it). While the store did not exist at start (first start, or deleted), it is not
 * trusted: nothing tells which unreadable file held a running pod.
 */
import { createHash } from 'node:crypto';
import * as posix from 'node:path/posix';

import { errorCode, writeFileAtomic, type FileStat, type FileSystem } from '../../ports/fs.js';
import { mapConcurrently } from '../../ports/concurrency.js';
import type { Logger } from '../../ports/logger.js';
import { parseManifestFile, type ParsedFile } from './clusterManifests.js';

/** A file's last clean parse, and the hash of the bytes kept in the store. */
export interface LastGood {
  readonly parsed: ParsedFile;
  readonly sha256: string;
}

export interface LastGoodStoreOptions {
  readonly fs: FileSystem;
  readonly logger: Logger;
  /** The cluster dir (fsync'ed when the store is created in it). */
  readonly clusterDir: string;
  /** Where the manifests are: the file names parsed from a copy name them there. */
  readonly manifestsDir: string;
  /** The store directory, inside the cluster dir. */
  readonly storeDir: string;
  readonly maxFileBytes: number;
  readonly maxAliasCount: number;
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function isManifestName(name: string): boolean {
  return !name.startsWith('.') && /\.ya?ml$/.test(name);
}

/** Manifests stat'ed and read at once: the first pass over a large cluster dir is latency-bound. */
export const READ_CONCURRENCY = 32;

export class LastGoodStore {
  readonly #o: LastGoodStoreOptions;
  /** The last clean parse of each listed manifest file, by file name (mirrors the store). */
  readonly #lastGood = new Map<string, LastGood>();
  /** Whether the store was loaded (once, at the first pass) and whether it existed then. */
  #loaded = false;
  #trusted = false;
  /** Files read cleanly before the store existed: copied when it is created. */
  readonly #pendingCopies = new Map<string, Uint8Array>();
  /** The files that have a copy in the store. */
  readonly #storeNames = new Set<string>();

  constructor(options: LastGoodStoreOptions) {
    this.#o = options;
  }

  get loaded(): boolean {
    return this.#loaded;
  }

  /** The store existed at start, or was created since: its copies can stand in for unreadable files. */
  get trusted(): boolean {
    return this.#trusted;
  }

  /** Every file name with last good contents, in memory or on disk. */
  names(): Set<string> {
    return new Set([...this.#lastGood.keys(), ...this.#storeNames]);
  }

  /** Lists the store once, at the first pass; copies are read when a file needs its own. */
  async load(): Promise<void> {
    this.#loaded = true;
    const store = this.#o.storeDir;
    let st: FileStat;
    try {
      st = await this.#o.fs.lstat(store);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') this.#o.logger.error(err, 'Cannot read the last good manifests; starting without them', { dir: store });
      return;
    }
    if (st.type !== 'directory') {
      this.#o.logger.error(new Error(`${store} is a ${st.type}, not a directory`), 'Cannot use the last good manifests; starting without them', { dir: store });
      return;
    }
    try {
      for (const e of await this.#o.fs.readdir(store)) {
        if (e.type === 'file' && isManifestName(e.name)) this.#storeNames.add(e.name);
        // A temp file left by a crash in the middle of a copy: never complete, never needed.
        else if (e.type === 'file' && e.name.endsWith('.tmp')) await this.#o.fs.unlink(posix.join(store, e.name)).catch(() => undefined);
      }
    } catch (err) {
      this.#o.logger.error(err, 'Cannot list the last good manifests; starting without them', { dir: store });
      return;
    }
    this.#trusted = true;
  }

  /** The last good contents of a file: in memory, else its copy in the store (read once). */
  async of(name: string): Promise<LastGood | undefined> {
    const known = this.#lastGood.get(name);
    if (known !== undefined || !this.#storeNames.has(name)) return known;
    const bytes = await this.#readCopy(name);
    if (bytes === undefined) return undefined;
    const parsed = parseManifestFile(posix.join(this.#o.manifestsDir, name), bytes, this.#o.maxAliasCount);
    if (parsed.problems.length > 0) {
      this.#o.logger.error(new Error(parsed.problems[0]?.message ?? 'problems'), 'Ignoring a last good manifest copy that does not read cleanly', { file: posix.join(this.#o.storeDir, name) });
      return undefined;
    }
    const lastGood = { parsed, sha256: sha256(bytes) };
    this.#lastGood.set(name, lastGood);
    return lastGood;
  }

  async #readCopy(name: string): Promise<Uint8Array | undefined> {
    const copy = posix.join(this.#o.storeDir, name);
    try {
      return await this.#o.fs.readFile(copy, this.#o.maxFileBytes, { noFollow: true });
    } catch (err) {
      this.#o.logger.error(err, 'Cannot read the last good copy of a manifest', { file: copy });
      return undefined;
    }
  }

  async create(): Promise<void> {
    try {
      await this.#o.fs.mkdir(this.#o.storeDir, { recursive: false, mode: 0o700 });
      await this.#o.fs.fsyncDir(this.#o.clusterDir);
    } catch (err) {
      if (errorCode(err) !== 'EEXIST') {
        this.#o.logger.error(err, 'Cannot create the last good manifests store; a restart will not keep the last good contents', { dir: this.#o.storeDir });
        return;
      }
    }
    // Copies of every file read cleanly before the store existed.
    this.#trusted = true;
    await mapConcurrently([...this.#pendingCopies], READ_CONCURRENCY, ([name, bytes]) => this.#writeCopy(name, bytes));
    this.#pendingCopies.clear();
  }

  async remember(name: string, parsed: ParsedFile, bytes: Uint8Array): Promise<void> {
    const hash = sha256(bytes);
    const had = this.#lastGood.get(name);
    this.#lastGood.set(name, { parsed, sha256: hash });
    if (had?.sha256 === hash) return;
    if (!this.#trusted) {
      this.#pendingCopies.set(name, bytes);
      return;
    }
    if (had === undefined && this.#storeNames.has(name)) {
      // After a restart: the copy on disk may already be these bytes.
      const copy = await this.#readCopy(name);
      if (copy !== undefined && sha256(copy) === hash) return;
    }
    await this.#writeCopy(name, bytes);
  }

  async #writeCopy(name: string, bytes: Uint8Array): Promise<void> {
    try {
      await writeFileAtomic(this.#o.fs, posix.join(this.#o.storeDir, name), bytes, { mode: 0o600, writerId: String(process.pid) });
      this.#storeNames.add(name);
    } catch (err) {
      this.#o.logger.error(err, 'Cannot save the last good copy of a manifest; a restart will not keep it', { file: posix.join(this.#o.manifestsDir, name) });
    }
  }

  /** A file that is really gone: its last good contents are forgotten, in memory and on disk. */
  async forget(name: string): Promise<void> {
    this.#pendingCopies.delete(name);
    this.#lastGood.delete(name);
    if (!this.#storeNames.delete(name)) return;
    try {
      await this.#o.fs.unlink(posix.join(this.#o.storeDir, name));
      await this.#o.fs.fsyncDir(this.#o.storeDir);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') this.#o.logger.error(err, 'Cannot remove the last good copy of a deleted manifest', { file: posix.join(this.#o.storeDir, name) });
    }
  }
}
