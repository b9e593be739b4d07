/**
 * The child process of {@link KillableCsiServer} (killableCsiServer.ts): a CSI driver that
 * answers NodeGetCapabilities (STAGE_UNSTAGE_VOLUME) and holds every other Node call for ever,
 * reporting each call on stdout as a JSON line; it exits when its stdin closes (the test process
 * went away). Run as `node killableCsiServerMain.js unix:///abs/csi.sock`.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { startCsiServer } from '../../src/adapters/grpc/server.js';

const endpoint = process.argv[2] ?? '';
const report = (line: Record<string, string>): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`);
};
const held =
  (method: string) =>
  (request: { readonly volumeId?: string }): Promise<never> => {
    report({ arrived: method, volumeId: request.volumeId ?? '' });
    return new Promise<never>(() => undefined);
  };

process.stdin.resume();
process.stdin.once('end', () => process.exit(0));
await startCsiServer(endpoint, {
  identity: {},
  node: {
    nodeGetCapabilities: () => {
      report({ arrived: 'NodeGetCapabilities', volumeId: '' });
      return Promise.resolve({ capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] });
    },
    nodeStageVolume: held('NodeStageVolume'),
    nodeUnstageVolume: held('NodeUnstageVolume'),
    nodePublishVolume: held('NodePublishVolume'),
    nodeUnpublishVolume: held('NodeUnpublishVolume'),
  },
});
report({ serving: endpoint });
