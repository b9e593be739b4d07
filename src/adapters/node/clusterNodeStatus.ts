/**
 * The cluster dir's node-status.json: read (cached by the file's identity, and not even stat'ed
 * while the watcher says it did not change and a check is not due), and its volumesInUse
 * rewritten, keeping every other field, atomically. A regular file in the cluster dir only: a
 * symlink is refused (reads and writes stay inside the cluster dir).
 */
import * as posix from 'node:path/posix';

import { errorMessage, writeFileAtomic, type FileStat, type FileSystem } from '../../ports/fs.js';
import { formatFieldPath, isRecord, nodeStatusSchema } from './clusterManifests.js';
import type { ClusterDirWatcher } from './clusterDirWatcher.js';

export type NodeStatusRead = { raw: Record<string, unknown>; status: ReturnType<typeof nodeStatusSchema.parse> };

/** A file's identity for change detection: undefined when the adapter gives no inode or times. */
export function identityOf(st: FileStat): string | undefined {
  if (st.ino === undefined || st.mtimeMs === undefined || st.ctimeMs === undefined) return undefined;
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

export interface NodeStatusFileOptions {
  /** The cluster dir, and the file's name in it. */
  readonly dir: string;
  readonly name: string;
  readonly fs: FileSystem;
  readonly watcher: ClusterDirWatcher;
  readonly maxFileBytes: number;
  /** Even while no change is signalled, the file is checked (one lstat) at least this often. */
  readonly checkIntervalMs: number;
  readonly now: () => number;
}

export class NodeStatusFile {
  readonly file: string;
  readonly #o: NodeStatusFileOptions;
  #cached: { identity: string; read: NodeStatusRead } | undefined;
  #lastCheckMs = Number.NEGATIVE_INFINITY;
  #writes: Promise<void> = Promise.resolve();

  constructor(options: NodeStatusFileOptions) {
    this.#o = options;
    this.file = posix.join(options.dir, options.name);
  }

  /** The file as it is now (or as last read, while nothing says it changed); rejects naming the problem. */
  async read(): Promise<NodeStatusRead> {
    const { watcher, fs } = this.#o;
    const file = this.file;
    watcher.startWatchingDir();
    const now = this.#o.now();
    const changed = watcher.takeStatusChange();
    if (watcher.watchingDir && !changed && this.#cached !== undefined && now - this.#lastCheckMs < this.#o.checkIntervalMs) {
      return this.#cached.read;
    }
    this.#lastCheckMs = now;
    let st: FileStat;
    try {
      st = await fs.lstat(file);
    } catch (err) {
      throw new Error(`cluster dir: cannot read the node status ${file}: ${errorMessage(err)}`, { cause: err });
    }
    if (st.type === 'symlink') {
      throw new Error(`cluster dir: the node status ${file} is a symlink; refusing to follow it (nodevol reads and writes only inside the cluster dir ${this.#o.dir})`);
    }
    const identity = identityOf(st);
    if (identity !== undefined && this.#cached?.identity === identity) return this.#cached.read;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(await fs.readFile(file, this.#o.maxFileBytes, { noFollow: true }));
    } catch (err) {
      throw new Error(`cluster dir: cannot read the node status ${file}: ${errorMessage(err)}`, { cause: err });
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new Error(`cluster dir: the node status ${file} is not valid JSON: ${errorMessage(err)}`, { cause: err });
    }
    if (!isRecord(raw)) throw new Error(`cluster dir: the node status ${file} must be a JSON object`);
    const parsed = nodeStatusSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue === undefined ? '' : ` field ${formatFieldPath(issue.path)}: ${issue.message}`;
      throw new Error(`cluster dir: the node status ${file} is invalid:${where}`);
    }
    const read = { raw, status: parsed.data };
    this.#cached = identity === undefined ? undefined : { identity, read };
    return read;
  }

  /** Replaces volumesInUse, keeping every other field; writes from this object are serialised. */
  setVolumesInUse(names: readonly string[]): Promise<void> {
    const list = [...names];
    const write = this.#writes.then(() => this.#writeVolumesInUse(list));
    this.#writes = write.catch(() => undefined);
    return write;
  }

  async #writeVolumesInUse(names: string[]): Promise<void> {
    this.#o.watcher.markStatusChanged(); // re-read (one lstat) before deciding: another writer may have changed it
    const { raw, status } = await this.read();
    // Unchanged: no write (an atomic write costs two fsyncs, every node status period).
    if (status.volumesInUse.length === names.length && status.volumesInUse.every((n, i) => n === names[i])) return;
    const file = this.file;
    const mode = (await this.#o.fs.lstat(file)).mode;
    const updated = { ...raw, volumesInUse: names };
    const data = new TextEncoder().encode(`${JSON.stringify(updated, null, 2)}\n`);
    try {
      // The temp file names this process: another nodevol may write the same cluster dir.
      await writeFileAtomic(this.#o.fs, file, data, { mode, writerId: String(process.pid) });
    } catch (err) {
      throw new Error(`cluster dir: cannot write the node status ${file}: ${errorMessage(err)}`, { cause: err });
    }
    this.#cached = undefined;
  }
}
