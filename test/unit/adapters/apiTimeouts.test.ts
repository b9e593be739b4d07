// A request to the API server that runs out of time is abandoned AND its connection closed: the
// fake API server (127.0.0.1) counts its open connections, and a timed-out GET, a timed-out list
// among the audit's reads, a list whose sibling failed (the two cluster-wide lists, read side by
// side when a staged volume has no VolumeAttachment here), and a read the caller aborted each
// leave none open. The server answers 200 and then trickles one byte every 20 ms: never idle, never
// complete, so only a bound on the whole request can end it.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';

import { ClusterApiError, withClusterApi, type ClusterApiOptions } from '../../../src/adapters/node/clusterApi.js';
import { KubeRestClient } from '../../../src/adapters/node/kubeApi.js';
import { readClusterObjects, type StagedVolume } from '../../../src/audit/clusterReads.js';
import { claim, node, persistentVolume, pod, volumeAttachment } from '../../support/clusterObjects.js';
import { waitFor, withTimeout } from '../../support/e2e/waitFor.js';
import { fakeApiServer, writeKubeconfig, type FakeApiServer } from '../../support/fakeApiServer.js';

const NODE = 'node-1';
/** A volume staged on the node that no VolumeAttachment names: the audit lists every PV and VolumeAttachment, side by side. */
const LOST: StagedVolume = { uniqueName: 'kubernetes.io/csi/ebs.csi.example.com^vol-1', driver: 'ebs.csi.example.com', volumeHandle: 'vol-1' };
/** The audit's reads through the API server `o` names, for a node with these staged volumes. */
const readClusterObjectsFromApi = (o: ClusterApiOptions, staged: readonly StagedVolume[] = []): Promise<unknown> =>
  withClusterApi(o, (reader) => readClusterObjects(reader, { nodeName: NODE, staged }));

/** Whatever `p` rejects with; fails when it resolves or takes more than `ms`. */
async function rejection(p: Promise<unknown>, ms: number, what: string): Promise<Error> {
  try {
    await withTimeout(p, ms, what);
  } catch (err) {
    assert.ok(err instanceof Error);
    assert.notEqual(err.name, 'WaitTimeoutError', err.message);
    return err;
  }
  assert.fail(`${what}: resolved`);
}

async function noSocketLeft(api: FakeApiServer): Promise<void> {
  await waitFor(() => api.openSockets() === 0, { what: 'every connection to the API server closed', timeoutMs: 2_000, intervalMs: 10, observe: () => `${api.openSockets()} open` });
}

