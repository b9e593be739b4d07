/**
 * Test harness: the in-memory node's root dir made full (ENOSPC) or read-only (EROFS), or healthy
 * again, for kubelet and the driver alike: the refused calls under the root dir reject with the
 * errno, as the real filesystem would.
 */
import { FsError, type FileSystem } from '../../src/ports/fs.js';
import { ROOT, type InMemoryNode } from './inMemoryNode.js';

export type Fault = 'ENOSPC' | 'EROFS';

export type RefusedCalls = Readonly<Record<Fault, readonly (keyof FileSystem)[]>>;

/** What each fault refuses under the root dir: a full disk refuses what needs a new block or inode; a read-only one every change. */
export const REFUSED: RefusedCalls = {
  ENOSPC: ['writeFile', 'mkdir', 'symlink'],
  EROFS: ['writeFile', 'mkdir', 'symlink', 'rename', 'unlink', 'rmdir'],
};

/**
 * Wraps the node's file system; the returned function sets the fault in force (undefined: none).
 * `refused` says which calls each fault refuses (default {@link REFUSED}).
 */
export function rootDirFault(node: InMemoryNode, refused: RefusedCalls = REFUSED): (fault: Fault | undefined) => void {
  let current: Fault | undefined;
  const fs = node.fs as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const method of new Set([...refused.ENOSPC, ...refused.EROFS])) {
    const inner = fs[method]!.bind(node.fs);
    fs[method] = async (...args: unknown[]): Promise<unknown> => {
      const p = String(args[method === 'symlink' ? 1 : 0]);
      if (current !== undefined && refused[current].includes(method) && p.startsWith(`${ROOT}/`)) {
        // mkdir of a directory that exists changes nothing (EEXIST comes before EROFS; mkdir -p
        // does not even ask).
        const exists = method === 'mkdir' && (await node.exists(p));
        if (!exists) throw new FsError(current, p, method);
      }
      return inner(...args);
    };
  }
  return (fault) => {
    current = fault;
  };
}
