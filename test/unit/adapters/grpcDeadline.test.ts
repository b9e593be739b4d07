// A CSI call that runs past its deadline is cancelled at the driver, not just given up on: the
// driver's handler learns of it (its call's AbortSignal fires, the HTTP/2 stream is reset), and
// 20 such calls leave no stream running and no extra connection. Between the client and the
// driver sits a unix-socket relay that counts the connections, as the driver's socket sees them.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { GrpcCsiClient } from '../../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../../src/adapters/grpc/endpoint.js';
import { startCsiServer, type CsiCallContext, type CsiServer } from '../../../src/adapters/grpc/server.js';
import { CsiCallError, GrpcStatus, type NodeStageVolumeRequest } from '../../../src/ports/csi.js';
import { waitFor } from '../../support/e2e/waitFor.js';

const CALLS = 20;

const STAGE: NodeStageVolumeRequest = {
  volumeId: 'vol-1',
  publishContext: {},
  stagingTargetPath: '/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/abc/globalmount',
  volumeCapability: { mount: { fsType: 'ext4', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } },
  secrets: {},
  volumeContext: {},
};

interface Relay {
  readonly path: string;
  open(): number;
  accepted(): number;
  close(): Promise<void>;
}

/** A unix socket at `at` relaying every connection to `to`, counting them. */
async function relay(at: string, to: string): Promise<Relay> {
  const open = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((inbound) => {
    accepted++;
    open.add(inbound);
    const outbound = net.connect(to);
    inbound.pipe(outbound).pipe(inbound);
    const end = (): void => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('close', () => {
      open.delete(inbound);
      end();
    });
    inbound.on('error', end);
    outbound.on('close', end);
    outbound.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(at, resolve));
  return {
    path: at,
    open: () => open.size,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('CSI calls past their deadline are cancelled at the driver', () => {
  let dir = '';
  let driver: CsiServer;
  let proxy: Relay;
  const hung: CsiCallContext[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-grpc-deadline-'));
    driver = await startCsiServer(
      unixEndpoint(path.join(dir, 'driver.sock')),
      {
        identity: {},
        node: {
          // Never answers; ends only when the call is cancelled.
          nodeStageVolume: (_req, ctx) => {
            hung.push(ctx);
            return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
          },
        },
      },
      { shutdownGraceMs: 1000 },
    );
    proxy = await relay(path.join(dir, 'relay.sock'), driver.socketPath);
  });

  after(async () => {
    await proxy.close();
    await driver.close();
    await rm(dir, { recursive: true, force: true });
  });

  it(`${CALLS} timed-out NodeStageVolume calls: each DEADLINE_EXCEEDED, each cancelled at the driver, one connection`, async () => {
    const client = new GrpcCsiClient(unixEndpoint(proxy.path), { timeoutMs: 100 });
    try {
      for (let i = 0; i < CALLS; i++) {
        await assert.rejects(client.nodeStageVolume(STAGE), (err: unknown) => err instanceof CsiCallError && err.code === GrpcStatus.DEADLINE_EXCEEDED);
      }
      assert.equal(hung.length, CALLS, 'every call reached the driver');
      // Each call's stream was reset by the client at its deadline: the driver saw every one cancelled.
      await waitFor(() => hung.every((c) => c.signal.aborted), {
        what: 'every timed-out call cancelled at the driver',
        timeoutMs: 5_000,
        intervalMs: 10,
        observe: () => `${hung.filter((c) => !c.signal.aborted).length} of ${hung.length} still running at the driver`,
      });
      assert.equal(proxy.accepted(), 1, 'the calls share one connection');
      assert.equal(proxy.open(), 1);
    } finally {
      client.close();
    }
    await waitFor(() => proxy.open() === 0, { what: 'the connection closed with the client', timeoutMs: 5_000, intervalMs: 10, observe: () => proxy.open() });
  });
});
