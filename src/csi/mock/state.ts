/**
 * The mock driver's persistent state: `<state-dir>/state.json`, what csi-driver-host-path keeps
 * in its state file. One record per volume the controller created: its backing storage kind and
 * size, where the node staged and published it, and which nodes it is attached to.
 *
 * The file is rewritten whole after every change, atomically and durably (temp file written with
 * fsync, rename over state.json, fsync of the directory), through the FileSystem port. Saves are
 * serialized; each one writes the state as it is when the save runs.
 */
import * as posix from 'node:path/posix';

import { z } from 'zod';

import { errorCode, errorMessage, writeFileAtomic, type FileSystem } from '../../host/fs.js';

export const STATE_FILE = 'state.json';
export const STATE_VERSION = 1;
/** Bound on what is read from state.json. */
export const MAX_STATE_BYTES = 16 * 1024 * 1024;

export type MockVolumeKind = 'mount' | 'block';

/** One volume as state.json holds it. */
export interface MockVolumeRecord {
  readonly id: string;
  readonly name: string;
  /** Bytes; also the size of the block backing file. */
  readonly capacity: number;
  readonly kind: MockVolumeKind;
  /** The staging path of the last successful NodeStageVolume not yet undone. */
  readonly stagedAt?: string;
  /** Target paths of successful NodePublishVolume calls not yet undone, sorted. */
  readonly publishedAt: readonly string[];
  /** Node ids of ControllerPublishVolume calls not yet undone, sorted. */
  readonly attachedNodes: readonly string[];
  /**
   * An inline ephemeral volume: created by NodePublishVolume (volume context
   * csi.storage.k8s.io/ephemeral=true), deleted by its last NodeUnpublishVolume.
   */
  readonly ephemeral?: true;
}

const volumeSchema = z
  .object({
    id: z.string().min(1),
    name: z.string().min(1),
    capacity: z.number().int().nonnegative(),
    kind: z.enum(['mount', 'block']),
    stagedAt: z.string().min(1).optional(),
    publishedAt: z.array(z.string().min(1)),
    attachedNodes: z.array(z.string().min(1)),
    ephemeral: z.literal(true).optional(),
  })
  .strict();

const stateSchema = z
  .object({
    version: z.literal(STATE_VERSION),
    volumes: z.array(volumeSchema),
  })
  .strict();

export class MockStateError extends Error {
  override readonly name = 'MockStateError';
}

/** The volumes in a state.json text; throws {@link MockStateError} when it is not one. */
export function parseState(text: string, file: string): MockVolumeRecord[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new MockStateError(`${file}: not JSON: ${errorMessage(err)}`);
  }
  const parsed = stateSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
    throw new MockStateError(`${file}: not a mock driver state file${where}: ${issue?.message ?? 'invalid'}`);
  }
  const seen = new Set<string>();
  for (const v of parsed.data.volumes) {
    if (seen.has(v.id)) throw new MockStateError(`${file}: volume ${v.id} appears twice`);
    seen.add(v.id);
  }
  return parsed.data.volumes.map(normalizeRecord);
}

/** state.json's text for these volumes (sorted by id, stable key order). */
export function renderState(volumes: Iterable<MockVolumeRecord>): string {
  const list = [...volumes].map(normalizeRecord).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return `${JSON.stringify({ version: STATE_VERSION, volumes: list }, null, 2)}\n`;
}

function normalizeRecord(v: MockVolumeRecord): MockVolumeRecord {
  const base = { id: v.id, name: v.name, capacity: v.capacity, kind: v.kind };
  const rest = {
    publishedAt: [...new Set(v.publishedAt)].sort(),
    attachedNodes: [...new Set(v.attachedNodes)].sort(),
    ...(v.ephemeral === true ? { ephemeral: true as const } : {}),
  };
  return v.stagedAt === undefined ? { ...base, ...rest } : { ...base, stagedAt: v.stagedAt, ...rest };
}

/** Loads and saves state.json in one directory. */
export class MockStateStore {
  readonly file: string;
  readonly #fs: FileSystem;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(fs: FileSystem, stateDir: string) {
    this.#fs = fs;
    this.file = posix.join(stateDir, STATE_FILE);
  }

  /** The saved volumes; [] when there is no state file yet. */
  async load(): Promise<MockVolumeRecord[]> {
    let bytes: Uint8Array;
    try {
      bytes = await this.#fs.readFile(this.file, MAX_STATE_BYTES);
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return [];
      throw new MockStateError(`cannot read ${this.file}: ${errorMessage(err)}`);
    }
    return parseState(new TextDecoder().decode(bytes), this.file);
  }

  /**
   * Writes what `snapshot()` returns when the write runs (after every earlier save). Resolves
   * when that state is durable.
   */
  save(snapshot: () => Iterable<MockVolumeRecord>): Promise<void> {
    const run = this.#chain.then(() => this.#write(renderState(snapshot())));
    this.#chain = run.catch(() => undefined);
    return run;
  }

  async #write(text: string): Promise<void> {
    await writeFileAtomic(this.#fs, this.file, new TextEncoder().encode(text), { mode: 0o600 });
  }
}
