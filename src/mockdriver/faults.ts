/**
 * The mock driver's faults file (`--faults FILE`, YAML or JSON): `faults: [rule, ...]`, each rule
 * a rule of the one CSI fault model (src/csi/faults.ts), the same the simulator's scenarios use:
 *
 *   faults:
 *     - method: NodeUnstageVolume   # any csi.v1 RPC the mock serves
 *       volumeId: mock-0123abcd…     # optional: only calls for this volume
 *       delay: 2s                    # optional: hold the call this long first
 *       code: UNAVAILABLE            # optional: fail with this gRPC code (name or 1..16)
 *       afterEffect: true            # optional, with code: do the real work, then fail
 *       times: 2                     # optional: apply to this many matching calls (default: all)
 *       hang: true                   # optional: never answer (until the driver stops)
 *       hang: forever                # optional: the same here (the simulator keeps it over
 *                                    #   restarts and clearFaults; here a rule lasts while the file has it)
 *       exit: true                   # optional: the process exits with code 3 when the call arrives
 *       clientTimeout: 500ms         # optional: answer DEADLINE_EXCEEDED after this long while the
 *                                    #   call carries on at the driver; the volume stays busy
 *                                    #   (ABORTED) until the work is done
 *
 * The file is re-read whenever its inode, size, mtime or ctime changed since the last read
 * (checked on every call). A re-read replaces the rules; a rule that was already in the file (the
 * same rule at the same place among its equals) keeps its `times` counter, so that appending a
 * rule never re-arms the ones before it. A file that cannot be parsed or fails validation is
 * logged and ignored: the previous rules (and their counters) stay. A missing file means no
 * rules; an empty one too.
 *
 * The counters also outlive the process: they are kept in `<state-dir>/fault-counters.json`
 * (written after a rule applied, before its call goes on), and a driver that starts again takes
 * them back for the rules its faults file still holds. A rule used up stays used up across a
 * crash, an exit fault or a node reboot, as it does in the simulator.
 */
import { promises as fsp } from 'node:fs';

import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { errorCode, errorMessage, writeFileAtomic, type FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { CSI_FAULT_METHODS, CsiFaultBook, csiFaultsFileSchema, describeCsiFault, issuePath, type CsiFault, type CsiFaultMethod } from '../csi/faults.js';

/** Every RPC the mock driver serves (what a rule's `method` may name). */
export const MOCK_RPC_METHODS = CSI_FAULT_METHODS;

export type MockRpcMethod = CsiFaultMethod;

/** Bound on what is read from a faults file. */
export const MAX_FAULTS_FILE_BYTES = 1024 * 1024;

export class MockFaultsError extends Error {
  override readonly name = 'MockFaultsError';
}

/** The rules in a faults file's text (YAML, hence JSON too); throws {@link MockFaultsError} naming the field. */
export function parseFaults(text: string, file = 'faults'): CsiFault[] {
  let raw: unknown;
  try {
    raw = parseYaml(text, { logLevel: 'error' });
  } catch (err) {
    throw new MockFaultsError(`${file}: not YAML or JSON: ${errorMessage(err)}`);
  }
  if (raw === null || raw === undefined) return [];
  const parsed = csiFaultsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issuePath(issue.path)}`;
    throw new MockFaultsError(`${file}: invalid faults file${where}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data.faults;
}

/** The rules of one faults file, re-read when it changes. */
/** The counters file's schema: each rule's written form and how many calls it still applies to (null: every one). */
const countersSchema = z.object({ version: z.literal(1), counters: z.array(z.object({ rule: z.string(), remaining: z.number().int().min(0).nullable() }).strict()) }).strict();

/** Bound on what is read from the counters file. */
const MAX_COUNTERS_FILE_BYTES = 4 * 1024 * 1024;

