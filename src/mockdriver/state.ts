/**
 * The mock driver's persistent state, what csi-driver-host-path keeps in its state file: one
 * record per volume the controller created (or an ephemeral publish made): its backing storage
 * kind and size, where the node staged and published it, which nodes it is attached to.
 *
 * Layout: one small file per volume, `<state-dir>/state/<volume-id>.json`
 * (`{"version":1,"volume":{…}}`), so that a call costs the same whatever the number of volumes:
 * a change rewrites only its own volume's file, atomically and durably ({@link writeDurable}:
 * temp file written with fsync, rename, fsync of the directory), and the driver answers only
 * once that is done. A deleted volume's file is unlinked, then the directory fsynced. Writes of
 * one volume are serialized; writes of different volumes run concurrently.
 *
 * Earlier versions kept every volume in one `<state-dir>/state.json` (`{"version":1,"volumes":[…]}`);
 * {@link MockStateStore.load} migrates such a file into per-volume files (durably), then removes it.
 */
import * as posix from 'node:path/posix';

import { z } from 'zod';

import { errorCode, errorMessage, pathExists, writeFileAtomic, type FileSystem } from '../ports/fs.js';

/** The directory of per-volume records, under the state dir. */
export const STATE_DIR_NAME = 'state';
/** The single-file state of earlier versions, migrated at start. */
export const LEGACY_STATE_FILE = 'state.json';
export const STATE_VERSION = 1;
/** Bound on what is read from one volume's record. */
export const MAX_RECORD_BYTES = 256 * 1024;
/** Bound on what is read from a legacy state.json. */
export const MAX_STATE_BYTES = 16 * 1024 * 1024;
/** Bound on the number of records loaded at start. */
export const MAX_RECORDS = 100_000;

export type MockVolumeKind = 'mount' | 'block';

/** One volume as its record holds it. */
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

const recordSchema = z.object({ version: z.literal(STATE_VERSION), volume: volumeSchema }).strict();
const legacySchema = z.object({ version: z.literal(STATE_VERSION), volumes: z.array(volumeSchema) }).strict();

export class MockStateError extends Error {
  override readonly name = 'MockStateError';
}

