// What the API client does with the answers that are not a result: 429 and 5xx with Retry-After
// are asked again after the wait the server gave (at least 1 s, at most 10 s, 3 retries), as
// client-go does; a Retry-After that is not a number of seconds, or that asks for longer, is not
// waited for in the run (the longer one is handed to the caller); 401, 403 and 409 are never asked
// again and say what is wrong. Against the fake API server on 127.0.0.1, with the waits recorded
// instead of slept, except where the abort of a real wait is the point.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';

import { ClusterApiError, withClusterApi, type ClusterApiOptions } from '../../../src/adapters/node/clusterApi.js';
import { parseRetryAfterSeconds } from '../../../src/adapters/node/kubeApi.js';
import { readClusterObjects } from '../../../src/audit/clusterReads.js';
import { MAX_RETRY_AFTER_WAIT_MS, nextRunDelayMs } from '../../../src/cli/auditServe.js';
import { node } from '../../support/clusterObjects.js';
import { waitFor, withTimeout } from '../../support/e2e/waitFor.js';
import { fakeApiServer, writeKubeconfig, type FakeApiServer, type StatusAnswer } from '../../support/fakeApiServer.js';

const NODE = 'node-1';
/** The audit's reads of a node with no staged volume, through the API server `o` names. */
const readClusterObjectsFromApi = (o: ClusterApiOptions): Promise<unknown> => withClusterApi(o, (reader) => readClusterObjects(reader, { nodeName: NODE, staged: [] }));
const isNodeGet = (req: IncomingMessage): boolean => (req.url ?? '').startsWith('/api/v1/nodes/');

/** Fails the node GET `times` times (Infinity: always) with `answer`. */
function failNode(answer: StatusAnswer, times = Infinity): (req: IncomingMessage) => StatusAnswer | undefined {
  let n = 0;
  return (req) => (isNodeGet(req) && n++ < times ? answer : undefined);
}

const tooMany = (retryAfter?: string): StatusAnswer => ({ code: 429, reason: 'TooManyRequests', message: 'too many requests, please try again later', ...(retryAfter !== undefined ? { headers: { 'Retry-After': retryAfter } } : {}) });

