/**
 * Hostile HTTP clients for the tests of the agent's HTTP server (test/hostile/): raw sockets on
 * 127.0.0.1, a probe that says what went wrong instead of throwing, and a pipelining flood that
 * never reads its answers. Not named *.test.ts: npm test runs only *.test.js files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import * as path from 'node:path';

export function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/** Resolves when `socket` is closed by the other end, or to 'open' after `ms`. */
export function closedWithin(socket: Socket, ms: number): Promise<'closed' | 'open'> {
  return new Promise((resolve) => {
    if (socket.destroyed) return resolve('closed');
    const t = setTimeout(() => resolve('open'), ms);
    socket.once('close', () => {
      clearTimeout(t);
      resolve('closed');
    });
  });
}

/**
 * GET on a new connection, as kubelet's HTTP probe does (no keep-alive): the status, or what went
 * wrong (the connection refused or reset, or `TimeoutError` when no answer came within `timeoutMs`).
 */
export function probe(port: number, urlPath: string, timeoutMs = 1_000): Promise<number | string> {
  return new Promise((resolve) => {
    const req = get({ host: '127.0.0.1', port, path: urlPath, agent: false, headers: { Connection: 'close' }, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? NaN));
      res.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.name));
    });
    req.once('error', (err: NodeJS.ErrnoException) => resolve(err.name === 'AbortError' ? 'TimeoutError' : (err.code ?? err.name)));
  });
}

export interface FloodOptions {
  readonly connections: number;
  readonly requests: number;
  readonly path: string;
}

/**
 * `connections` sockets to 127.0.0.1:`port`, each writing `requests` pipelined `GET path` at once
 * and never reading a byte of the answers (paused from the start). A socket the server closes is
 * replaced at once, so the pressure holds until stop(). A paused socket does not notice that the
 * server closed it: each writes one more request every 100 ms once what it wrote is in the kernel,
 * and the write that fails on a closed connection closes it.
 */
export class PipelineFlood {
  /** Sockets opened, the replacements included. */
  opened = 0;
  /** Resolves once each socket of the first round has written its requests (or failed to). */
  readonly firstRound: Promise<void>;
  private readonly sockets = new Set<Socket>();
  private readonly payload: Buffer;
  private readonly one: Buffer;
  private readonly timer: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly port: number,
    options: FloodOptions,
  ) {
    this.one = Buffer.from(`GET ${options.path} HTTP/1.1\r\nHost: x\r\n\r\n`);
    this.payload = Buffer.concat(Array.from({ length: options.requests }, () => this.one));
    const first: Promise<void>[] = [];
    for (let i = 0; i < options.connections; i++) first.push(this.connectOne());
    this.firstRound = Promise.all(first).then(() => undefined);
    this.timer = setInterval(() => {
      for (const s of this.sockets) if (!s.connecting && s.writableLength === 0) s.write(this.one);
    }, 100);
  }

  /** Resolves once the socket has written its requests, or closed. */
  private connectOne(): Promise<void> {
    const s = connect(this.port, '127.0.0.1');
    this.opened++;
    this.sockets.add(s);
    s.pause();
    s.on('error', () => undefined);
    const written = new Promise<void>((resolve) => {
      s.once('connect', () => s.write(this.payload, () => resolve()));
      s.once('close', () => resolve());
    });
    s.once('close', () => {
      this.sockets.delete(s);
      if (!this.stopped) void this.connectOne();
    });
    return written;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    for (const s of this.sockets) s.destroy();
  }
}

/**
 * A {@link PipelineFlood} in a process of its own (test/support/pipelineFloodMain.ts), as an
 * abuser on the node would be: the server under test keeps its event loop to itself. start()
 * resolves once every socket of the first round is connected and has written its requests. The
 * process ends with its stdin, so it does not outlive a test process that dies.
 */
export class FloodProcess {
  private constructor(private readonly child: ChildProcess) {}

  static async start(port: number, options: FloodOptions): Promise<FloodProcess> {
    const main = path.join(import.meta.dirname, 'pipelineFloodMain.js');
    const child = spawn(process.execPath, [main, String(port), String(options.connections), String(options.requests), options.path], { stdio: ['pipe', 'pipe', 'inherit'] });
    child.stdout.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      child.stdout.once('data', () => resolve());
      child.once('exit', (code) => reject(new Error(`the flood process exited (${String(code)}) before it started`)));
    });
    return new FloodProcess(child);
  }

  /** Stops the flood; resolves to the number of sockets it opened. */
  async stop(): Promise<number> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return NaN;
    let out = '';
    this.child.stdout?.on('data', (chunk: string) => {
      out += chunk;
    });
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGTERM');
    await exited;
    return Number(/opened (\d+)/.exec(out)?.[1] ?? NaN);
  }
}

/**
 * Probes `urlPath` every `everyMs` (each probe starts `everyMs` after the previous one started, or as
 * soon as it ended when it took longer) until `forMs` have passed; `each` runs after every probe.
 * The results in order: the status, or what went wrong (see {@link probe}).
 */
export async function probeRepeatedly(port: number, urlPath: string, opts: { readonly everyMs: number; readonly forMs: number; readonly timeoutMs?: number; readonly each?: () => void }): Promise<(number | string)[]> {
  const results: (number | string)[] = [];
  const end = performance.now() + opts.forMs;
  while (performance.now() < end) {
    const started = performance.now();
    results.push(await probe(port, urlPath, opts.timeoutMs));
    opts.each?.();
    const pause = started + opts.everyMs - performance.now();
    // Pacing of the probes, not a synchronisation: the probes are the measurement.
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
  return results;
}
