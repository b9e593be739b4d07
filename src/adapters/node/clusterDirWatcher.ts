/**
 * The cluster dir's watches (inotify through fs.watch): manifests/, the cluster dir itself (for
 * node-status.json and manifests/ being replaced) and the target of each symlinked manifest (an
 * edit of a target is no event in manifests/). A watch that fails closes, marks what it covered
 * as changed and is not replaced until the next pass starts it again; with no watch at all
 * (watching off, no inotify), everything reads as changed at every pass.
 */
import { watch, type FSWatcher } from 'node:fs';
import * as posix from 'node:path/posix';

import { errorMessage } from '../../ports/fs.js';
import type { Logger } from '../../ports/logger.js';

/** Symlinked manifests whose target is watched too (each takes an inotify watch). */
export const MAX_WATCHED_SYMLINKS = 1_000;

export interface ClusterDirWatcherOptions {
  /** The cluster dir. */
  readonly dir: string;
  /** Its manifests/ subdirectory, and that directory's name inside the cluster dir. */
  readonly manifestsDir: string;
  readonly manifestsDirName: string;
  readonly logger: Logger;
  /** Off: nothing is watched and every pass reads everything. */
  readonly enabled: boolean;
}

export class ClusterDirWatcher {
  readonly #o: ClusterDirWatcherOptions;
  #manifests: FSWatcher | undefined;
  #dir: FSWatcher | undefined;
  /** The watches of symlinked manifests' targets, by file name. */
  readonly #links = new Map<string, FSWatcher>();
  /** Whether every symlinked manifest listed by the last pass has its target watched. */
  #allLinksWatched = true;
  readonly #listeners: (() => void)[] = [];
  /** Something in manifests/ may have changed since the latest pass began. */
  #manifestsChanged = true;
  /** node-status.json may have changed since it was last checked. */
  #statusChanged = true;

  constructor(options: ClusterDirWatcherOptions) {
    this.#o = options;
  }

  /** Whether manifests/ is watched (its changes are signalled). */
  get watchingManifests(): boolean {
    return this.#manifests !== undefined;
  }

  /** Whether the cluster dir is watched (node-status.json's changes are signalled). */
  get watchingDir(): boolean {
    return this.#dir !== undefined;
  }

  /** Whether manifests/ may have changed since the last call; clears the mark. */
  takeManifestsChange(): boolean {
    const changed = this.#manifestsChanged;
    this.#manifestsChanged = false;
    return changed;
  }

  /** Whether node-status.json may have changed since the last call; clears the mark. */
  takeStatusChange(): boolean {
    const changed = this.#statusChanged;
    this.#statusChanged = false;
    return changed;
  }

  /** Marks node-status.json as changed (a write of ours: read it again before trusting it). */
  markStatusChanged(): void {
    this.#statusChanged = true;
  }

  /** Calls `listener` on every event of the watches: a source may have changed. */
  onChange(listener: () => void): void {
    this.#listeners.push(listener);
  }

  /**
   * Whether every change is signalled right now: manifests/, the cluster dir and every symlinked
   * manifest's target are watched. False before the first pass starts them.
   */
  signalsEveryChange(): boolean {
    return this.#manifests !== undefined && this.#dir !== undefined && this.#allLinksWatched;
  }

  /** Stops every watch. */
  close(): void {
    this.#manifests?.close();
    this.#manifests = undefined;
    this.#dir?.close();
    this.#dir = undefined;
    for (const w of this.#links.values()) w.close();
    this.#links.clear();
  }

  /** Starts watching manifests/ before a pass lists it, so no change between them is missed. */
  startWatchingManifests(): void {
    if (!this.#o.enabled || this.#manifests !== undefined) return;
    try {
      const w = watch(this.#o.manifestsDir, { persistent: false }, (_event, file) => {
        this.#manifestsChanged = true;
        this.#unwatchRetargeted(file);
        this.#changed();
      });
      w.on('error', (err: unknown) => {
        this.#o.logger.v(2).info('Stopped watching the manifests; every pass reads them', { dir: this.#o.manifestsDir, err: errorMessage(err) });
        w.close();
        if (this.#manifests === w) this.#manifests = undefined;
        this.#manifestsChanged = true;
        this.#changed();
      });
      this.#manifests = w;
    } catch {
      this.#manifests = undefined; // no such directory yet, or no inotify: full passes
    }
  }

  /** Starts watching the cluster dir itself, for node-status.json. */
  startWatchingDir(): void {
    if (!this.#o.enabled || this.#dir !== undefined) return;
    this.#dir = this.#watchPath(
      this.#o.dir,
      (file) => {
        this.#statusChanged = true;
        if (file === null || file === this.#o.manifestsDirName) this.#manifestsChanged = true; // manifests/ itself replaced
      },
      () => {
        this.#dir = undefined;
      },
    );
  }

  /** Watches the targets of the symlinked manifests listed (`links`: their names in manifests/). */
  watchLinks(links: readonly string[]): void {
    if (!this.#o.enabled) return;
    const wanted = new Set(links.slice(0, MAX_WATCHED_SYMLINKS));
    let all = links.length <= MAX_WATCHED_SYMLINKS;
    for (const [name, w] of this.#links) {
      if (wanted.has(name)) continue;
      w.close();
      this.#links.delete(name);
    }
    for (const name of wanted) {
      if (this.#links.has(name)) continue;
      const w = this.#watchPath(
        posix.join(this.#o.manifestsDir, name),
        () => {
          this.#manifestsChanged = true;
        },
        () => {
          if (this.#links.get(name) === w) this.#links.delete(name);
          this.#allLinksWatched = false; // until the next full pass watches it again
        },
      );
      if (w !== undefined) this.#links.set(name, w);
      else all = false;
    }
    this.#allLinksWatched = all;
  }

  /**
   * A watch that calls `onEvent` on any event; on an error it closes, calls `onEvent` and
   * `onClosed`. Undefined when the path cannot be watched (missing, no inotify).
   */
  #watchPath(path: string, onEvent: (file: string | null) => void, onClosed: () => void): FSWatcher | undefined {
    try {
      const w = watch(path, { persistent: false }, (_event, file) => {
        onEvent(file);
        this.#changed();
      });
      w.on('error', (err: unknown) => {
        this.#o.logger.v(2).info('Stopped watching a cluster dir path; reading it at every pass', { path, err: errorMessage(err) });
        w.close();
        onEvent(null);
        onClosed();
        this.#changed();
      });
      return w;
    } catch {
      return undefined;
    }
  }

  /**
   * An entry of manifests/ changed: a symlink replaced (`ln -sfn`) now points elsewhere, and its
   * watch still follows the old target. Its watch is dropped, or every link's when the entry is
   * a hidden one such as a ConfigMap's `..data` (every link may resolve through it); the next
   * full pass watches the current targets.
   */
  #unwatchRetargeted(file: string | null): void {
    const names = file === null || file.startsWith('.') ? [...this.#links.keys()] : this.#links.has(file) ? [file] : [];
    for (const name of names) {
      this.#links.get(name)?.close();
      this.#links.delete(name);
      this.#allLinksWatched = false;
    }
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}
