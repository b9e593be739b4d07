/**
 * Reading the mount table text (mount-utils ConsistentRead, as ParseMountInfo and
 * GetReliableMountRefs read it).
 *
 * Kernels before 5.8 can return a torn /proc/self/mountinfo when the file is larger than one
 * read and mounts change meanwhile; kubelet then reads it "consistently": re-reading until two
 * consecutive reads are identical. On newer kernels one read is enough.
 */

import type { MountInfoSource } from '../ports/mounter.js';

// The source type belongs to the Mounter port (src/ports/mounter.ts); re-exported for the readers.
export type { MountInfoSource };

/** kubelet's maxListTries: how many re-reads a consistent read may take. */
export const MAX_LIST_TRIES = 10;

/** Two consecutive reads never agreed (kubernetes/utils InconsistentReadError). */
export class InconsistentReadError extends Error {
  override readonly name = 'InconsistentReadError';
  constructor(
    readonly fileName: string,
    readonly attempts: number,
  ) {
    super(`could not get consistent content of ${fileName} after ${attempts} attempts`);
  }
}

/** strconv.Atoi with the error ignored (0 on failure), as the kernel version check does. */
function atoiOrZero(s: string | undefined): number {
  if (s === undefined || !/^[+-]?[0-9]+$/.test(s)) return 0;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : 0;
}

/**
 * Whether mountinfo must be read consistently: true iff the kernel may have the torn-read bug
 * (fixed in Linux 5.8). `undefined` means "no live kernel behind the source" and gives false.
 *
 * A release string is judged the way mount-utils does: it must split on "." into at least three
 * parts, major and minor are read as integers (0 when not numeric), and anything that does not
 * prove >= 5.8 is treated as an old kernel (true) — e.g. "6.1" or "v6.1.0" give true.
 */
export function needsConsistentRead(kernelRelease: string | undefined): boolean {
  if (kernelRelease === undefined) return false;
  const parts = kernelRelease.split('.');
  if (parts.length < 3) return true;
  const major = atoiOrZero(parts[0]);
  const minor = atoiOrZero(parts[1]);
  const fixed = major > 5 || (major === 5 && minor >= 8);
  return !fixed;
}

/**
 * Reads the mountinfo text, consistently when {@link needsConsistentRead} says so: one initial
 * read, then up to `maxAttempts` re-reads, each compared with the one before; the first
 * identical pair wins. If none agree, rejects with {@link InconsistentReadError} (so at most
 * maxAttempts + 1 reads, as kubernetes/utils ConsistentRead). Read errors propagate at once.
 */
export async function readMountInfoText(source: MountInfoSource, maxAttempts = MAX_LIST_TRIES): Promise<string> {
  if (!needsConsistentRead(source.kernelRelease)) return source.read();
  let previous = await source.read();
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const current = await source.read();
    if (current === previous) return current;
    previous = current;
  }
  throw new InconsistentReadError(source.name, maxAttempts);
}