describe('API requests that time out leave no connection open', () => {
  let dir = '';
  let kubeconfig = '';
  let api: FakeApiServer | undefined;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-api-timeouts-'));
    kubeconfig = path.join(dir, 'kubeconfig');
  });
  afterEach(async () => {
    await api?.close();
    api = undefined;
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a GET whose answer trickles: rejected at the bound, its connection closed', async () => {
    api = await fakeApiServer([], { trickle: () => true, trickleEveryMs: 20 });
    // The bound leaves the server time to take the request on a loaded machine (at 200 ms, a
    // clean-clone CI beside an explorer search saw the GET rejected before the server had it).
    const client = new KubeRestClient({ server: api.url, insecureSkipTLSVerify: false }, { timeoutMs: 1_000 });
    const err = await rejection(client.get(`/api/v1/nodes/${NODE}`), 5_000, 'the trickling GET to be rejected');
    await noSocketLeft(api);
    assert.match(err.message, /no complete answer within 1000 ms/);
    assert.equal(api.requests.length, 1);
  });

  it('the audit\'s reads: a trickling list fails the read naming it, and no connection stays open', async () => {
    api = await fakeApiServer([node(NODE)], { trickle: (req) => (req.url ?? '').startsWith('/api/v1/pods'), trickleEveryMs: 20 });
    await writeKubeconfig(kubeconfig, api.url);
    const err = await rejection(readClusterObjectsFromApi({ kubeconfig, timeoutMs: 300 }), 5_000, 'the audit\'s reads to fail');
    await noSocketLeft(api);
    assert.ok(err instanceof ClusterApiError, String(err));
    assert.match(err.message, /list pods \(fieldSelector spec\.nodeName=node-1\): no complete answer within 300 ms/);
  });

  it('a list that fails (403) aborts the lists still running beside it, long before their own bound', async () => {
    // The list of VolumeAttachments is 3 pages; a page asked for once the list of PVs is running
    // (trickling) is refused: its failure must end the PV list.
    let pvListRunning = false;
    api = await fakeApiServer([node(NODE), ...['a', 'b', 'c'].map((h) => volumeAttachment(LOST.driver, h, `pv-${h}`, 'node-2'))], {
      pageSize: 1,
      trickle: (req) => {
        const pvList = (req.url ?? '').startsWith('/api/v1/persistentvolumes?');
        if (pvList) pvListRunning = true;
        return pvList;
      },
      trickleEveryMs: 20,
      fail: (req) =>
        pvListRunning && (req.url ?? '').startsWith('/apis/storage.k8s.io/v1/volumeattachments?') ? { code: 403, reason: 'Forbidden', message: 'volumeattachments.storage.k8s.io is forbidden' } : undefined,
    });
    await writeKubeconfig(kubeconfig, api.url);
    // The bound of each request is 60 s: only the sibling's failure can end the trickling list in time.
    const read = readClusterObjectsFromApi({ kubeconfig, timeoutMs: 60_000 }, [LOST]);
    const err = await rejection(read, 5_000, 'the reads to fail on the 403');
    assert.match(err.message, /list volumeattachments \(page [23]\): HTTP 403/);
    assert.ok(pvListRunning, 'the list of PVs was running beside it');
    await noSocketLeft(api);
  });

  it('the audit\'s reads share their connections, and none is left open once the read is over', async () => {
    const handles = ['a', 'b', 'c', 'd', 'e', 'f'];
    const objects = [
      node(NODE, { volumesInUse: handles.map((h) => `kubernetes.io/csi/${LOST.driver}^${h}`) }),
      ...handles.flatMap((h) => [
        pod(`app-${h}`, { nodeName: NODE, claims: [`c-${h}`] }),
        claim(`c-${h}`, `pv-${h}`),
        persistentVolume(`pv-${h}`, LOST.driver, h, { namespace: 'default', name: `c-${h}` }),
        volumeAttachment(LOST.driver, h, `pv-${h}`, NODE),
      ]),
    ];
    api = await fakeApiServer(objects);
    await writeKubeconfig(kubeconfig, api.url);
    const staged = handles.map((h): StagedVolume => ({ uniqueName: `kubernetes.io/csi/${LOST.driver}^${h}`, driver: LOST.driver, volumeHandle: h }));
    await readClusterObjectsFromApi({ kubeconfig }, staged);
    // node, pods, 6 claims, 6 PVs, the CSIDriver (404), 6 VolumeAttachments: 21 requests, at most 4 at once.
    assert.equal(api.requests.length, 21);
    assert.ok(api.acceptedSockets() <= 5, `${api.acceptedSockets()} connections for ${api.requests.length} requests`);
    await noSocketLeft(api);
  });

  it('the caller\'s AbortSignal abandons every request at once and closes its connection', async () => {
    api = await fakeApiServer([node(NODE)], { trickle: () => true, trickleEveryMs: 20 });
    await writeKubeconfig(kubeconfig, api.url);
    const stop = new AbortController();
    const read = readClusterObjectsFromApi({ kubeconfig, timeoutMs: 60_000, signal: stop.signal });
    const server = api;
    await waitFor(() => server.requests.length === 1, { what: 'the first request to arrive', timeoutMs: 2_000, intervalMs: 5 });
    stop.abort(new Error('SIGTERM'));
    const err = await rejection(read, 2_000, 'the read to end on abort');
    assert.match(err.message, /get node node-1: abandoned: SIGTERM/);
    await noSocketLeft(api);
  });
});
