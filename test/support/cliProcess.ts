/**
 * The built `nodevol` CLI as a long-running child process for tests: its stderr lines, the
 * address it announced, and a bounded wait for a line. Not named *.test.ts: npm test runs
 * only *.test.js files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { waitFor } from './e2e/waitFor.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
export const NODEVOL_BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');

export class CliProcess {
  readonly stderrLines: string[] = [];
  stdout = '';
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private partial = '';

  private constructor(readonly child: ChildProcess) {
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      const text = this.partial + chunk;
      const lines = text.split('\n');
      this.partial = lines.pop() ?? '';
      this.stderrLines.push(...lines);
    });
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      this.stdout += chunk;
    });
    child.on('exit', (code, signal) => {
      this.exit = { code, signal };
    });
  }

  static start(args: readonly string[], env: NodeJS.ProcessEnv = process.env): CliProcess {
    return new CliProcess(spawn(process.execPath, [NODEVOL_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  /** The first JSON log line whose msg is `msg` (the CLI logs with --logging-format json). */
  async logged(msg: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    return waitFor(
      () => {
        if (this.exit !== undefined) throw new Error(`nodevol exited (${JSON.stringify(this.exit)}) before logging ${JSON.stringify(msg)}: ${this.stderrLines.join('\n')}`);
        for (const l of this.stderrLines) {
          try {
            const j = JSON.parse(l) as Record<string, unknown>;
            if (j['msg'] === msg) return j;
          } catch {
            // not JSON
          }
        }
        return undefined;
      },
      { what: `nodevol to log ${JSON.stringify(msg)}`, timeoutMs, observe: () => this.stderrLines.slice(-5) },
    );
  }

  /** SIGTERM, then the exit status (bounded). */
  async stop(timeoutMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.exit === undefined) this.child.kill('SIGTERM');
    return waitFor(() => this.exit, { what: 'nodevol to exit after SIGTERM', timeoutMs });
  }
}
