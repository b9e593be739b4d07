/**
 * CSI endpoints: nodevol speaks to drivers, and serves, only over unix domain sockets named
 * `unix:///absolute/path.sock` (the form kubelet's plugin registration hands out, with the
 * scheme made explicit). TCP, `unix:relative` and `unix:/abs` forms are refused.
 */
import * as path from 'node:path';

/** sun_path holds 108 bytes on Linux, the terminating NUL included. */
export const MAX_UNIX_SOCKET_PATH_BYTES = 107;

const PREFIX = 'unix://';

export class InvalidCsiEndpointError extends Error {
  override readonly name = 'InvalidCsiEndpointError';
  constructor(
    readonly endpoint: string,
    reason: string,
  ) {
    super(`invalid CSI endpoint ${JSON.stringify(endpoint)}: ${reason} (expected unix:///absolute/path.sock)`);
  }
}

/** The socket path of a `unix:///abs/path.sock` endpoint; throws {@link InvalidCsiEndpointError}. */
export function unixSocketPath(endpoint: string): string {
  if (!endpoint.startsWith(PREFIX)) {
    if (endpoint.startsWith('unix:')) throw new InvalidCsiEndpointError(endpoint, 'write the unix socket as unix:// followed by an absolute path');
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(endpoint)?.[1];
    throw new InvalidCsiEndpointError(
      endpoint,
      scheme === undefined ? 'no unix:// scheme' : `only unix sockets are supported, not ${scheme}:`,
    );
  }
  const socketPath = endpoint.slice(PREFIX.length);
  if (socketPath === '') throw new InvalidCsiEndpointError(endpoint, 'empty socket path');
  if (!socketPath.startsWith('/')) throw new InvalidCsiEndpointError(endpoint, 'the socket path must be absolute');
  if (socketPath.endsWith('/')) throw new InvalidCsiEndpointError(endpoint, 'the socket path names a directory');
  if (socketPath.includes('\0')) throw new InvalidCsiEndpointError(endpoint, 'the socket path contains a NUL byte');
  const normalized = path.posix.normalize(socketPath);
  if (Buffer.byteLength(normalized) > MAX_UNIX_SOCKET_PATH_BYTES) {
    throw new InvalidCsiEndpointError(endpoint, `the socket path is longer than ${MAX_UNIX_SOCKET_PATH_BYTES} bytes`);
  }
  return normalized;
}

/** The canonical endpoint for an absolute socket path. */
export function unixEndpoint(socketPath: string): string {
  return `${PREFIX}${unixSocketPath(`${PREFIX}${socketPath}`)}`;
}

/** The endpoint in canonical form (normalized path); throws like {@link unixSocketPath}. */
export function normalizeEndpoint(endpoint: string): string {
  return `${PREFIX}${unixSocketPath(endpoint)}`;
}
