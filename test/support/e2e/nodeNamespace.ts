/**
 * A test "node": a private mount namespace and a PID namespace, run by nsSupervisor (see there
 * for the process tree). Mounts made inside are invisible outside and vanish with it; every
 * process in it dies with it. {@link NodeNamespace.reboot} is a power cut: SIGKILL to the
 * namespace's PID 1, after which the kernel kills everything in it, and with the last process
 * of the mount namespace every mount is gone. The node's disk ({@link NodeDisk}) is ordinary
 * directories of the host and survives; call {@link NodeNamespace.start} again for the rebooted
 * node.
 *
 * Every namespace started is registered; {@link killAll} (for `after` hooks) and a process
 * 'exit' handler kill whatever is still running, and a supervisor whose stdin closes (the test
 * process died) kills its children and ends the namespace, so nothing outlives a test.
 *
 * Every await is bounded and a timeout names what it waited for ({@link WaitTimeoutError}).
 * Root only: check {@link NodeNamespace.available} first.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';

import { escapeMountPath, parseMountInfo, type MountInfoEntry } from '../../../src/mount/mountInfo.js';
import { nodeExecPath, supervisorScript } from './paths.js';
import type { ExitStatus, ProcessInfo, RunResult, SupervisorRequest, SupervisorResponse } from './protocol.js';
import { describeState, waitFor, WaitTimeoutError, withTimeout } from './waitFor.js';

export type { ExitStatus, ProcessInfo, RunResult } from './protocol.js';

export const DEFAULT_START_TIMEOUT_MS = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
export const DEFAULT_PROCESS_WAIT_MS = 10_000;
export const DEFAULT_RUN_TIMEOUT_MS = 30_000;
export const DEFAULT_STOP_TIMEOUT_MS = 10_000;
/** Extra time the test side gives the supervisor beyond a wait's own bound. */
const ANSWER_MARGIN_MS = 3000;
const STDERR_TAIL_CHARS = 4000;

/**
 * PID 1 of the namespace: forks the supervisor, reaps every process of the namespace (adopted
 * orphans included, which a Node PID 1 cannot) and exits with the supervisor's status.
 */
const PERL_REAPER = [
  'my $pid = fork();',
  'die "nodevol-init: fork: $!\\n" unless defined $pid;',
  'if ($pid == 0) { exec { $ARGV[0] } @ARGV; die "nodevol-init: exec $ARGV[0]: $!\\n"; }',
  'open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null");',
  'for (;;) { my $w = waitpid(-1, 0);',
  '  if ($w == $pid) { exit(($? & 127) ? 128 + ($? & 127) : ($? >> 8)); }',
  '  if ($w < 0) { exit(1); } }',
].join('\n');

export interface NodeNamespaceOptions {
  /** Used in messages; default `node-<n>`. */
  readonly name?: string;
  /** Where spawn() writes `<name>.log` when it is given no `log`; without it output is discarded. */
  readonly logDir?: string;
  /** Bound on starting the namespace and its first answer; default 10 s. */
  readonly startTimeoutMs?: number;
  /** Extra environment for the supervisor, inherited by everything it starts. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface SpawnOptions {
  /** Added to (overriding) the inherited environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Absolute file that stdout and stderr are appended to; default `<logDir>/<name>.log`. */
  readonly log?: string;
  readonly cwd?: string;
}

export interface RunOptions {
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

export interface Availability {
  readonly ok: boolean;
  /** Why not, when not ok ('' when ok). */
  readonly reason: string;
}

const registry = new Set<NodeNamespace>();
let exitHookInstalled = false;
let availability: Availability | undefined;
let counter = 0;

function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    if (dir === '') continue;
    const p = `${dir}/${cmd}`;
    if (existsSync(p)) return p;
  }
  return undefined;
}

/** SIGKILLs every registered namespace, synchronously (the process 'exit' hook). */
function killAllSync(): void {
  for (const ns of registry) ns.killNow();
}

/** Stops every namespace still running (SIGKILL), waiting for each; for `after` hooks. */
export async function killAll(timeoutMs = DEFAULT_STOP_TIMEOUT_MS): Promise<void> {
  const errors: string[] = [];
  await Promise.all(
    [...registry].map((ns) =>
      ns.reboot(timeoutMs).catch((err: unknown) => {
        errors.push(`${ns.name}: ${describeState(err)}`);
      }),
    ),
  );
  if (errors.length > 0) throw new Error(`killAll: ${errors.join('; ')}`);
}