describe('API answers that are not a result: Retry-After, 401, 403, 409', () => {
  let dir = '';
  let kubeconfig = '';
  let api: FakeApiServer | undefined;
  const waits: number[] = [];
  const recordWait = (ms: number): Promise<void> => {
    waits.push(ms);
    return Promise.resolve();
  };
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-api-retry-'));
    kubeconfig = path.join(dir, 'kubeconfig');
  });
  afterEach(async () => {
    await api?.close();
    api = undefined;
    waits.length = 0;
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(fail: (req: IncomingMessage) => StatusAnswer | undefined): Promise<FakeApiServer> {
    api = await fakeApiServer([node(NODE)], { fail });
    await writeKubeconfig(kubeconfig, api.url);
    return api;
  }
  const nodeGets = (s: FakeApiServer): number => s.requests.filter((r) => r.path === `/api/v1/nodes/${NODE}`).length;
  const read = (): Promise<unknown> => readClusterObjectsFromApi({ kubeconfig, sleep: recordWait });

  it('429 with Retry-After: 2 is asked again after 2 s, and the read succeeds', async () => {
    const s = await serve(failNode(tooMany('2'), 1));
    await read();
    assert.deepEqual(waits, [2000]);
    assert.equal(nodeGets(s), 2);
  });

  it('503 with Retry-After: 0 waits 1 s, never a tight loop', async () => {
    const s = await serve(failNode({ code: 503, reason: 'ServiceUnavailable', message: 'shutting down', headers: { 'Retry-After': '0' } }, 1));
    await read();
    assert.deepEqual(waits, [1000]);
    assert.equal(nodeGets(s), 2);
  });

  it('a server that keeps answering 429 is asked 4 times in all, then the read fails saying so', async () => {
    const s = await serve(failNode(tooMany('1')));
    await assert.rejects(read(), (err: unknown) => {
      assert.ok(err instanceof ClusterApiError);
      assert.match(err.message, /get node node-1: HTTP 429: too many requests, please try again later \(asked 4 times, waiting as Retry-After said\)$/);
      assert.equal(err.retryAfterMs, 1000);
      return true;
    });
    assert.deepEqual(waits, [1000, 1000, 1000]);
    assert.equal(nodeGets(s), 4);
  });

  it('a Retry-After longer than 10 s (or huge) is not waited for in the run: one request, and the caller is told the wait', async () => {
    for (const [value, ms] of [['3600', 3_600_000], ['9999999999', 9_999_999_999_000]] as const) {
      const s = await serve(failNode(tooMany(value)));
      await assert.rejects(read(), (err: unknown) => {
        assert.ok(err instanceof ClusterApiError);
        assert.match(err.message, new RegExp(`HTTP 429: too many requests, please try again later \\(Retry-After ${value} s: longer than the 10 s nodevol waits within one run; not retried\\)$`));
        assert.equal(err.retryAfterMs, ms);
        return true;
      });
      assert.deepEqual(waits, []);
      assert.equal(nodeGets(s), 1);
      await s.close();
    }
  });

  it('a Retry-After that is not a number of seconds, and a 429 without one, are not retried', async () => {
    for (const value of ['soon', 'Wed, 21 Oct 2015 07:28:00 GMT', '-1', '1.5', '12345678901', '', undefined]) {
      const s = await serve(failNode(tooMany(value)));
      await assert.rejects(read(), (err: unknown) => {
        assert.ok(err instanceof ClusterApiError);
        assert.match(err.message, /get node node-1: HTTP 429: too many requests, please try again later$/, `Retry-After ${String(value)}`);
        assert.equal(err.retryAfterMs, undefined);
        return true;
      });
      assert.deepEqual(waits, [], `Retry-After ${String(value)}`);
      assert.equal(nodeGets(s), 1, `Retry-After ${String(value)}`);
      await s.close();
    }
  });

  it('401 and 403 are one request each, never retried, and say that the credentials or their RBAC are wrong', async () => {
    for (const [answer, want] of [
      [{ code: 401, reason: 'Unauthorized', message: 'Unauthorized', headers: { 'Retry-After': '1' } }, /get node node-1: HTTP 401: Unauthorized \(the API server did not accept the credentials: check the kubeconfig's user or the service account token; not retried\)$/],
      [{ code: 403, reason: 'Forbidden', message: 'nodes "node-1" is forbidden: User "system:serviceaccount:kube-system:nodevol" cannot get resource "nodes"', headers: { 'Retry-After': '1' } }, /get node node-1: HTTP 403: nodes "node-1" is forbidden: .* \(the credentials lack the RBAC permission for this request; the audit needs get on nodes.*; not retried\)$/],
    ] as const) {
      const s = await serve(failNode(answer));
      await assert.rejects(read(), (err: unknown) => {
        assert.ok(err instanceof ClusterApiError);
        assert.match(err.message, want);
        assert.equal(err.retryAfterMs, undefined, 'a Retry-After on a refusal does not delay the next run');
        return true;
      });
      assert.deepEqual(waits, []);
      assert.equal(s.requests.length, 1);
      await s.close();
    }
  });

  it('409 on a GET (nodevol writes nothing through the API) is an error, not retried', async () => {
    const s = await serve(failNode({ code: 409, reason: 'Conflict', message: 'conflict', headers: { 'Retry-After': '1' } }));
    await assert.rejects(read(), /get node node-1: HTTP 409: conflict$/);
    assert.deepEqual(waits, []);
    assert.equal(s.requests.length, 1);
  });

  it('a retry wait ends at once when the caller aborts', async () => {
    const s = await serve(failNode(tooMany('9')));
    const stop = new AbortController();
    // The real timer this time: 9 s, which only the abort can cut short.
    const reading = readClusterObjectsFromApi({ kubeconfig, signal: stop.signal });
    await waitFor(() => s.requests.length === 1, { what: 'the first answer', timeoutMs: 2_000, intervalMs: 5 });
    stop.abort(new Error('SIGTERM'));
    await assert.rejects(withTimeout(reading, 2_000, 'the read to end on abort'), /get node node-1: abandoned: SIGTERM/);
    assert.equal(s.requests.length, 1);
  });

  it('Retry-After is read as delta-seconds only', () => {
    assert.equal(parseRetryAfterSeconds('120'), 120);
    assert.equal(parseRetryAfterSeconds(' 7 '), 7);
    for (const v of ['1.5', '-1', 'Fri, 31 Dec 1999 23:59:59 GMT', '', '12345678901', undefined, ['1', '2']]) assert.equal(parseRetryAfterSeconds(v), undefined, String(v));
  });

  it('--interval: the next run waits for a Retry-After longer than the interval, cut at 10 min', () => {
    assert.equal(nextRunDelayMs(60_000, undefined), 60_000);
    assert.equal(nextRunDelayMs(60_000, 5_000), 60_000);
    assert.equal(nextRunDelayMs(60_000, 120_000), 120_000);
    assert.equal(nextRunDelayMs(60_000, 9_999_999_999_000), MAX_RETRY_AFTER_WAIT_MS);
    assert.equal(nextRunDelayMs(3_600_000, 9_999_999_999_000), 3_600_000);
  });
});
