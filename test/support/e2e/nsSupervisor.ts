/**
 * The process that runs a test "node": started by {@link NodeNamespace} as
 *
 *   unshare --mount --propagation private --pid --fork --kill-child=SIGKILL --mount-proc -- \
 *     [perl reaper --] node dist/test/support/e2e/nsSupervisor.js
 *
 * i.e. inside a fresh, private mount namespace and PID namespace that die with it. It reads
 * JSON-line commands on stdin and answers JSON lines on stdout (see protocol.ts): it spawns and
 * signals the node's processes (agent, mock driver), waits for them, runs one-shot commands
 * (`mount`, `nodevol audit`) and reads the namespace's mount table.
 *
 * PID 1: Node cannot reap processes it did not spawn (libuv waits for its own children by pid),
 * so an orphan re-parented to a Node PID 1 stays a zombie. NodeNamespace therefore makes PID 1 a
 * tiny perl reaper (perl-base is Essential on Debian) that forks this supervisor and reaps every
 * process of the namespace, exiting when the supervisor exits; the kernel then kills whatever is
 * left in the namespace. Without perl the supervisor itself is PID 1: it reaps its own children
 * but orphans stay zombies (harmless: they hold no mounts and vanish with the namespace).
 *
 * When stdin closes, or on SIGTERM/SIGINT/SIGHUP, it SIGKILLs every child and exits.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { createInterface } from 'node:readline';

import { z } from 'zod';

import { MAX_TIMEOUT_MS, type ExitStatus, type ProcessInfo, type RunResult, type SupervisorRequest, type SupervisorResponse } from './protocol.js';

/** Largest stdout (and stderr) a `run` keeps; the rest is dropped with a marker. */
const MAX_RUN_OUTPUT_BYTES = 8 * 1024 * 1024;
/** After a `run` command exits, how long its pipes may stay open (a grandchild holding them). */
const RUN_CLOSE_GRACE_MS = 1000;
/** How long shutdown waits for SIGKILLed children before exiting anyway. */
const SHUTDOWN_WAIT_MS = 3000;

const id = z.number().int().optional();
const name = z.string().min(1).max(200);
const argv = z.array(z.string()).min(1);
const timeoutMs = z.number().int().positive().max(MAX_TIMEOUT_MS);
const env = z.record(z.string()).optional();
const absolute = z.string().regex(/^\//, 'must be an absolute path');

const requestSchema = z.discriminatedUnion('cmd', [
  z.object({ id, cmd: z.literal('spawn'), name, argv, env, log: absolute.optional(), cwd: absolute.optional() }),
  z.object({ id, cmd: z.literal('signal'), name, signal: z.string().refine((s) => Object.hasOwn(osConstants.signals, s), 'unknown signal name') }),
  z.object({ id, cmd: z.literal('wait'), name, timeoutMs }),
  z.object({ id, cmd: z.literal('mountinfo') }),
  z.object({ id, cmd: z.literal('run'), argv, timeoutMs, env, cwd: absolute.optional() }),
  z.object({ id, cmd: z.literal('list') }),
  z.object({ id, cmd: z.literal('ping') }),
]);

interface Managed {
  readonly name: string;
  readonly argv: readonly string[];
  readonly pid: number;
  readonly log: string | null;
  readonly child: ChildProcess;
  exit: ExitStatus | undefined;
  readonly exited: Promise<ExitStatus>;
}

const managed = new Map<string, Managed>();
/** Every child still running, `run` commands included. */
const live = new Set<ChildProcess>();
let shuttingDown = false;

function send(response: SupervisorResponse): void {
  process.stdout.write(`${JSON.stringify(response)}\n`);
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function childEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete e.NODEVOL_NS_SUPERVISOR;
  return e;
}

/** Spawns and resolves once the process runs (or rejects when it cannot be started). */
function start(argv0: string, args: readonly string[], options: Parameters<typeof spawn>[2]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawn(argv0, args, options);
    } catch (err) {
      reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (child.pid === undefined) {
      child.once('error', (err) => reject(err));
      return;
    }
    live.add(child);
    child.once('exit', () => live.delete(child));
    resolve(child);
  });
}

