/**
 * The JSON-lines protocol between {@link NodeNamespace} (test side) and nsSupervisor (inside
 * the namespace). One request per line on the supervisor's stdin, one response per line on its
 * stdout, matched by `id` (a request without one is answered with `"id": null`).
 *
 *   {"id":1,"cmd":"spawn","name":"agent","argv":["node","…"],"env":{"K":"V"},"log":"/abs/agent.log","cwd":"/abs"}
 *        -> {"id":1,"ok":true,"pid":7}               stdout+stderr appended to `log` (discarded without one)
 *   {"id":2,"cmd":"signal","name":"agent","signal":"SIGKILL"}
 *        -> {"id":2,"ok":true,"delivered":true}      false when the process had already exited
 *   {"id":3,"cmd":"wait","name":"agent","timeoutMs":5000}
 *        -> {"id":3,"ok":true,"exitCode":null,"signal":"SIGKILL"}
 *        -> {"id":3,"ok":false,"timedOut":true,"what":"\"agent\" (pid 7, [...]) to exit","state":"still running","error":"timed out after 5000 ms waiting for …"}
 *   {"id":4,"cmd":"mountinfo"}                -> {"id":4,"ok":true,"text":"…/proc/self/mountinfo…"}
 *   {"id":5,"cmd":"run","argv":["mount","--bind","/a","/b"],"timeoutMs":10000}
 *        -> {"id":5,"ok":true,"exitCode":0,"signal":null,"stdout":"","stderr":"","timedOut":false}
 *   {"id":6,"cmd":"list"}                     -> {"id":6,"ok":true,"processes":[{name,pid,argv,log,running,exitCode,signal}]}
 *   {"id":7,"cmd":"ping"}                     -> {"id":7,"ok":true,"pid":2,"ppid":1}
 *   any failure                               -> {"id":n,"ok":false,"error":"…"}
 *
 * The supervisor's stdin closing (the test process ended or called stop()) kills every child and
 * ends the namespace.
 */

export const MAX_TIMEOUT_MS = 10 * 60_000;

export interface ExitStatus {
  /** The exit code, or null when the process was killed by a signal. */
  readonly exitCode: number | null;
  /** The signal that killed it, e.g. "SIGKILL", or null. */
  readonly signal: string | null;
}

export interface RunResult extends ExitStatus {
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

export interface ProcessInfo extends ExitStatus {
  readonly name: string;
  /** Its pid inside the namespace. */
  readonly pid: number;
  readonly argv: readonly string[];
  readonly log: string | null;
  readonly running: boolean;
}

export type SupervisorRequest =
  | { id?: number; cmd: 'spawn'; name: string; argv: string[]; env?: Record<string, string>; log?: string; cwd?: string }
  | { id?: number; cmd: 'signal'; name: string; signal: string }
  | { id?: number; cmd: 'wait'; name: string; timeoutMs: number }
  | { id?: number; cmd: 'mountinfo' }
  | { id?: number; cmd: 'run'; argv: string[]; timeoutMs: number; env?: Record<string, string>; cwd?: string }
  | { id?: number; cmd: 'list' }
  | { id?: number; cmd: 'ping' };

export type SupervisorCommand = SupervisorRequest['cmd'];

export type SupervisorResponse = { id: number | null } & (
  | ({ ok: true } & Record<string, unknown>)
  | { ok: false; error: string; timedOut?: boolean; what?: string; state?: string }
);
