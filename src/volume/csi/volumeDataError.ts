/**
 * What a vol_data.json decodes to, and the typed error every reader and writer of one throws.
 * Shared by the decoder (volumeDataDecoder.ts) and the file access (volumeData.ts).
 */
import { isNotExist } from '../../ports/fs.js';

/**
 * The decoded content of a vol_data.json. Decoded records are frozen plain objects whose keys are
 * own data properties (a `__proto__` key is an ordinary own key); test presence with Object.hasOwn.
 */
export type VolumeData = Readonly<Record<string, string>>;

export type VolumeDataErrorKind = 'not-found' | 'too-large' | 'empty' | 'syntax' | 'type' | 'io' | 'outside-root';

/** Why a vol_data.json could not be read (or written). */
export class VolumeDataError extends Error {
  override readonly name = 'VolumeDataError';
  /** The path the error concerns (as given by the caller). */
  readonly path: string;
  /** The JSON member the error concerns, for a 'type' error on a member value. */
  readonly field?: string;
  readonly kind: VolumeDataErrorKind;

  constructor(kind: VolumeDataErrorKind, path: string, message: string, options?: { field?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.path = path;
    if (options?.field !== undefined) this.field = options.field;
  }
}

/** Whether `err` says that the vol_data.json (or, for a raw port error, the path) does not exist. */
export function isVolumeDataNotFound(err: unknown): boolean {
  if (err instanceof VolumeDataError) return err.kind === 'not-found';
  return isNotExist(err);
}