async function doSpawn(req: Extract<SupervisorRequest, { cmd: 'spawn' }>): Promise<Record<string, unknown>> {
  const old = managed.get(req.name);
  if (old !== undefined && old.exit === undefined) throw new Error(`a process named "${req.name}" is still running (pid ${old.pid}); signal and wait for it first`);
  const [cmd, ...args] = req.argv as [string, ...string[]];
  const fd = req.log === undefined ? undefined : openSync(req.log, 'a', 0o644);
  let child: ChildProcess;
  try {
    child = await start(cmd, args, {
      stdio: ['ignore', fd ?? 'ignore', fd ?? 'ignore'],
      env: childEnv(req.env),
      ...(req.cwd !== undefined ? { cwd: req.cwd } : {}),
    });
  } catch (err) {
    throw new Error(`cannot start "${req.name}" (${JSON.stringify(req.argv)}): ${message(err)}`);
  } finally {
    if (fd !== undefined) closeSync(fd); // the child has its own copy once spawn returned
  }
  const pid = child.pid ?? -1;
  let resolveExit: (s: ExitStatus) => void = () => undefined;
  const m: Managed = {
    name: req.name,
    argv: req.argv,
    pid,
    log: req.log ?? null,
    child,
    exit: undefined,
    exited: new Promise<ExitStatus>((r) => (resolveExit = r)),
  };
  child.once('exit', (exitCode, signal) => {
    m.exit = { exitCode, signal };
    resolveExit(m.exit);
  });
  managed.set(req.name, m);
  return { pid };
}

function find(name: string): Managed {
  const m = managed.get(name);
  if (m === undefined) throw new Error(`no process named "${name}" was spawned in this namespace (known: ${[...managed.keys()].join(', ') || 'none'})`);
  return m;
}

function describeExit(s: ExitStatus): string {
  return s.signal !== null ? `killed by ${s.signal}` : `exited with code ${s.exitCode ?? '?'}`;
}

function doSignal(req: Extract<SupervisorRequest, { cmd: 'signal' }>): Record<string, unknown> {
  const m = find(req.name);
  if (m.exit !== undefined) return { delivered: false, detail: `"${req.name}" (pid ${m.pid}) already ${describeExit(m.exit)}` };
  return { delivered: m.child.kill(req.signal as NodeJS.Signals) };
}

/** A bounded wait ran out: `what` was awaited, `state` was seen last. */
class SupervisorTimeout extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    readonly state: string,
  ) {
    super(`timed out after ${timeoutMs} ms waiting for ${what}; last observed: ${state}`);
  }
}

async function doWait(req: Extract<SupervisorRequest, { cmd: 'wait' }>): Promise<Record<string, unknown>> {
  const m = find(req.name);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new SupervisorTimeout(`"${req.name}" (pid ${m.pid}, ${JSON.stringify(m.argv)}) to exit`, req.timeoutMs, 'still running')),
      req.timeoutMs,
    );
  });
  try {
    const s = await Promise.race([m.exited, timeout]);
    return { exitCode: s.exitCode, signal: s.signal };
  } finally {
    clearTimeout(timer);
  }
}

