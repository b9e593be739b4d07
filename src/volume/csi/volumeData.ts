/**
 * `vol_data.json`: the small JSON object kubelet's CSI plugin keeps beside a pod volume's mount
 * dir, beside a global (staging) mount dir and in a raw block volume's data dir (csi_util.go saveVolumeData /
 * loadVolumeData).
 *
 * The writer produces exactly the bytes kubelet writes (a Go streaming JSON encoder over a
 * string-to-string map, Go >= 1.22); the reader accepts exactly what kubelet's reader accepts (a
 * Go streaming JSON decoder reading ONE value into a string-to-string map), including its odd
 * corners: trailing bytes after the first value are ignored and a bare `null` is an empty map.
 *
 * This module is the file access (root-confined loading, atomic saving); the bytes are made by
 * volumeDataEncoder.ts and read by volumeDataDecoder.ts. All file access goes through the
 * FileSystem port.
 */
import { posix } from 'node:path';
import { atomicTempPath, errorCode, errorMessage, isNotExist, writeFileAtomic, type FileSystem } from '../../ports/fs.js';
import { isInsideDir } from '../../layout/confinement.js';
import { decodeVolumeData } from './volumeDataDecoder.js';
import { encodeVolumeData } from './volumeDataEncoder.js';
import { VolumeDataError, type VolumeData } from './volumeDataError.js';

export { decodeVolumeData, decodeVolumeDataGo } from './volumeDataDecoder.js';
export { encodeVolumeData } from './volumeDataEncoder.js';
export { isVolumeDataNotFound, VolumeDataError, type VolumeData, type VolumeDataErrorKind } from './volumeDataError.js';

export const VOL_DATA_FILE_NAME = 'vol_data.json';
/** Largest vol_data.json we read. kubelet's files are a few hundred bytes. */
export const MAX_VOL_DATA_BYTES = 64 * 1024;

/** kubelet's volDataKey names */
export const volDataKey = {
  specVolID: 'specVolID',
  volHandle: 'volumeHandle',
  driverName: 'driverName',
  nodeName: 'nodeName',
  attachmentID: 'attachmentID',
  volumeLifecycleMode: 'volumeLifecycleMode',
  seLinuxMountContext: 'seLinuxMountContext',
} as const;

function realpathFailure(target: string, what: string, err: unknown): VolumeDataError {
  const code = errorCode(err);
  if (code === 'ELOOP') {
    return new VolumeDataError('io', target,
      `failed to resolve ${what} ${target}: too many levels of symbolic links (ELOOP)`, { cause: err });
  }
  return new VolumeDataError('io', target,
    `failed to resolve ${what} ${target}: ${code ?? errorMessage(err)}`, { cause: err });
}

export interface LoadVolumeDataOptions {
  /**
   * Refuse to read anything that resolves outside this directory: the file's real path (every
   * symlink resolved) must be inside the real path of `rootDir`.
   */
  readonly rootDir?: string;
  /**
   * The caller checked that the directory holding the file resolves inside the root dir (see
   * {@link resolvesInsideRoot}; once for a whole walk that follows no symlink below it). Then
   * only the file itself can be a symlink: it is opened with O_NOFOLLOW and resolved only when it
   * is one, which spares two realpath calls per file on the common path.
   */
  readonly parentsVerified?: boolean;
  /** `rootDir` is already a real path (every symlink resolved): spares a realpath per read. */
  readonly rootDirIsReal?: boolean;
}

/**
 * Reads a vol_data.json through the FileSystem port (at most MAX_VOL_DATA_BYTES; EFBIG ->
 * 'too-large', ENOENT -> 'not-found', other -> 'io' with the errno) and decodes it. With
 * `rootDir`, a path resolving outside the root is refused with kind 'outside-root' and a
 * symlink loop gives 'io' naming ELOOP.
 */
export async function loadVolumeData(fs: FileSystem, path: string, options?: LoadVolumeDataOptions): Promise<VolumeData> {
  const rootDir = options?.rootDir;
  if (rootDir !== undefined && options?.parentsVerified === true) {
    try {
      return decodeVolumeData(await readBounded(fs, path, path, true), path);
    } catch (err) {
      // ELOOP under O_NOFOLLOW: the file itself is a symlink; resolve and check it below.
      if (errorCode(err) !== 'ELOOP') throw err;
    }
  }
  let readPath = path;
  if (rootDir !== undefined) {
    let realRoot: string;
    try {
      realRoot = options?.rootDirIsReal === true ? rootDir : await fs.realpath(rootDir);
    } catch (err) {
      throw realpathFailure(rootDir, 'root dir', err);
    }
    let real: string;
    try {
      real = await fs.realpath(path);
    } catch (err) {
      if (isNotExist(err)) {
        throw new VolumeDataError('not-found', path,
          `failed to open volume data file ${path}: ENOENT (no such file or directory)`, { cause: err });
      }
      throw realpathFailure(path, 'volume data file', err);
    }
    if (!isInsideDir(real, realRoot)) {
      throw new VolumeDataError('outside-root', path,
        `refusing to read ${path}: it resolves to ${real}, outside the root dir ${realRoot}`);
    }
    // Read what was checked, not a path that could resolve differently.
    readPath = real;
  }
  return decodeVolumeData(await readBounded(fs, readPath, path, false), path);
}

