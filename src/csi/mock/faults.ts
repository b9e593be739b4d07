/**
 * The mock driver's fault rules (`--faults FILE`, YAML or JSON):
 *
 *   faults:
 *     - method: NodeUnstageVolume   # any csi.v1 RPC the mock serves
 *       volumeId: mock-0123abcd…     # optional: only calls for this volume
 *       delayMs: 2000                # optional: hold the call this long first
 *       code: UNAVAILABLE            # optional: fail with this gRPC code (name or 1..16)
 *       afterEffect: true            # optional, with code: do the real work, then fail
 *       times: 2                     # optional: apply to this many matching calls (default: all)
 *       hang: true                   # optional: never answer (until the driver stops)
 *       exit: true                   # optional: the process exits with code 3 when the call arrives
 *       clientTimeoutMs: 500         # optional: answer DEADLINE_EXCEEDED after this long while the
 *                                    #   call carries on at the driver ("timed out at the client,
 *                                    #   still running at the driver"); the volume stays busy
 *                                    #   (ABORTED) until the work is done
 *
 * The first rule (in file order) that matches a call's method (and volume id, when the rule has
 * one) and still has `times` left applies to it; `times` counts down per rule. The file is
 * re-read whenever its inode, size, mtime or ctime changed since the last read (checked on every
 * call); a re-read replaces every rule and resets every counter. A file that cannot be parsed or
 * fails validation is logged and ignored: the previous rules (and their counters) stay. A missing
 * file means no rules; an empty one too.
 */
import { promises as fsp } from 'node:fs';

import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

import { NodeFileSystem } from '../../adapters/node/nodeFs.js';
import { errorCode, errorMessage } from '../../host/fs.js';
import type { Logger } from '../../host/logger.js';
import { CSI_RPCS_BY_SERVICE, GrpcStatus, grpcStatusName, type GrpcStatusName } from '../../host/csi.js';

/** Every RPC the mock driver serves (what a rule's `method` may name). */
export const MOCK_RPC_METHODS = [...CSI_RPCS_BY_SERVICE.Identity, ...CSI_RPCS_BY_SERVICE.Controller, ...CSI_RPCS_BY_SERVICE.Node] as const;

export type MockRpcMethod = (typeof MOCK_RPC_METHODS)[number];

/** A validated rule, `code` as a number. */
export interface MockFaultRule {
  readonly method: MockRpcMethod;
  readonly volumeId?: string;
  readonly delayMs?: number;
  readonly code?: number;
  readonly afterEffect?: boolean;
  readonly times?: number;
  readonly hang?: boolean;
  readonly exit?: boolean;
  readonly clientTimeoutMs?: number;
}

/** Upper bound of delayMs: a day (a longer hold is a hang). */
export const MAX_FAULT_DELAY_MS = 24 * 60 * 60 * 1000;
/** Bound on what is read from a faults file. */
export const MAX_FAULTS_FILE_BYTES = 1024 * 1024;

const STATUS_NAMES = Object.keys(GrpcStatus).filter((n) => n !== 'OK') as [Exclude<GrpcStatusName, 'OK'>, ...Exclude<GrpcStatusName, 'OK'>[]];

const ruleSchema = z
  .object({
    method: z.enum(MOCK_RPC_METHODS),
    volumeId: z.string().min(1).optional(),
    delayMs: z.number().int().min(0).max(MAX_FAULT_DELAY_MS).optional(),
    code: z.union([z.enum(STATUS_NAMES), z.number().int().min(GrpcStatus.CANCELLED).max(GrpcStatus.UNAUTHENTICATED)]).optional(),
    afterEffect: z.boolean().optional(),
    times: z.number().int().min(1).optional(),
    hang: z.boolean().optional(),
    exit: z.boolean().optional(),
    clientTimeoutMs: z.number().int().min(0).max(MAX_FAULT_DELAY_MS).optional(),
  })
  .strict()
  .refine((r) => r.delayMs !== undefined || r.code !== undefined || r.hang === true || r.exit === true || r.clientTimeoutMs !== undefined, {
    message: 'a rule needs at least one of delayMs, code, hang: true, exit: true, clientTimeoutMs',
  })
  .refine((r) => r.afterEffect !== true || r.code !== undefined, { message: 'afterEffect needs a code' });

const fileSchema = z.object({ faults: z.array(ruleSchema).default([]) }).strict();

