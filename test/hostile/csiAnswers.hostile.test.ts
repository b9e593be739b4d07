/**
 * Hostile driver answers, over a real unix socket and the real gRPC client: a "driver" that sends
 * bytes no csi.v1 server would (test/support/rawGrpcServer.ts): missing fields and unknown enum
 * values, bytes that are not the response message, a 100 MiB message, a compressed one that
 * inflates to 100 MiB, a million empty capability entries, a stream without a gRPC status, a peer
 * that is not HTTP/2. Each is refused with an error naming the driver, its socket and the method
 * (RESOURCE_EXHAUSTED for a size, as grpc-go; INTERNAL for the rest), nothing is read or
 * decoded beyond the bounds (4 MiB, grpc-go's default receive limit; 64 KiB for the Node answers
 * the volume manager reads), and the client goes on to the next call. The last test runs the
 * built agent against such drivers: it logs, stays healthy, within bounded memory, and mounts
 * once the drivers behave.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { GrpcCsiDriverRegistry, MAX_CSI_MESSAGE_BYTES, MAX_NODE_ANSWER_BYTES, type GrpcCsiClient } from '../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { CsiCallError, GrpcStatus, isFinalCsiError } from '../../src/ports/csi.js';
import { CliProcess } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { NodeDisk } from '../support/e2e/nodeDisk.js';
import { answerBytes, answerCompressed, answerFlood, answerWithoutStatus, gzipOfZeros, RawGrpcServer, type RawAnswer } from '../support/rawGrpcServer.js';

const DRIVER = 'raw.csi.example.com';
const MiB = 1024 * 1024;

/** NodeGetCapabilitiesResponse entries, hand-encoded: capabilities (1) { rpc (1) { type (1): t } }. */
const CAP_STAGE = [0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01];
const CAP_UNKNOWN_99 = [0x0a, 0x04, 0x0a, 0x02, 0x08, 0x63];
/** An entry with no capability set (the oneof empty). */
const CAP_EMPTY = [0x0a, 0x00];
const GOOD_CAPS = Buffer.from(CAP_STAGE);

/** A message of `total` bytes: `head`, then unknown field 15 (skipped by decoders) filling the rest. */
function padded(head: readonly number[], total: number): Buffer {
  const varint = (n: number): number[] => {
    const out: number[] = [];
    while (n > 0x7f) {
      out.push((n & 0x7f) | 0x80);
      n = Math.floor(n / 128);
    }
    out.push(n);
    return out;
  };
  // tag (15 << 3 | 2) + varint(length) + length bytes = total - head.length
  for (let len = total - head.length - 2; len > 0; len--) {
    const prefix = [0x7a, ...varint(len)];
    if (head.length + prefix.length + len === total) return Buffer.concat([Buffer.from(head), Buffer.from(prefix), Buffer.alloc(len, 0x41)]);
  }
  throw new Error(`cannot pad to ${total}`);
}

