/**
 * The Logger port: klog/logr-shaped structured logging. Engine code logs through this and never
 * writes to a stream itself. `v(n)` returns a logger whose info lines appear only at verbosity
 * >= n (kubelet's -v).
 */
export type LogValues = Readonly<Record<string, unknown>>;

export interface Logger {
  info(msg: string, values?: LogValues): void;
  /** A warning (klog's W severity). */
  warning(msg: string, values?: LogValues): void;
  /** An error line with the error's text under the `err` key. */
  error(err: unknown, msg: string, values?: LogValues): void;
  /** A logger for info lines at verbosity `level`. */
  v(level: number): Logger;
  /** Whether info lines at `level` are written (to skip building expensive values). */
  enabled(level: number): boolean;
}

/** A logger that drops everything. */
export const discardLogger: Logger = {
  info() {},
  warning() {},
  error() {},
  v() {
    return discardLogger;
  },
  enabled() {
    return false;
  },
};