async function doRun(req: Extract<SupervisorRequest, { cmd: 'run' }>): Promise<RunResult> {
  const [cmd, ...args] = req.argv as [string, ...string[]];
  let child: ChildProcess;
  try {
    child = await start(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv(req.env), ...(req.cwd !== undefined ? { cwd: req.cwd } : {}) });
  } catch (err) {
    throw new Error(`cannot run ${JSON.stringify(req.argv)}: ${message(err)}`);
  }
  const collect = (stream: NodeJS.ReadableStream | null): (() => string) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let dropped = 0;
    stream?.on('data', (b: Buffer) => {
      if (size + b.length <= MAX_RUN_OUTPUT_BYTES) {
        chunks.push(b);
        size += b.length;
      } else dropped += b.length;
    });
    return () => Buffer.concat(chunks).toString('utf8') + (dropped > 0 ? `\n[nsSupervisor: ${dropped} more bytes dropped]\n` : '');
  };
  const stdout = collect(child.stdout);
  const stderr = collect(child.stderr);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, req.timeoutMs);
  const status = await new Promise<ExitStatus>((resolve) => {
    let exit: ExitStatus | undefined;
    let grace: NodeJS.Timeout | undefined;
    child.once('close', (exitCode: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(grace);
      resolve(exit ?? { exitCode, signal });
    });
    child.once('exit', (exitCode, signal) => {
      exit = { exitCode, signal };
      const e = exit;
      grace = setTimeout(() => resolve(e), RUN_CLOSE_GRACE_MS);
    });
  });
  clearTimeout(timer);
  return { ...status, stdout: stdout(), stderr: stderr(), timedOut };
}

function doList(): { processes: ProcessInfo[] } {
  return {
    processes: [...managed.values()].map((m) => ({
      name: m.name,
      pid: m.pid,
      argv: m.argv,
      log: m.log,
      running: m.exit === undefined,
      exitCode: m.exit?.exitCode ?? null,
      signal: m.exit?.signal ?? null,
    })),
  };
}

async function handle(req: SupervisorRequest): Promise<Record<string, unknown>> {
  switch (req.cmd) {
    case 'spawn':
      return doSpawn(req);
    case 'signal':
      return doSignal(req);
    case 'wait':
      return doWait(req);
    case 'mountinfo':
      return { text: await readFile('/proc/self/mountinfo', 'utf8') };
    case 'run':
      return { ...(await doRun(req)) };
    case 'list':
      return doList();
    case 'ping':
      return { pid: process.pid, ppid: process.ppid };
  }
}

function onLine(line: string): void {
  if (line.trim() === '') return;
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (err) {
    send({ id: null, ok: false, error: `not a JSON line: ${message(err)}` });
    return;
  }
  const rawId = typeof raw === 'object' && raw !== null && 'id' in raw && typeof raw.id === 'number' ? raw.id : null;
  const parsed = requestSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(request)'}: ${i.message}`).join('; ');
    send({ id: rawId, ok: false, error: `invalid request: ${issues}` });
    return;
  }
  const req = parsed.data;
  handle(req).then(
    (result) => send({ ...result, id: req.id ?? null, ok: true }),
    (err: unknown) =>
      send({
        id: req.id ?? null,
        ok: false,
        error: message(err),
        ...(err instanceof SupervisorTimeout ? { timedOut: true, what: err.what, state: err.state } : {}),
      }),
  );
}

function shutdown(why: string): void {
  if (shuttingDown) return;
  shuttingDown = true;
  const pending = [...live].map(
    (c) =>
      new Promise<void>((resolve) => {
        if (c.exitCode !== null || c.signalCode !== null) {
          resolve();
          return;
        }
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      }),
  );
  const bound = new Promise<void>((resolve) => setTimeout(resolve, SHUTDOWN_WAIT_MS).unref());
  Promise.race([Promise.all(pending), bound]).then(
    () => {
      process.stderr.write(`nsSupervisor: ${why}: killed ${pending.length} process(es), exiting\n`);
      process.exit(0);
    },
    () => process.exit(1),
  );
}

function main(): void {
  if (process.env.NODEVOL_NS_SUPERVISOR !== '1') {
    process.stderr.write('nsSupervisor: refusing to run outside a NodeNamespace (NODEVOL_NS_SUPERVISOR=1 is not set)\n');
    process.exit(2);
  }
  process.stdout.on('error', () => shutdown('stdout closed'));
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => shutdown(sig));
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on('line', onLine);
  rl.on('close', () => shutdown('stdin closed'));
}

main();