/** A raw driver on a fresh socket and the registry's client for it. */
async function rawDriver(answer: RawAnswer): Promise<{ server: RawGrpcServer; client: GrpcCsiClient; socket: string; close: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-raw-'));
  const socket = path.join(dir, 'csi.sock');
  const server = await RawGrpcServer.start(socket, answer);
  const registry = new GrpcCsiDriverRegistry({ timeoutMs: 20_000 });
  registry.register(DRIVER, unixEndpoint(socket));
  const client = registry.client(DRIVER);
  assert.ok(client !== undefined);
  return {
    server,
    client,
    socket,
    close: async () => {
      registry.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The call's CsiCallError (the call must fail). */
async function failure(call: Promise<unknown>): Promise<CsiCallError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof CsiCallError, `the call failed with a CsiCallError, got ${String(err)}`);
  return err;
}

/** The driver, its socket and the method, named in the error's text. */
function assertNamed(err: CsiCallError, method: string, socket: string): void {
  assert.ok(err.message.includes(`invalid ${method} answer from CSI driver "${DRIVER}" at unix://${socket}: `), err.message);
}

describe('hostile CSI answers: out-of-spec gRPC responses over a real socket', () => {
  it('NodeGetCapabilities without a capability list, with an entry that sets none and one unknown to the proto: only the known ones count (pinned)', async () => {
    const answers = [Buffer.alloc(0), Buffer.from([...CAP_EMPTY, ...CAP_UNKNOWN_99, ...CAP_STAGE, ...CAP_STAGE])];
    const d = await rawDriver((_m, s) => answerBytes(s, answers.shift() ?? GOOD_CAPS));
    try {
      assert.deepEqual(await d.client.nodeGetCapabilities(), [], 'no list: no capability (no STAGE_UNSTAGE_VOLUME: MountDevice skips staging, as kubelet)');
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME'], 'the empty and the unknown entries dropped, the duplicate once');
    } finally {
      await d.close();
    }
  });

  it('NodeGetInfo without node_id (which the spec requires) is refused, naming the driver and the method', async () => {
    // max_volumes_per_node (2): 5, and nothing else.
    const d = await rawDriver((_m, s) => answerBytes(s, Buffer.from([0x10, 0x05])));
    try {
      const err = await failure(d.client.nodeGetInfo());
      assertNamed(err, 'NodeGetInfo', d.socket);
      assert.equal(err.code, GrpcStatus.INTERNAL);
      assert.match(err.message, /node_id is empty/);
    } finally {
      await d.close();
    }
  });

  it('bytes that are not a NodeGetCapabilitiesResponse (a field cut short; a varint where a message is expected): INTERNAL naming the driver and the method; the next answer is used', async () => {
    const answers = [Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02]), Buffer.from([0x08, 0x05])];
    const d = await rawDriver((_m, s) => answerBytes(s, answers.shift() ?? GOOD_CAPS));
    try {
      for (const n of [8, 2]) {
        const err = await failure(d.client.nodeGetCapabilities());
        assertNamed(err, 'NodeGetCapabilities', d.socket);
        assert.equal(err.code, GrpcStatus.INTERNAL);
        assert.ok(isFinalCsiError(err), 'final, as grpc-go reports an unmarshal error');
        assert.match(err.message, new RegExp(`${n} bytes that are not a csi\\.v1 NodeGetCapabilitiesResponse`));
      }
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    } finally {
      await d.close();
    }
  });

  it('a 100 MiB answer is refused from its length prefix (RESOURCE_EXHAUSTED, naming the driver, the method and the 4 MiB bound): the driver gets to write only what flow control lets through', async () => {
    let flooded: Promise<number> | undefined;
    const d = await rawDriver((_m, s) => {
      if (flooded === undefined) flooded = answerFlood(s, 100 * MiB);
      else answerBytes(s, GOOD_CAPS);
    });
    try {
      const err = await failure(d.client.nodeGetCapabilities());
      assertNamed(err, 'NodeGetCapabilities', d.socket);
      assert.equal(err.code, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.match(err.message, new RegExp(`Received message larger than max \\(${100 * MiB} vs ${MAX_CSI_MESSAGE_BYTES}\\)`));
      assert.equal(MAX_CSI_MESSAGE_BYTES, 4 * MiB);
      const written = await flooded;
      assert.ok(written !== undefined && written <= 8 * MiB, `the driver wrote ${written} bytes of the 100 MiB before the client reset the stream`);
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    } finally {
      await d.close();
    }
  });

  it('the bounds: an Identity answer of exactly 4 MiB is read and one byte more refused; a Node answer of exactly 64 KiB is read and one byte more refused before it is decoded', async () => {
    const sizes = new Map<string, number[]>([
      ['GetPluginInfo', [MAX_CSI_MESSAGE_BYTES, MAX_CSI_MESSAGE_BYTES + 1]],
      ['NodeGetCapabilities', [MAX_NODE_ANSWER_BYTES, MAX_NODE_ANSWER_BYTES + 1]],
    ]);
    const d = await rawDriver((m, s) => {
      const size = sizes.get(m)?.shift() ?? 0;
      // GetPluginInfo: name (1) "x"; NodeGetCapabilities: one STAGE_UNSTAGE_VOLUME entry; padded.
      answerBytes(s, padded(m === 'GetPluginInfo' ? [0x0a, 0x01, 0x78] : CAP_STAGE, size));
    });
    try {
      assert.equal((await d.client.identity.getPluginInfo()).name, 'x');
      const big = await failure(d.client.identity.getPluginInfo());
      assertNamed(big, 'GetPluginInfo', d.socket);
      assert.equal(big.code, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
      const node = await failure(d.client.nodeGetCapabilities());
      assertNamed(node, 'NodeGetCapabilities', d.socket);
      assert.equal(node.code, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.match(node.message, new RegExp(`the answer is ${MAX_NODE_ANSWER_BYTES + 1} bytes, more than the ${MAX_NODE_ANSWER_BYTES} a NodeGetCapabilities answer may have`));
    } finally {
      await d.close();
    }
  });

  it('a 4 MiB NodeGetCapabilities answer of a million empty entries is refused before it is decoded (decoded, it was about 200 MB of objects and seconds of CPU)', async () => {
    const entries = Math.floor((MAX_CSI_MESSAGE_BYTES - 8) / 4);
    const million = Buffer.alloc(entries * 4);
    for (let i = 0; i < entries; i++) million.set([0x0a, 0x02, 0x0a, 0x00], i * 4);
    const answers = [million];
    const d = await rawDriver((_m, s) => answerBytes(s, answers.shift() ?? GOOD_CAPS));
    try {
      const err = await failure(d.client.nodeGetCapabilities());
      assertNamed(err, 'NodeGetCapabilities', d.socket);
      assert.equal(err.code, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.match(err.message, new RegExp(`the answer is ${entries * 4} bytes`));
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    } finally {
      await d.close();
    }
  });

  it('a compressed answer that inflates to 100 MiB is refused once its output passes 4 MiB', async () => {
    const bomb = await gzipOfZeros(100 * MiB);
    assert.ok(bomb.length < MiB, `${bomb.length} bytes on the wire`);
    const answers = [bomb];
    const d = await rawDriver((_m, s) => {
      const next = answers.shift();
      if (next === undefined) answerBytes(s, GOOD_CAPS);
      else answerCompressed(s, next);
    });
    try {
      const before = process.memoryUsage().arrayBuffers;
      const err = await failure(d.client.nodeGetCapabilities());
      const grown = process.memoryUsage().arrayBuffers - before;
      assertNamed(err, 'NodeGetCapabilities', d.socket);
      assert.equal(err.code, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.match(err.message, new RegExp(`decompresses to a size larger than ${MAX_CSI_MESSAGE_BYTES}`));
      assert.ok(grown < 32 * MiB, `buffers grew by ${grown} bytes, not the 100 MiB inflated`);
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    } finally {
      await d.close();
    }
  });

  it('an answer ended without a gRPC status: INTERNAL naming the driver and the method', async () => {
    const answers = [GOOD_CAPS];
    const d = await rawDriver((_m, s) => {
      const next = answers.shift();
      if (next === undefined) answerBytes(s, GOOD_CAPS);
      else answerWithoutStatus(s, next);
    });
    try {
      const err = await failure(d.client.nodeGetCapabilities());
      assertNamed(err, 'NodeGetCapabilities', d.socket);
      assert.equal(err.code, GrpcStatus.INTERNAL);
      assert.match(err.message, /without gRPC status/);
      assert.deepEqual(await d.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    } finally {
      await d.close();
    }
  });

  it('a peer that does not speak HTTP/2: UNAVAILABLE (uncertain), and a driver started on the path is used at the next call', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-raw-'));
    const socket = path.join(dir, 'csi.sock');
    const http1 = net.createServer((s) => {
      s.on('error', () => undefined);
      s.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n', () => s.destroy());
    });
    await new Promise<void>((resolve) => http1.listen(socket, resolve));
    const registry = new GrpcCsiDriverRegistry({ timeoutMs: 20_000 });
    registry.register(DRIVER, unixEndpoint(socket));
    let good: RawGrpcServer | undefined;
    try {
      const client = registry.client(DRIVER);
      assert.ok(client !== undefined);
      const err = await failure(client.nodeGetCapabilities());
      assert.equal(err.code, GrpcStatus.UNAVAILABLE, err.message);
      assert.equal(isFinalCsiError(err), false);
      await new Promise<void>((resolve) => http1.close(() => resolve()));
      rmSync(socket, { force: true });
      good = await RawGrpcServer.start(socket, (_m, s) => answerBytes(s, GOOD_CAPS));
      assert.deepEqual(await client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    } finally {
      registry.close();
      await good?.close();
      http1.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('hostile CSI answers: the agent', () => {
  it('drivers answering NodeGetCapabilities out of spec: the agent logs each refusal naming the driver and the method, stays healthy within bounded memory, and mounts once they behave', { timeout: 120_000 }, async () => {
    const disk = await NodeDisk.create({ prefix: 'nodevol-raw-agent-' });
    const socketsDir = path.join(disk.base, 'sockets');
    mkdirSync(socketsDir);
    const entries = Math.floor((MAX_CSI_MESSAGE_BYTES - 8) / 4);
    const million = Buffer.alloc(entries * 4);
    for (let i = 0; i < entries; i++) million.set([0x0a, 0x02, 0x0a, 0x00], i * 4);
    const bomb = await gzipOfZeros(100 * MiB);
    // One driver per kind of bad answer: each answers its first NodeGetCapabilities so, then
    // behaves (no STAGE_UNSTAGE_VOLUME: the agent goes straight to NodePublishVolume).
    const kinds: Readonly<Record<string, RawAnswer>> = {
      flood: (_m, s) => void answerFlood(s, 100 * MiB),
      million: (_m, s) => answerBytes(s, million),
      bomb: (_m, s) => answerCompressed(s, bomb),
      garbage: (_m, s) => answerBytes(s, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02])),
      unended: (_m, s) => answerWithoutStatus(s, Buffer.alloc(0)),
    };
    const servers: RawGrpcServer[] = [];
    const endpoints: string[] = [];
    let agent: CliProcess | undefined;
    try {
      for (const [kind, bad] of Object.entries(kinds)) {
        const driver = `${kind}.csi.example.com`;
        const socket = path.join(socketsDir, `${kind}.sock`);
        let answered = false;
        servers.push(
          await RawGrpcServer.start(socket, (m, s) => {
            if (m === 'NodeGetCapabilities' && !answered) {
              answered = true;
              bad(m, s);
            } else {
              answerBytes(s, Buffer.alloc(0));
            }
          }),
        );
        endpoints.push('--csi-endpoint', `${driver}=${unixEndpoint(socket)}`);
        await disk.writeCsiDriver({ name: driver, attachRequired: false });
        await disk.writePersistentVolume({ name: `pv-${kind}`, driver, volumeHandle: `vol-${kind}` });
      }
      await disk.writePod({ name: 'web', volumes: Object.keys(kinds).map((kind) => ({ name: kind, claimName: `pv-${kind}` })) });
      agent = CliProcess.start([
        'agent', '--root-dir', disk.rootDir, '--node-name', disk.nodeName, '--cluster-dir', disk.clusterDir,
        '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json', ...endpoints,
      ]);
      const started = await agent.logged('Starting nodevol agent', 60_000);
      const port = String(started['metricsAddress']).split(':').pop();
      const running = agent;
      // Every driver gets its NodePublishVolume once it behaves: the agent went on.
      await waitFor(() => servers.every((s) => s.calls.includes('NodePublishVolume')), {
        what: 'a NodePublishVolume at every driver',
        timeoutMs: 60_000,
        observe: () => ({ calls: servers.map((s) => s.calls), log: running.stderrLines.slice(-5) }),
      });
      assert.equal(agent.exit, undefined, 'the agent is running');
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(health.status, 200, await health.text());
      const pid = agent.child.pid ?? 0;
      const peakKiB = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
      assert.ok(peakKiB < 200 * 1024, `the agent's peak resident memory: ${Math.round(peakKiB / 1024)} MiB`);
      // kubelet's failed-operation line quotes the error: the driver's name is in escaped quotes.
      const refusals = agent.stderrLines.map((l) => String((JSON.parse(l) as { msg?: unknown }).msg)).filter((m) => m.includes('invalid NodeGetCapabilities answer from CSI driver'));
      for (const kind of Object.keys(kinds)) {
        assert.ok(
          refusals.some((m) => m.includes(`invalid NodeGetCapabilities answer from CSI driver \\"${kind}.csi.example.com\\" at unix://${path.join(socketsDir, kind)}.sock: `)),
          `${kind}: refusal logged naming the driver\n${refusals.join('\n')}`,
        );
      }
    } finally {
      if (agent !== undefined) await agent.stop(30_000);
      for (const s of servers) await s.close();
      rmSync(disk.base, { recursive: true, force: true });
    }
  });
});