export class MockFaultBook {
  readonly file: string | undefined;
  readonly #logger: Logger;
  readonly #book = new CsiFaultBook();
  /** inode:size:mtime:ctime of the last text read (good or bad); 'missing'; undefined before the first look. */
  #signature: string | undefined;
  #refreshing: Promise<void> = Promise.resolve();
  /** Where the counters are kept across restarts, through the driver's own filesystem (undefined: not kept). */
  readonly #counters: { readonly fs: FileSystem; readonly file: string } | undefined;
  /** The counters of a previous process, until the faults file is first read. */
  #restoring = true;
  #saving: Promise<void> = Promise.resolve();
  constructor(file: string | undefined, logger: Logger, counters?: { readonly fs: FileSystem; readonly file: string }) {
    this.file = file;
    this.#logger = logger;
    this.#counters = counters;
  }

  /** Resolves once the counters of every rule applied so far are on disk. */
  saved(): Promise<void> {
    return this.#saving;
  }

  /** Re-reads the file if it changed since the last look. Never throws. */
  refresh(): Promise<void> {
    const run = this.#refreshing.then(() => this.#refresh());
    this.#refreshing = run.catch(() => undefined);
    return run;
  }

  /** The rule that applies to this call, its `times` counted down; undefined when none. */
  take(method: MockRpcMethod, volumeId: string): CsiFault | undefined {
    const rule = this.#book.take(method, volumeId);
    if (rule?.times !== undefined) this.#saveCounters();
    return rule;
  }

  #saveCounters(): void {
    const c = this.#counters;
    if (c === undefined) return;
    const file = c.file;
    const text = `${JSON.stringify({ version: 1, counters: this.#book.counters() })}\n`;
    this.#saving = this.#saving
      .then(() => writeFileAtomic(c.fs, file, new TextEncoder().encode(text), { mode: 0o644 }))
      .catch((err: unknown) => this.#logger.error(err, 'Cannot save the fault rules\' counters; a restarted driver applies them afresh', { file }));
  }

  /** The counters a previous process of this driver kept, or none. */
  async #loadCounters(): Promise<{ rule: string; remaining: number | null }[]> {
    const c = this.#counters;
    if (c === undefined) return [];
    const file = c.file;
    try {
      const bytes = await c.fs.readFile(file, MAX_COUNTERS_FILE_BYTES);
      return countersSchema.parse(JSON.parse(Buffer.from(bytes).toString('utf8'))).counters;
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') this.#logger.error(err, 'Ignoring the saved counters of the fault rules', { file });
      return [];
    }
  }

  /** The rules in force, with how many matching calls each still applies to. */
  rules(): { readonly rule: CsiFault; readonly remaining: number }[] {
    return this.#book.rules();
  }

  async #refresh(): Promise<void> {
    const file = this.file;
    if (file === undefined) return;
    let signature: string;
    try {
      const st = await fsp.stat(file, { bigint: true });
      signature = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') {
        this.#logger.error(err, 'Cannot stat the faults file; keeping the previous rules', { file });
        return;
      }
      signature = 'missing';
    }
    if (signature === this.#signature) return;
    this.#signature = signature;
    if (signature === 'missing') {
      if (this.#book.rules().length > 0) this.#logger.info('The faults file is gone; no faults are injected', { file });
      this.#book.clear();
      return;
    }
    let rules: CsiFault[];
    try {
      // Non-blocking and regular files only: a FIFO as the faults file must not hang the driver.
      let bytes: Uint8Array;
      try {
        bytes = await new NodeFileSystem().readFile(file, MAX_FAULTS_FILE_BYTES);
      } catch (err) {
        if (errorCode(err) === 'EFBIG') throw new MockFaultsError(`${file} is larger than ${MAX_FAULTS_FILE_BYTES} bytes`);
        throw err;
      }
      const text = Buffer.from(bytes).toString('utf8');
      rules = parseFaults(text, file);
    } catch (err) {
      this.#logger.error(err, 'Ignoring the faults file; keeping the previous rules', { file, rules: this.#book.rules().length });
      return;
    }
    this.#book.replace(rules);
    if (this.#restoring) {
      this.#restoring = false;
      const saved = await this.#loadCounters();
      if (saved.length > 0) {
        this.#book.restoreCounters(saved);
        this.#logger.info('Restored the counters of the fault rules', { file: this.#counters?.file });
      }
    }
    this.#logger.info('Loaded the faults file', { file, rules: rules.map(describeCsiFault) });
  }
}
