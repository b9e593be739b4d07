/**
 * Test helper: the built `nodevol mock-driver` CLI run in its own private mount namespace
 * (`unshare --mount --propagation private --fork --kill-child`), so that its real bind mounts
 * never leak. Used by the root-only mock-driver tests.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { GrpcCsiClient } from '../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { parseMountInfo, unescapeMountPath } from '../../src/mount/mountInfo.js';
import { waitFor } from './e2e/waitFor.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'nodevol.js');

/** The built CLI in a private mount namespace: unshare is the parent, node its forked child. */
export class CliMockDriver {
  readonly proc: ChildProcess;
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  constructor(args: readonly string[]) {
    this.proc = spawn(
      'unshare',
      ['--mount', '--propagation', 'private', '--fork', '--kill-child', process.execPath, BIN, 'mock-driver', ...args],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.proc.stderr?.setEncoding('utf8');
    this.proc.stderr?.on('data', (s: string) => this.stderr.push(s));
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
    });
  }

  get pid(): number {
    assert.ok(this.proc.pid !== undefined, 'unshare did not start');
    return this.proc.pid;
  }

  get running(): boolean {
    return this.#exit === undefined;
  }

  childPid(): number | undefined {
    try {
      const first = readFileSync(`/proc/${this.pid}/task/${this.pid}/children`, 'utf8').trim().split(/\s+/)[0];
      return first === undefined || first === '' ? undefined : Number(first);
    } catch {
      return undefined;
    }
  }

  async waitServing(socket: string, ms = 15_000): Promise<void> {
    const state = await waitFor(
      async () => {
        if (!this.running) return 'exited';
        if (!existsSync(socket) || this.childPid() === undefined) return false;
        const c = new GrpcCsiClient(unixEndpoint(socket), { timeoutMs: 2000 });
        try {
          await c.identity.probe();
          return 'serving';
        } catch {
          return false; // not yet
        } finally {
          c.close();
        }
      },
      { what: `mock-driver to serve ${socket}`, timeoutMs: ms, intervalMs: 25, observe: () => this.stderr.join('') },
    );
    if (state === 'exited') assert.fail(`mock-driver exited early: ${JSON.stringify(this.#exit)}\n${this.stderr.join('')}`);
  }

  /** The mount points of the driver's namespace. */
  async mountPoints(): Promise<string[]> {
    const text = await readFile(`/proc/${this.pid}/mountinfo`, 'utf8');
    return parseMountInfo(text).entries.map((e) => unescapeMountPath(e.mountPoint));
  }

  /** Mount points of the driver's namespace at or below `dir`, with their options. */
  async mountsUnder(dir: string): Promise<{ mountPoint: string; ro: boolean }[]> {
    const text = await readFile(`/proc/${this.pid}/mountinfo`, 'utf8');
    return parseMountInfo(text)
      .entries.map((e) => ({ mountPoint: unescapeMountPath(e.mountPoint), ro: e.mountOptions.includes('ro') }))
      .filter((m) => m.mountPoint === dir || m.mountPoint.startsWith(`${dir}/`));
  }

  /** Runs a program (argument array) inside the driver's mount namespace. */
  inNamespace(args: readonly string[]): { status: number | null; stderr: string } {
    const r = spawnSync('nsenter', ['--target', String(this.pid), '--mount', '--', ...args], { encoding: 'utf8', timeout: 10_000 });
    if (r.error !== undefined) throw r.error;
    return { status: r.status, stderr: r.stderr };
  }

  terminate(): void {
    const child = this.childPid();
    if (child !== undefined) process.kill(child, 'SIGTERM');
  }

  kill(): void {
    const child = this.childPid();
    if (child !== undefined) {
      try {
        process.kill(child, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (this.running) this.proc.kill('SIGKILL');
  }
}