async function readBounded(fs: FileSystem, readPath: string, path: string, noFollow: boolean): Promise<Uint8Array> {
  try {
    return await fs.readFile(readPath, MAX_VOL_DATA_BYTES, { noFollow });
  } catch (err) {
    if (noFollow && errorCode(err) === 'ELOOP') throw err;
    const code = errorCode(err);
    if (code === 'EFBIG') {
      throw new VolumeDataError('too-large', path,
        `refusing to read volume data file ${path}: it is larger than the limit of ${MAX_VOL_DATA_BYTES} bytes`, { cause: err });
    }
    if (code === 'ENOENT') {
      throw new VolumeDataError('not-found', path,
        `failed to open volume data file ${path}: ENOENT (no such file or directory)`, { cause: err });
    }
    // A FIFO, socket or device (refused unread) or a read that timed out: the port's words say which.
    const detail = code === undefined || code === 'EFTYPE' || code === 'ETIMEDOUT' ? errorMessage(err) : code;
    throw new VolumeDataError('io', path,
      `failed to read volume data file ${path}: ${detail}`, { cause: err });
  }
}

/**
 * Atomic and durable write (same bytes as kubelet, safer than its truncate-in-place): the bytes
 * of {@link encodeVolumeData} go to `<dir>/vol_data.json.tmp` (mode 0644, fsync), are renamed onto
 * `<dir>/vol_data.json`, and `dir` is fsynced: {@link writeFileAtomic}. `dir` must exist
 * (kubelet's caller creates it).
 */
export async function saveVolumeData(fs: FileSystem, dir: string, data: VolumeData): Promise<void> {
  await writeFileAtomic(fs, posix.join(dir, VOL_DATA_FILE_NAME), encodeVolumeData(data), { mode: 0o644 });
}

/** `vol_data.json.tmp`: the temp file of {@link saveVolumeData}'s atomic write (kubelet never has one). */
export const VOL_DATA_TEMP_FILE_NAME = posix.basename(atomicTempPath(VOL_DATA_FILE_NAME));

/** A directory holding nodevol's temp file of an interrupted vol_data.json write and no vol_data.json. */
export interface InterruptedVolumeDataWrite {
  /** `<dir>/vol_data.json.tmp`. */
  readonly tempPath: string;
  /**
   * What it holds when it is a complete write: bytes that are exactly the encoding of what they
   * decode to (the writer fsyncs before its rename; a write cut short is a prefix, which never
   * is). Undefined for a partial or unreadable temp file.
   */
  readonly data: VolumeData | undefined;
}

/**
 * Whether `dir` holds our atomic write cut short between its temp file and its rename: no
 * `vol_data.json`, and `vol_data.json.tmp` a regular file (never a symlink: read with
 * O_NOFOLLOW, bounded). Undefined for anything else (a vol_data.json there, no temp file, a temp
 * name that is not a regular file, an unreadable directory).
 */
export async function findInterruptedVolumeDataWrite(fs: FileSystem, dir: string): Promise<InterruptedVolumeDataWrite | undefined> {
  const file = posix.join(dir, VOL_DATA_FILE_NAME);
  const tempPath = posix.join(dir, VOL_DATA_TEMP_FILE_NAME);
  try {
    await fs.lstat(file);
    return undefined;
  } catch (err) {
    if (!isNotExist(err)) return undefined;
  }
  try {
    if ((await fs.lstat(tempPath)).type !== 'file') return undefined;
  } catch {
    return undefined;
  }
  let data: VolumeData | undefined;
  try {
    const bytes = await fs.readFile(tempPath, MAX_VOL_DATA_BYTES, { noFollow: true });
    const decoded = decodeVolumeData(bytes, tempPath);
    data = sameBytes(encodeVolumeData(decoded), bytes) ? decoded : undefined;
  } catch {
    data = undefined;
  }
  return { tempPath, data };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
