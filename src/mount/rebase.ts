/**
 * Reading a mount table that names the kubelet root dir by another path than the one the files
 * are read from: a node's files copied elsewhere (a support bundle, the shipped example node), or
 * the host's root dir mounted at another path inside a container while the host's mountinfo is
 * read. The mount points under the table's root dir are moved under the root dir being read, so
 * that every look-up the audit makes matches. Nothing else changes: the `root` field is a path
 * inside the mounted filesystem, not in the mount namespace, and stays as it is.
 */
import { escapeMountPath, type MountInfoEntry, type ParsedMountInfo } from './mountInfo.js';

/**
 * The parsed table with every mount point at or below `fromRootDir` moved below `toRootDir`.
 * Both are absolute, clean paths; comparisons are made on the kernel's escaped text, as every
 * other mount-table comparison is.
 */
export function rebaseMountPoints(parsed: ParsedMountInfo, fromRootDir: string, toRootDir: string): ParsedMountInfo {
  const from = escapeMountPath(trimSlash(fromRootDir));
  const to = escapeMountPath(trimSlash(toRootDir));
  if (from === to) return parsed;
  const entries = parsed.entries.map((e): MountInfoEntry => {
    if (e.mountPoint === from) return { ...e, mountPoint: to };
    if (from === '/') return { ...e, mountPoint: to + e.mountPoint };
    if (e.mountPoint.startsWith(`${from}/`)) return { ...e, mountPoint: to + e.mountPoint.slice(from.length) };
    return e;
  });
  return { entries, problems: parsed.problems };
}

function trimSlash(p: string): string {
  return p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p;
}
