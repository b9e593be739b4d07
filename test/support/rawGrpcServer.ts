/**
 * Test helper: a gRPC "driver" that answers with whatever bytes a test gives it, on a unix socket:
 * an HTTP/2 server (node:http2) that speaks just enough of the gRPC wire format (5-byte message
 * frames, grpc-status trailers) to send what a well-behaved server never would: bytes that are
 * not the response message, a length prefix for 100 MiB, a compressed message that inflates to
 * 100 MiB, a stream ended without a status. Each call is answered by `answer(method, stream)`.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { rmSync } from 'node:fs';
import * as http2 from 'node:http2';
import { createGzip } from 'node:zlib';

export type RawAnswer = (method: string, stream: http2.ServerHttp2Stream) => void;

/** A gRPC message frame: compressed flag, 4-byte big-endian length, the bytes. */
export function grpcFrame(payload: Uint8Array, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

/** Answers one message (possibly not the response type at all) and grpc-status 0. */
export function answerBytes(stream: http2.ServerHttp2Stream, payload: Uint8Array): void {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.end(grpcFrame(payload));
}

/** Answers one message and ends the stream without trailers: no grpc-status at all. */
export function answerWithoutStatus(stream: http2.ServerHttp2Stream, payload: Uint8Array): void {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
  stream.end(grpcFrame(payload));
}

/**
 * Announces a message of `claimedBytes` and then streams that many bytes, 1 MiB at a time as the
 * peer's flow control lets it, until the peer resets the stream. Resolves with how many bytes of
 * it were written when the stream closed.
 */
export function answerFlood(stream: http2.ServerHttp2Stream, claimedBytes: number): Promise<number> {
  return new Promise((resolve) => {
    let written = 0;
    stream.on('error', () => undefined);
    stream.once('close', () => resolve(written));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    const head = Buffer.alloc(5);
    head.writeUInt32BE(claimedBytes, 1);
    stream.write(head);
    const chunk = Buffer.alloc(1024 * 1024, 0x41);
    const pump = (): void => {
      while (written < claimedBytes && !stream.destroyed) {
        written += chunk.length;
        if (!stream.write(chunk)) {
          stream.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

/** gzip of `bytes` zero bytes, made a chunk at a time (the zeros are never all in memory). */
export function gzipOfZeros(bytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const gz = createGzip();
    const parts: Buffer[] = [];
    gz.on('data', (b: Buffer) => parts.push(b));
    gz.on('end', () => resolve(Buffer.concat(parts)));
    gz.on('error', reject);
    const chunk = Buffer.alloc(1024 * 1024);
    let left = bytes;
    const feed = (): void => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!gz.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          gz.once('drain', feed);
          return;
        }
      }
      gz.end();
    };
    feed();
  });
}

/** Answers one gzip-compressed message (grpc-encoding: gzip) and grpc-status 0. */
export function answerCompressed(stream: http2.ServerHttp2Stream, gzipped: Uint8Array): void {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-encoding': 'gzip' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.end(grpcFrame(gzipped, true));
}

export class RawGrpcServer {
  /** The methods called, in order ("NodeGetCapabilities"). */
  readonly calls: string[] = [];
  readonly #sessions = new Set<http2.ServerHttp2Session>();

  private constructor(
    readonly socketPath: string,
    private readonly server: http2.Http2Server,
  ) {}

  static async start(socketPath: string, answer: RawAnswer): Promise<RawGrpcServer> {
    const server = http2.createServer();
    const raw = new RawGrpcServer(socketPath, server);
    server.on('session', (session) => {
      raw.#sessions.add(session);
      session.once('close', () => raw.#sessions.delete(session));
    });
    server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      const method = (headers[':path'] ?? '').split('/').pop() ?? '';
      raw.calls.push(method);
      // The request is read and dropped.
      stream.resume();
      answer(method, stream);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
    return raw;
  }

  /** Ends every session and closes the listener (which removes the socket file). */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.#sessions) s.destroy();
    await closed;
    rmSync(this.socketPath, { force: true });
  }
}