export class MockFaultsError extends Error {
  override readonly name = 'MockFaultsError';
}

/** The rules in a faults file's text (YAML, hence JSON too); throws {@link MockFaultsError}. */
export function parseFaults(text: string, file = 'faults'): MockFaultRule[] {
  let raw: unknown;
  try {
    raw = parseYaml(text, { logLevel: 'error' });
  } catch (err) {
    throw new MockFaultsError(`${file}: not YAML or JSON: ${errorMessage(err)}`);
  }
  if (raw === null || raw === undefined) return [];
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
    throw new MockFaultsError(`${file}: invalid faults file${where}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data.faults.map((r) => {
    const code = typeof r.code === 'string' ? GrpcStatus[r.code] : r.code;
    const rule: { -readonly [K in keyof MockFaultRule]: MockFaultRule[K] } = { method: r.method };
    if (r.volumeId !== undefined) rule.volumeId = r.volumeId;
    if (r.delayMs !== undefined) rule.delayMs = r.delayMs;
    if (code !== undefined) rule.code = code;
    if (r.afterEffect === true) rule.afterEffect = true;
    if (r.times !== undefined) rule.times = r.times;
    if (r.hang === true) rule.hang = true;
    if (r.exit === true) rule.exit = true;
    if (r.clientTimeoutMs !== undefined) rule.clientTimeoutMs = r.clientTimeoutMs;
    return rule;
  });
}

/** A short text for logs: "NodeStageVolume volume=x delay=2000ms code=UNAVAILABLE times=2". */
export function describeRule(rule: MockFaultRule): string {
  const parts: string[] = [rule.method];
  if (rule.volumeId !== undefined) parts.push(`volume=${rule.volumeId}`);
  if (rule.exit === true) parts.push('exit');
  if (rule.hang === true) parts.push('hang');
  if (rule.delayMs !== undefined) parts.push(`delay=${rule.delayMs}ms`);
  if (rule.code !== undefined) parts.push(`code=${grpcStatusName(rule.code)}${rule.afterEffect === true ? ' after the effect' : ''}`);
  if (rule.clientTimeoutMs !== undefined) parts.push(`clientTimeout=${rule.clientTimeoutMs}ms`);
  if (rule.times !== undefined) parts.push(`times=${rule.times}`);
  return parts.join(' ');
}

interface ActiveRule {
  readonly rule: MockFaultRule;
  remaining: number;
}

/** The rules of one faults file, re-read when it changes. */
export class MockFaultBook {
  readonly file: string | undefined;
  readonly #logger: Logger;
  #rules: ActiveRule[] = [];
  /** inode:size:mtime:ctime of the last text read (good or bad); 'missing'; undefined before the first look. */
  #signature: string | undefined;
  #refreshing: Promise<void> = Promise.resolve();

  constructor(file: string | undefined, logger: Logger) {
    this.file = file;
    this.#logger = logger;
  }

  /** Re-reads the file if it changed since the last look. Never throws. */
  refresh(): Promise<void> {
    const run = this.#refreshing.then(() => this.#refresh());
    this.#refreshing = run.catch(() => undefined);
    return run;
  }

  /** The rule that applies to this call, its `times` counted down; undefined when none. */
  take(method: MockRpcMethod, volumeId: string): MockFaultRule | undefined {
    const active = this.#rules.find(
      (a) => a.remaining > 0 && a.rule.method === method && (a.rule.volumeId === undefined || a.rule.volumeId === volumeId),
    );
    if (active === undefined) return undefined;
    active.remaining -= 1;
    return active.rule;
  }

  /** The rules in force, with how many matching calls each still applies to. */
  rules(): { readonly rule: MockFaultRule; readonly remaining: number }[] {
    return this.#rules.map((a) => ({ rule: a.rule, remaining: a.remaining }));
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
      if (this.#rules.length > 0) this.#logger.info('The faults file is gone; no faults are injected', { file });
      this.#rules = [];
      return;
    }
    let rules: MockFaultRule[];
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
      this.#logger.error(err, 'Ignoring the faults file; keeping the previous rules', { file, rules: this.#rules.length });
      return;
    }
    this.#rules = rules.map((rule) => ({ rule, remaining: rule.times ?? Infinity }));
    this.#logger.info('Loaded the faults file', { file, rules: rules.map(describeRule) });
  }
}