function parseJson<T>(text: string, file: string, schema: z.ZodType<T>, what: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new MockStateError(`${file}: not JSON: ${errorMessage(err)}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
    throw new MockStateError(`${file}: not ${what}${where}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

/** The volume in one record file's text; throws {@link MockStateError} when it is not one. */
export function parseVolumeRecord(text: string, file: string): MockVolumeRecord {
  return normalizeRecord(parseJson(text, file, recordSchema, 'a mock driver volume record').volume);
}

/** One record file's text (stable key order, sorted lists). */
export function renderVolumeRecord(volume: MockVolumeRecord): string {
  return `${JSON.stringify({ version: STATE_VERSION, volume: normalizeRecord(volume) }, null, 2)}\n`;
}

/** The volumes in a legacy state.json text; throws {@link MockStateError} when it is not one. */
export function parseState(text: string, file: string): MockVolumeRecord[] {
  const data = parseJson(text, file, legacySchema, 'a mock driver state file');
  const seen = new Set<string>();
  for (const v of data.volumes) {
    if (seen.has(v.id)) throw new MockStateError(`${file}: volume ${v.id} appears twice`);
    seen.add(v.id);
  }
  return data.volumes.map(normalizeRecord);
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

function byId(a: MockVolumeRecord, b: MockVolumeRecord): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * Replaces `file` with `data` atomically and durably: `<file>.tmp` written and fsynced, renamed
 * over `file`, the directory fsynced. The one durable-write step of the mock driver's state.
 */
export function writeDurable(fs: FileSystem, file: string, data: Uint8Array): Promise<void> {
  return writeFileAtomic(fs, file, data, { mode: 0o600 });
}

/** The file holding one volume's record. */
export function volumeRecordPath(stateDir: string, volumeId: string): string {
  return posix.join(stateDir, STATE_DIR_NAME, `${volumeId}.json`);
}

/**
 * Every volume record under `stateDir`, sorted by id, without changing anything on disk (a
 * legacy state.json, if still there, is read too; per-volume records win). For tests and e2e
 * helpers reading a driver's state.
 */
export async function readMockState(fs: FileSystem, stateDir: string): Promise<MockVolumeRecord[]> {
  const records = new Map<string, MockVolumeRecord>();
  for (const r of await readLegacy(fs, stateDir)) records.set(r.id, r);
  for (const r of await readRecords(fs, stateDir)) records.set(r.id, r);
  return [...records.values()].sort(byId);
}

async function readLegacy(fs: FileSystem, stateDir: string): Promise<MockVolumeRecord[]> {
  const file = posix.join(stateDir, LEGACY_STATE_FILE);
  let bytes: Uint8Array;
  try {
    bytes = await fs.readFile(file, MAX_STATE_BYTES);
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return [];
    throw new MockStateError(`cannot read ${file}: ${errorMessage(err)}`);
  }
  return parseState(new TextDecoder().decode(bytes), file);
}

async function readRecords(fs: FileSystem, stateDir: string): Promise<MockVolumeRecord[]> {
  const dir = posix.join(stateDir, STATE_DIR_NAME);
  let names: string[];
  try {
    names = (await fs.readdir(dir)).filter((e) => e.type === 'file' && e.name.endsWith('.json')).map((e) => e.name);
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return [];
    throw new MockStateError(`cannot list ${dir}: ${errorMessage(err)}`);
  }
  if (names.length > MAX_RECORDS) throw new MockStateError(`${dir} holds ${names.length} records, more than ${MAX_RECORDS}`);
  const out: MockVolumeRecord[] = [];
  for (const name of names.sort()) {
    const file = posix.join(dir, name);
    let bytes: Uint8Array;
    try {
      bytes = await fs.readFile(file, MAX_RECORD_BYTES);
    } catch (err) {
      throw new MockStateError(`cannot read ${file}: ${errorMessage(err)}`);
    }
    const record = parseVolumeRecord(new TextDecoder().decode(bytes), file);
    if (`${record.id}.json` !== name) throw new MockStateError(`${file}: holds volume ${record.id}, not ${name.slice(0, -'.json'.length)}`);
    out.push(record);
  }
  return out;
}

/** Loads and saves the per-volume records of one state dir. */
export class MockStateStore {
  /** `<state-dir>/state`. */
  readonly dir: string;
  readonly #fs: FileSystem;
  readonly #stateDir: string;
  /** Per volume: the last write queued (writes of one volume run in order). */
  readonly #chains = new Map<string, Promise<void>>();

  constructor(fs: FileSystem, stateDir: string) {
    this.#fs = fs;
    this.#stateDir = stateDir;
    this.dir = posix.join(stateDir, STATE_DIR_NAME);
  }

  /**
   * The saved volumes, sorted by id; [] for a fresh state dir. A legacy state.json is migrated
   * first: each of its volumes written to its own record (durably), then state.json removed.
   */
  async load(): Promise<MockVolumeRecord[]> {
    await this.#fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const legacy = await readLegacy(this.#fs, this.#stateDir);
    if (legacy.length > 0 || (await this.#exists(posix.join(this.#stateDir, LEGACY_STATE_FILE)))) {
      for (const r of legacy) await writeDurable(this.#fs, volumeRecordPath(this.#stateDir, r.id), new TextEncoder().encode(renderVolumeRecord(r)));
      await this.#fs.unlink(posix.join(this.#stateDir, LEGACY_STATE_FILE));
      await this.#fs.fsyncDir(this.#stateDir);
    }
    return (await readRecords(this.#fs, this.#stateDir)).sort(byId);
  }

  /**
   * Writes one volume's record as `record()` returns it when the write runs (after every
   * earlier write of that volume); undefined removes the record. Resolves once it is durable.
   */
  save(volumeId: string, record: () => MockVolumeRecord | undefined): Promise<void> {
    const previous = this.#chains.get(volumeId) ?? Promise.resolve();
    const run = previous.then(() => this.#write(volumeId, record()));
    const settled = run.catch(() => undefined);
    this.#chains.set(volumeId, settled);
    void settled.then(() => {
      if (this.#chains.get(volumeId) === settled) this.#chains.delete(volumeId);
    });
    return run;
  }

  async #write(volumeId: string, record: MockVolumeRecord | undefined): Promise<void> {
    const file = volumeRecordPath(this.#stateDir, volumeId);
    if (record !== undefined) {
      await writeDurable(this.#fs, file, new TextEncoder().encode(renderVolumeRecord(record)));
      return;
    }
    try {
      await this.#fs.unlink(file);
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return;
      throw err;
    }
    await this.#fs.fsyncDir(this.dir);
  }

  #exists(p: string): Promise<boolean> {
    return pathExists(this.#fs, p);
  }
}
