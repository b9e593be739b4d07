/**
 * The file behind `nodevol agent --trace`: trace events appended as JSON lines, each written
 * with one write(2) as it happens (a kill -9 loses at most the line being written). Opening
 * reads the file's last 64 KiB first, so that the new agent life can tell whether the previous
 * one stopped cleanly. The file must be a regular file (or not exist yet): a FIFO or a device is
 * refused by name, never waited on.
 */
import { closeSync, constants, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import type { TraceEvent } from '../../trace/events.js';
import { traceLine } from '../../trace/traceFile.js';
import { specialFileKind } from './nodeFs.js';

/** How much of an existing trace file is read to find how the previous agent life ended. */
export const TRACE_TAIL_BYTES = 64 * 1024;

export interface TraceFileSink {
  /** The end of the file as it was when opened ('' for a new file). */
  readonly previousTail: string;
  write(event: TraceEvent): void;
  close(): void;
}

export function openTraceFileSink(file: string): TraceFileSink {
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_APPEND | constants.O_NONBLOCK | constants.O_NOFOLLOW, 0o640);
  try {
    const st = fstatSync(fd);
    const kind = specialFileKind(st);
    if (kind !== undefined) throw new Error(`${file} is ${kind}, not a regular file`);
    const length = Math.min(st.size, TRACE_TAIL_BYTES);
    const buf = Buffer.alloc(length);
    let off = 0;
    while (off < length) {
      const n = readSync(fd, buf, off, length - off, st.size - length + off);
      if (n === 0) break;
      off += n;
    }
    const previousTail = buf.subarray(0, off).toString('utf8');
    let open = true;
    return {
      previousTail,
      write(event) {
        if (open) writeSync(fd, traceLine(event));
      },
      close() {
        if (!open) return;
        open = false;
        closeSync(fd);
      },
    };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** This boot's id (Linux), so that a trace can tell a reboot from a restart; 'unknown' elsewhere. */
export function bootId(): string {
  try {
    const fd = openSync('/proc/sys/kernel/random/boot_id', constants.O_RDONLY);
    try {
      const buf = Buffer.alloc(64);
      const n = readSync(fd, buf, 0, buf.length, 0);
      return buf.subarray(0, n).toString('utf8').trim() || 'unknown';
    } finally {
      closeSync(fd);
    }
  } catch {
    return 'unknown';
  }
}
