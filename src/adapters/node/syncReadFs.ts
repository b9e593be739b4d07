/**
 * A read-only FileSystem port over node:fs's synchronous calls, for `nodevol audit`.
 *
 * Why synchronous: the audit's walk is a long chain of small dependent reads (readdir, lstat,
 * open+fstat+read+close of a vol_data.json). Each asynchronous call is a round trip through
 * libuv's thread pool and a wake-up of the event loop; on a busy 2-core node that hand-off costs
 * more than the system call itself. The audit has nothing else to do while it reads, so blocking
 * the loop costs nothing, and the walk runs at the speed of the system calls (see docs/benchmarks.md).
 *
 * The same rules as {@link NodeFileSystem}, through the same helpers: non-blocking opens of
 * regular files only (a FIFO is refused by name, never waited on), reads stop at `maxBytes`
 * (EFBIG), O_NOFOLLOW when asked, names that are not UTF-8 carried through, errno codes kept. Every write method rejects with EROFS: the audit is read-only by
 * construction, and this adapter makes a write impossible rather than merely absent.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, realpathSync, statSync } from 'node:fs';
import type { DirEntry, FileStat, FileSystem } from '../../ports/fs.js';
import { FsError, overrideFileSystem } from '../../ports/fs.js';
import { assertReadable, decodeFsName, direntType, fsPath, toStat, tooLarge } from './nodeFs.js';

/** Runs a synchronous call and hands its result (or its error) back as a settled promise. */
function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

function readOnly(syscall: string, path: string): Promise<never> {
  return Promise.reject(new FsError('EROFS', path, syscall, `${syscall} ${path}: EROFS (the audit's file system is read-only)`));
}

export class SyncReadFileSystem implements FileSystem {
  readdir(path: string): Promise<DirEntry[]> {
    return settle(() => {
      const p = fsPath(path);
      // Names as strings (no Buffer per name). A name that is not UTF-8 reads as U+FFFD there:
      // then, and only then, the listing is read again as bytes to carry those bytes exactly.
      const entries = readdirSync(p, { withFileTypes: true });
      for (const e of entries) {
        if (e.name.includes('\uFFFD')) return readdirSync(p, { withFileTypes: true, encoding: 'buffer' }).map((b) => ({ name: decodeFsName(b.name), type: direntType(b) }));
      }
      return entries.map((e) => ({ name: e.name, type: direntType(e) }));
    });
  }

  lstat(path: string): Promise<FileStat> {
    return settle(() => toStat(lstatSync(fsPath(path))));
  }

  stat(path: string): Promise<FileStat> {
    return settle(() => toStat(statSync(fsPath(path))));
  }

  realpath(path: string): Promise<string> {
    // The native realpath(3), as NodeFileSystem's fs.promises.realpath: one call, where
    // realpathSync's JavaScript walk lstats every component (~15x slower).
    return settle(() => decodeFsName(realpathSync.native(fsPath(path), { encoding: 'buffer' })));
  }

  readlink(path: string): Promise<string> {
    return settle(() => decodeFsName(readlinkSync(fsPath(path), { encoding: 'buffer' })));
  }

  readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array> {
    return settle(() => readBoundedSync(path, maxBytes, options?.noFollow === true));
  }

  // The write methods take the port's parameters by rest: they look at the path only.
  mkdir(...[path]: Parameters<FileSystem['mkdir']>): Promise<void> {
    return readOnly('mkdir', path);
  }
  writeFile(...[path]: Parameters<FileSystem['writeFile']>): Promise<void> {
    return readOnly('open', path);
  }
  rename(...[from]: Parameters<FileSystem['rename']>): Promise<void> {
    return readOnly('rename', from);
  }
  fsyncDir(path: string): Promise<void> {
    return readOnly('fsync', path);
  }
  rmdir(path: string): Promise<void> {
    return readOnly('rmdir', path);
  }
  unlink(path: string): Promise<void> {
    return readOnly('unlink', path);
  }
  symlink(...[, path]: Parameters<FileSystem['symlink']>): Promise<void> {
    return readOnly('symlink', path);
  }
}

/** open (non-blocking; O_NOFOLLOW when asked) + fstat (a regular file only) + read of at most maxBytes + close. */
function readBoundedSync(path: string, maxBytes: number, noFollow: boolean): Uint8Array {
  const fd = openSync(fsPath(path), constants.O_RDONLY | constants.O_NONBLOCK | (noFollow ? constants.O_NOFOLLOW : 0));
  try {
    const st = fstatSync(fd);
    assertReadable(path, st, maxBytes);
    if (st.size > 0) {
      // A regular file: one read of its size (+1 to notice growth); a short read is its end.
      const buf = Buffer.allocUnsafe(st.size + 1);
      const n = readSync(fd, buf, 0, buf.length, 0);
      if (n <= st.size) return buf.subarray(0, n);
    }
    // /proc files report size 0, and a file that grew: read in chunks up to the bound.
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total));
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > maxBytes) throw tooLarge(path, maxBytes, total);
    }
    return Buffer.concat(chunks, total);
  } finally {
    closeSync(fd);
  }
}

/**
 * `fs` whose `lstat`, and `stat` of anything but a symlink, are synchronous system calls;
 * everything else is `fs`'s own.
 *
 * For the agent's cluster dir: its safety-net pass stats every manifest (1,000 on a full node)
 * every 20 s. Through the thread pool each stat costs a hand-off and a wake-up of the event loop,
 * about ten times the system call itself; that pass was the largest part of an idle agent's CPU
 * (docs/benchmarks.md). An entry of a local directory is answered at once, so blocking the loop for it
 * costs less than the hand-off. A symlink's target may sit anywhere, a hung NFS or FUSE mount
 * included: it is stat'ed through the thread pool, where a hang holds one thread, not the agent.
 * Never for volume paths, for the same reason.
 */
export function withSyncStat(fs: FileSystem): FileSystem {
  const sync = new SyncReadFileSystem();
  return overrideFileSystem(fs, {
    lstat: (p) => sync.lstat(p),
    // For anything but a symlink, stat and lstat give the same answer.
    stat: (p) => sync.lstat(p).then((st) => (st.type === 'symlink' ? fs.stat(p) : st)),
  });
}
