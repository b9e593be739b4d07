/**
 * Test helper: a CSI driver in its own process, to be killed with SIGKILL in the middle of a
 * call, as a crashing or restarted driver is: no answer, no goodbye, its socket file left behind
 * (a server closed in process would answer its held calls and, through libuv, unlink the path).
 * It answers NodeGetCapabilities with STAGE_UNSTAGE_VOLUME and holds every other Node call
 * (killableCsiServerMain.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

import { withTimeout } from './e2e/waitFor.js';

const MAIN = path.join(import.meta.dirname, 'killableCsiServerMain.js');

export class KillableCsiServer {
  /** Every call that arrived, in order: `${method} ${volumeId}`. */
  readonly arrivals: string[] = [];
  readonly #proc: ChildProcess;
  readonly #exited: Promise<void>;
  #waiters: { readonly match: (line: Record<string, string>) => boolean; readonly resolve: () => void }[] = [];

  private constructor(endpoint: string) {
    this.#proc = spawn(process.execPath, [MAIN, endpoint], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.#exited = new Promise((resolve) => this.#proc.once('exit', () => resolve()));
    const lines = createInterface({ input: this.#proc.stdout ?? process.stdin });
    lines.on('line', (text) => {
      const line = JSON.parse(text) as Record<string, string>;
      if (line['arrived'] !== undefined) this.arrivals.push(`${line['arrived']} ${line['volumeId'] ?? ''}`);
      const ready = this.#waiters.filter((w) => w.match(line));
      this.#waiters = this.#waiters.filter((w) => !w.match(line));
      for (const w of ready) w.resolve();
    });
  }

  /** Starts the process; resolves once it serves on `endpoint`. */
  static async start(endpoint: string): Promise<KillableCsiServer> {
    const server = new KillableCsiServer(endpoint);
    await withTimeout(server.#next((l) => l['serving'] === endpoint), 10_000, `the killable CSI server to serve on ${endpoint}`);
    return server;
  }

  /** Resolves when a call of `method` has arrived (now or before), within 10 s. */
  arrived(method: string): Promise<void> {
    if (this.arrivals.some((a) => a.startsWith(`${method} `))) return Promise.resolve();
    return withTimeout(
      this.#next((l) => l['arrived'] === method),
      10_000,
      `a ${method} call at the killable CSI server`,
      () => this.arrivals.join(', '),
    );
  }

  /** SIGKILL; resolves once the process is gone. */
  async kill(): Promise<void> {
    this.#proc.kill('SIGKILL');
    await withTimeout(this.#exited, 10_000, 'the killed CSI server to exit');
  }

  #next(match: (line: Record<string, string>) => boolean): Promise<void> {
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }
}