/** The pid-namespace / mount-namespace link of a host process ("pid:[4026532…]"), if readable. */
function nsLink(pid: number, kind: 'pid' | 'mnt'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/${kind}`);
  } catch {
    return undefined;
  }
}

/** Host pids of the processes whose `kind` namespace is `link`. Zombies count (they are not gone). */
export function processesInNamespace(kind: 'pid' | 'mnt', link: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (nsLink(pid, kind) === link) out.push(pid);
  }
  return out.sort((a, b) => a - b);
}

/** Whether host pid `pid` exists (a zombie exists). */
export function hostProcessExists(pid: number): boolean {
  return existsSync(`/proc/${pid}`);
}

/**
 * The start time of host pid `pid` (field 22 of /proc/<pid>/stat, clock ticks since boot), which
 * tells a reused pid from the original; undefined when it does not exist.
 */
export function hostProcessStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * Whether host pid `pid` is a live process: exists and is not a zombie. A zombie has released
 * everything (namespaces, mounts, files) and only waits for its parent to collect its status;
 * an orphaned `unshare` can stay one for a second or two until the host's init reaps it.
 */
export function hostProcessRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export class NodeNamespace {
  readonly name: string;
  readonly logDir: string | undefined;
  /** Whether PID 1 reaps adopted orphans (the perl reaper); false when the supervisor is PID 1. */
  readonly reapsOrphans: boolean;
  readonly #child: ChildProcess;
  readonly #exited: Promise<ExitStatus>;
  #exit: ExitStatus | undefined;
  #stderr = '';
  #nextId = 1;
  readonly #pending = new Map<number, { resolve: (r: SupervisorResponse) => void; reject: (e: Error) => void; what: string }>();
  #stopped = false;
  #initHostPid = -1;
  #supervisorPid = -1;
  #pidNs = '';
  #mntNs = '';
  /** Set once the namespace was seen empty after it ended: its ns links may be reused by new namespaces. */
  #gone = false;

  private constructor(child: ChildProcess, name: string, logDir: string | undefined, reapsOrphans: boolean) {
    this.#child = child;
    this.name = name;
    this.logDir = logDir;
    this.reapsOrphans = reapsOrphans;
    this.#exited = new Promise<ExitStatus>((resolve) => {
      child.once('exit', (exitCode, signal) => {
        this.#exit = { exitCode, signal };
        registry.delete(this);
        const why = `the namespace ${this.name} ended (unshare ${exit(this.#exit)})${this.#stderrTail()}`;
        for (const [, p] of this.#pending) p.reject(new Error(`${why} while waiting for ${p.what}`));
        this.#pending.clear();
        resolve(this.#exit);
      });
    });
    child.once('error', (err) => {
      this.#stderr += `\n[spawn error: ${err.message}]`;
    });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (s: string) => {
      this.#stderr = (this.#stderr + s).slice(-STDERR_TAIL_CHARS);
    });
    if (child.stdout !== null) {
      const rl = createInterface({ input: child.stdout, crlfDelay: Infinity });
      rl.on('line', (line) => this.#onLine(line));
    }
    // A namespace the test forgot must not keep the test process alive: the 'exit' hook kills it.
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as Socket | null)?.unref();
  }

  /** Whether this process can run namespaces: Linux, root, util-linux unshare, a built supervisor. */
  static available(): Availability {
    if (availability !== undefined) return availability;
    const why = ((): string => {
      if (process.platform !== 'linux') return `e2e needs Linux, this is ${process.platform}`;
      const uid = process.getuid?.();
      if (uid !== 0) return `e2e needs root (mount and unshare), running as uid ${uid ?? '?'}`;
      if (!existsSync(supervisorScript())) return `e2e: ${supervisorScript()} is missing: run \`npm run build\``;
      const r = spawnSync('unshare', ['--mount', '--propagation', 'private', '--pid', '--fork', '--kill-child=SIGKILL', '--mount-proc', '--', 'true'], { encoding: 'utf8', timeout: 10_000 });
      if (r.error !== undefined) return `e2e needs util-linux unshare: ${r.error.message}`;
      if (r.status !== 0) return `e2e: \`unshare --mount --pid --fork --mount-proc\` fails here (exit ${r.status ?? r.signal ?? '?'}): ${r.stderr.trim()}`;
      if (which('mount') === undefined) return 'e2e needs util-linux mount on PATH';
      return '';
    })();
    availability = { ok: why === '', reason: why };
    return availability;
  }

  /** Every namespace started and not yet ended. */
  static live(): readonly NodeNamespace[] {
    return [...registry];
  }

  /** Same as the module's {@link killAll}. */
  static killAll(timeoutMs?: number): Promise<void> {
    return killAll(timeoutMs);
  }

  /** Starts a fresh node namespace; resolves once its supervisor answers. */
  static async start(options: NodeNamespaceOptions = {}): Promise<NodeNamespace> {
    const avail = NodeNamespace.available();
    if (!avail.ok) throw new Error(`NodeNamespace.start: ${avail.reason}`);
    if (!exitHookInstalled) {
      process.on('exit', killAllSync);
      exitHookInstalled = true;
    }
    const name = options.name ?? `node-${++counter}`;
    const perl = which('perl');
    const inner = [nodeExecPath(), supervisorScript()];
    const init = perl !== undefined ? [perl, '-e', PERL_REAPER, '--', ...inner] : inner;
    const env: NodeJS.ProcessEnv = { ...process.env, ...options.env, NODEVOL_NS_SUPERVISOR: '1' };
    delete env.NODE_TEST_CONTEXT; // children are not part of this test run
    const child = spawn('unshare', ['--mount', '--propagation', 'private', '--pid', '--fork', '--kill-child=SIGKILL', '--mount-proc', '--', ...init], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env,
    });
    const ns = new NodeNamespace(child, name, options.logDir, perl !== undefined);
    if (child.pid === undefined) {
      await withTimeout(ns.#exited, 2000, `unshare of ${name} to fail`).catch(() => undefined);
      throw new Error(`NodeNamespace.start(${name}): cannot run unshare${ns.#stderrTail()}`);
    }
    registry.add(ns);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    try {
      const pong = await ns.#request({ cmd: 'ping' }, timeoutMs, `the supervisor of ${name} to start`);
      ns.#supervisorPid = typeof pong.pid === 'number' ? pong.pid : -1;
      ns.#initHostPid = findChild(child.pid);
      const pidNs = nsLink(ns.#initHostPid, 'pid');
      const mntNs = nsLink(ns.#initHostPid, 'mnt');
      if (pidNs === undefined || mntNs === undefined) throw new Error(`cannot read the namespaces of its PID 1 (host pid ${ns.#initHostPid})`);
      if (pidNs === nsLink(process.pid, 'pid') || mntNs === nsLink(process.pid, 'mnt')) throw new Error('its PID 1 is not in new namespaces');
      ns.#pidNs = pidNs;
      ns.#mntNs = mntNs;
    } catch (err) {
      ns.killNow();
      await withTimeout(ns.#exited, 5000, `the failed namespace ${name} to end`).catch(() => undefined);
      throw new Error(`NodeNamespace.start(${name}): ${describeState(err)}${ns.#stderrTail()}`, { cause: err });
    }
    return ns;
  }

  /** Host pid of the `unshare` process holding the namespaces. */
  get unsharePid(): number {
    return this.#child.pid ?? -1;
  }

  /** Host pid of the namespace's PID 1 (the reaper, or the supervisor without perl). */
  get initHostPid(): number {
    return this.#initHostPid;
  }

  /** The supervisor's pid inside the namespace (2 under the reaper, 1 without). */
  get supervisorPid(): number {
    return this.#supervisorPid;
  }

  /** The namespaces' links, as /proc/<pid>/ns/{pid,mnt} read them: "pid:[4026532…]". */
  get pidNamespace(): string {
    return this.#pidNs;
  }

  get mountNamespace(): string {
    return this.#mntNs;
  }

  /** False once the namespace ended (stop, reboot, or a crash of the supervisor). */
  get alive(): boolean {
    return this.#exit === undefined && !this.#stopped;
  }

  // ------------------------------------------------------------------ processes

  /**
   * Starts a process in the namespace under `name` (a name can be reused once its process
   * exited: restart the agent under the same name). Resolves to its pid inside the namespace.
   */
  async spawn(name: string, argv: readonly string[], options: SpawnOptions = {}): Promise<number> {
    const log = options.log ?? (this.logDir !== undefined ? `${this.logDir}/${name}.log` : undefined);
    const r = await this.#request(
      {
        cmd: 'spawn',
        name,
        argv: [...argv],
        ...(options.env !== undefined ? { env: { ...options.env } } : {}),
        ...(log !== undefined ? { log } : {}),
        ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
      },
      DEFAULT_REQUEST_TIMEOUT_MS,
      `"${name}" to be spawned in ${this.name}`,
    );
    return Number(r.pid);
  }

  /** Sends `sig` to the process `name`; false when it had already exited. */
  async signal(name: string, sig: NodeJS.Signals = 'SIGTERM'): Promise<boolean> {
    const r = await this.#request({ cmd: 'signal', name, signal: sig }, DEFAULT_REQUEST_TIMEOUT_MS, `${sig} to be sent to "${name}" in ${this.name}`);
    return r.delivered === true;
  }

  /**
   * Waits for the process `name` to exit (resolves at once when it already has). Rejects with
   * WaitTimeoutError "timed out after N ms waiting for "agent" (pid 7, [...]) to exit".
   */
  async wait(name: string, timeoutMs = DEFAULT_PROCESS_WAIT_MS): Promise<ExitStatus> {
    const r = await this.#request({ cmd: 'wait', name, timeoutMs }, timeoutMs + ANSWER_MARGIN_MS, `"${name}" in ${this.name} to exit`);
    return { exitCode: typeof r.exitCode === 'number' ? r.exitCode : null, signal: typeof r.signal === 'string' ? r.signal : null };
  }

  /** signal + wait: e.g. kill('agent', 'SIGKILL') or kill('agent', 'SIGTERM', 35_000). */
  async kill(name: string, sig: NodeJS.Signals = 'SIGKILL', timeoutMs = DEFAULT_PROCESS_WAIT_MS): Promise<ExitStatus> {
    await this.signal(name, sig);
    return this.wait(name, timeoutMs);
  }

  /** Every process spawned by name (running or exited). */
  async processes(): Promise<ProcessInfo[]> {
    const r = await this.#request({ cmd: 'list' }, DEFAULT_REQUEST_TIMEOUT_MS, `the process list of ${this.name}`);
    return r.processes as ProcessInfo[];
  }

  /**
   * Runs a command to completion inside the namespace (`mount`, `umount`, `nodevol audit`).
   * Rejects with WaitTimeoutError (its output so far in the message) when it outlives
   * `timeoutMs`, after killing it.
   */
  async run(argv: readonly string[], timeoutMs = DEFAULT_RUN_TIMEOUT_MS, options: RunOptions = {}): Promise<RunResult> {
    const what = `${JSON.stringify(argv)} to finish in ${this.name}`;
    const r = await this.#request(
      {
        cmd: 'run',
        argv: [...argv],
        timeoutMs,
        ...(options.env !== undefined ? { env: { ...options.env } } : {}),
        ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
      },
      timeoutMs + ANSWER_MARGIN_MS,
      what,
    );
    const result: RunResult = {
      exitCode: typeof r.exitCode === 'number' ? r.exitCode : null,
      signal: typeof r.signal === 'string' ? r.signal : null,
      stdout: typeof r.stdout === 'string' ? r.stdout : '',
      stderr: typeof r.stderr === 'string' ? r.stderr : '',
      timedOut: r.timedOut === true,
    };
    if (result.timedOut) throw new WaitTimeoutError(what, timeoutMs, `killed; stdout: ${describeState(result.stdout)}; stderr: ${describeState(result.stderr)}`);
    return result;
  }

  /** run() that also rejects unless the command exits 0 (message: argv, status, output). */
  async runOk(argv: readonly string[], timeoutMs = DEFAULT_RUN_TIMEOUT_MS, options: RunOptions = {}): Promise<RunResult> {
    const r = await this.run(argv, timeoutMs, options);
    if (r.exitCode !== 0) throw new Error(`${JSON.stringify(argv)} in ${this.name} ${exit(r)}; stdout: ${describeState(r.stdout)}; stderr: ${describeState(r.stderr)}`);
    return r;
  }

  // ------------------------------------------------------------------ mounts

  /** The namespace's /proc/self/mountinfo text. */
  async mountInfo(): Promise<string> {
    const r = await this.#request({ cmd: 'mountinfo' }, DEFAULT_REQUEST_TIMEOUT_MS, `the mount table of ${this.name}`);
    if (typeof r.text !== 'string') throw new Error(`${this.name}: mountinfo answer without text`);
    return r.text;
  }

  /** The namespace's mount table, parsed (mount points keep the kernel's \040 escapes). */
  async mounts(): Promise<MountInfoEntry[]> {
    return [...parseMountInfo(await this.mountInfo(), { strict: false, source: `${this.name} mountinfo` }).entries];
  }

  /** Whether `absPath` (as given, not resolved) is a mount point in the namespace. */
  async isMounted(absPath: string): Promise<boolean> {
    const escaped = escapeMountPath(absPath);
    return (await this.mounts()).some((m) => m.mountPoint === escaped);
  }

  // ------------------------------------------------------------------ host-side views

  /**
   * Host pids of every process in the namespace (PID 1 included, zombies too); [] once it ended
   * (namespace ids are reused by new namespaces: after the end, check pids you recorded).
   */
  hostPids(): number[] {
    return this.#pidNs === '' || this.#gone ? [] : processesInNamespace('pid', this.#pidNs);
  }

  /** Host processes in the mount namespace (unshare and everything inside); [] once it ended. */
  mountNamespaceHolders(): number[] {
    return this.#mntNs === '' || this.#gone ? [] : processesInNamespace('mnt', this.#mntNs);
  }

  /** The host pid of the process with pid `nsPid` inside the namespace, if it exists. */
  hostPid(nsPid: number): number | undefined {
    for (const pid of this.hostPids()) {
      let status: string;
      try {
        status = readFileSync(`/proc/${pid}/status`, 'utf8');
      } catch {
        continue;
      }
      const fields = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/);
      if (fields !== undefined && Number(fields[fields.length - 1]) === nsPid) return pid;
    }
    return undefined;
  }

  // ------------------------------------------------------------------ lifecycle

  /**
   * Power cut: SIGKILL to PID 1; the kernel kills every process of the namespace and the mount
   * namespace dies with its last process. Resolves once unshare has exited and no process is
   * left in either namespace. The object is dead afterwards; start a new one.
   */
  async reboot(timeoutMs = DEFAULT_STOP_TIMEOUT_MS): Promise<void> {
    this.#stopped = true;
    const members = this.#members();
    if (this.#exit === undefined) this.killNow();
    await this.#awaitEnd(members, timeoutMs, 'SIGKILL');
  }

  /**
   * Ends the namespace: closes the supervisor's stdin (it SIGKILLs its children and exits),
   * SIGKILL after `timeoutMs / 2`. Idempotent, never throws for an already ended namespace;
   * rejects only if something is still alive at the end.
   */
  async stop(timeoutMs = DEFAULT_STOP_TIMEOUT_MS): Promise<void> {
    this.#stopped = true;
    const members = this.#members();
    if (this.#exit === undefined) {
      this.#child.stdin?.end();
      try {
        await withTimeout(this.#exited, Math.floor(timeoutMs / 2), `the namespace ${this.name} to end after its supervisor's stdin closed`);
      } catch {
        this.killNow();
      }
    }
    await this.#awaitEnd(members, Math.ceil(timeoutMs / 2), 'stop');
  }

  /**
   * SIGKILL to the namespace's PID 1 (to unshare when PID 1 is not known yet), synchronously,
   * without waiting. unshare then reaps PID 1 and exits; killing unshare too would leave PID 1
   * a zombie until the host's init reaps it (seconds).
   */
  killNow(): void {
    signalPid(this.#initHostPid > 0 ? this.#initHostPid : this.#child.pid, 'SIGKILL');
  }

  /** SIGKILL to PID 1 and to unshare: the last resort when unshare does not exit. */
  killHard(): void {
    signalPid(this.#initHostPid, 'SIGKILL');
    signalPid(this.#child.pid, 'SIGKILL');
  }

  /**
   * The host processes of the namespace now (pid namespace members, mount namespace holders,
   * unshare), with their start times. Checked after the end by pid + start time, not by
   * namespace id: the kernel hands a freed namespace id to the next new namespace at once.
   */
  #members(): Map<number, string | undefined> {
    if (this.#gone) return new Map();
    const pids = new Set([...this.hostPids(), ...this.mountNamespaceHolders(), this.unsharePid, this.#initHostPid]);
    return new Map([...pids].filter((p) => p > 0).map((p) => [p, hostProcessStartTime(p)]));
  }

  async #awaitEnd(members: Map<number, string | undefined>, timeoutMs: number, how: string): Promise<void> {
    const started = Date.now();
    try {
      await withTimeout(this.#exited, timeoutMs, `unshare (host pid ${this.unsharePid}) of ${this.name} to exit after ${how}`);
    } catch (err) {
      this.killHard();
      throw err;
    }
    const survivors = (): number[] => [...members].filter(([p, t]) => t !== undefined && hostProcessRunning(p) && hostProcessStartTime(p) === t).map(([p]) => p);
    await waitFor(() => survivors().length === 0, {
      what: `every process of ${this.name} to be gone after ${how}`,
      timeoutMs: Math.max(1000, timeoutMs - (Date.now() - started)),
      observe: () => ({ stillRunning: survivors().map((p) => `${p}: ${readCmdline(p)}`) }),
    });
    this.#gone = true;
  }

  #stderrTail(): string {
    const t = this.#stderr.trim();
    return t === '' ? '' : `; supervisor stderr: ${t}`;
  }

  #onLine(line: string): void {
    let msg: SupervisorResponse;
    try {
      msg = JSON.parse(line) as SupervisorResponse;
    } catch {
      this.#stderr = `${this.#stderr}\n[stdout: ${line}]`.slice(-STDERR_TAIL_CHARS);
      return;
    }
    if (typeof msg.id !== 'number') {
      if (!msg.ok) this.#stderr = `${this.#stderr}\n[supervisor: ${msg.error}]`.slice(-STDERR_TAIL_CHARS);
      return;
    }
    const p = this.#pending.get(msg.id);
    if (p === undefined) return;
    this.#pending.delete(msg.id);
    p.resolve(msg);
  }

  async #request(req: SupervisorRequest, timeoutMs: number, what: string): Promise<Record<string, unknown>> {
    if (this.#exit !== undefined || this.#stopped) throw new Error(`${this.name} has ended (stopped or rebooted): cannot wait for ${what}`);
    const id = this.#nextId++;
    const answered = new Promise<SupervisorResponse>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, what });
    });
    this.#child.stdin?.write(`${JSON.stringify({ ...req, id })}\n`);
    let res: SupervisorResponse;
    try {
      res = await withTimeout(answered, timeoutMs, `${what} (the supervisor did not answer)`);
    } finally {
      this.#pending.delete(id);
    }
    if (!res.ok) {
      if (res.timedOut === true) {
        const ms = req.cmd === 'wait' ? req.timeoutMs : timeoutMs;
        throw new WaitTimeoutError(res.what !== undefined ? `${res.what} in ${this.name}` : what, ms, res.state ?? res.error);
      }
      throw new Error(`${this.name}: ${req.cmd} failed: ${res.error}`);
    }
    return res;
  }
}

function readCmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '(gone)';
  }
}

function signalPid(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid === undefined || pid <= 0) return;
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

function exit(s: ExitStatus): string {
  return s.signal !== null ? `was killed by ${s.signal}` : `exited with code ${s.exitCode ?? '?'}`;
}

/** Host pid of the only child of `parent` (unshare's forked PID 1). */
function findChild(parent: number): number {
  try {
    const text = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim();
    const first = Number(text.split(/\s+/)[0]);
    if (Number.isInteger(first) && first > 0) return first;
  } catch {
    // no CONFIG_PROC_CHILDREN: scan
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1];
      if (Number(ppid) === parent) return Number(entry);
    } catch {
      // exited meanwhile
    }
  }
  throw new Error(`cannot find the forked child of unshare (host pid ${parent})`);
}
