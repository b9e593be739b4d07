// The small API client that replaced @kubernetes/client-node: kubeconfig fields as kubectl reads
// them, TLS (CA file and data, client certificates, insecure-skip-tls-verify, tls-server-name)
// against a real HTTPS server with certificates made by openssl, tokens, the in-cluster config,
// and the list answers (continue tokens under both names). Skipped without openssl.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';

import { coreV1Api, KubeApiError, KubeConfigError, KubeRestClient, loadInCluster, loadKubeconfig } from '../../../src/adapters/node/kubeApi.js';

const hasOpenssl = spawnSync('openssl', ['version']).status === 0;

interface Seen {
  readonly url: string;
  readonly authorization: string | undefined;
  readonly clientCN: string | undefined;
}

describe('kubeApi: kubeconfig, TLS and tokens against an HTTPS server', { skip: hasOpenssl ? undefined : 'openssl (Debian package openssl) is needed to make the test certificates' }, () => {
  let dir = '';
  let url = '';
  const seen: Seen[] = [];
  let close: () => Promise<void> = () => Promise.resolve();
  const file = (name: string): string => path.join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'nodevol-kubeapi-'));
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test-ca');
    openssl('req', '-x509', ...ec, '-keyout', 'other-ca.key', '-out', 'other-ca.crt', '-days', '2', '-subj', '/CN=other-ca');
    writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:kube.example\nextendedKeyUsage=serverAuth\n');
    openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=kube-apiserver');
    openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext');
    writeFileSync(file('client.ext'), 'extendedKeyUsage=clientAuth\n');
    openssl('req', ...ec, '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=nodevol-audit');
    openssl('x509', '-req', '-in', 'client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.crt', '-days', '2', '-extfile', 'client.ext');

    const server = createServer(
      { key: readFileSync(file('server.key')), cert: readFileSync(file('server.crt')), ca: readFileSync(file('ca.crt')), requestCert: true, rejectUnauthorized: false },
      (req: IncomingMessage, res: ServerResponse) => {
        const socket = req.socket;
        const tls = socket instanceof TLSSocket ? socket : undefined;
        const peer = tls?.getPeerCertificate();
        const authorized = tls?.authorized === true && peer !== undefined;
        seen.push({ url: req.url ?? '', authorization: req.headers.authorization, clientCN: authorized ? String(peer.subject.CN) : undefined });
        const u = new URL(req.url ?? '/', 'https://x');
        const send = (code: number, body: unknown): void => {
          res.writeHead(code, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
        };
        if (u.pathname === '/prefix/api/v1/nodes/node-1' || u.pathname === '/api/v1/nodes/node-1') return send(200, { kind: 'Node', apiVersion: 'v1', metadata: { name: 'node-1' } });
        if (u.pathname === '/api/v1/pods') {
          const page = u.searchParams.get('continue');
          return send(200, { kind: 'PodList', apiVersion: 'v1', metadata: page === null ? { continue: 'page-2', remainingItemCount: 1 } : {}, items: [{ metadata: { name: page ?? 'first' } }] });
        }
        if (u.pathname === '/apis/storage.k8s.io/v1/csidrivers') return send(200, { kind: 'CSIDriverList', metadata: {} });
        return send(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: `${u.pathname} not found`, reason: 'NotFound', code: 404 });
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  });
  after(async () => {
    await close();
    rmSync(dir, { recursive: true, force: true });
  });

  const kubeconfig = (cluster: string, user: string, name = 'kubeconfig'): string => {
    const p = file(name);
    writeFileSync(
      p,
      `apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n` +
        `clusters:\n- name: k\n  cluster:\n${cluster.replace(/^/gm, '    ')}\nusers:\n- name: u\n  user:\n${user.replace(/^/gm, '    ')}\n`,
    );
    return p;
  };
  const b64 = (name: string): string => readFileSync(file(name)).toString('base64');

  it('a CA file and client certificate files relative to the kubeconfig: the server sees the client certificate', async () => {
    const cfg = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: ca.crt`, 'client-certificate: client.crt\nclient-key: client.key'));
    const node = await coreV1Api(new KubeRestClient(cfg)).readNode({ name: 'node-1' });
    assert.deepEqual(node, { kind: 'Node', apiVersion: 'v1', metadata: { name: 'node-1' } });
    assert.equal(seen.at(-1)?.clientCN, 'nodevol-audit');
    assert.equal(seen.at(-1)?.authorization, undefined);
  });

  it('the -data forms and a bearer token; a server path prefix is kept', async () => {
    const cfg = await loadKubeconfig(kubeconfig(`server: ${url}/prefix/\ncertificate-authority-data: ${b64('ca.crt')}`, `client-certificate-data: ${b64('client.crt')}\nclient-key-data: ${b64('client.key')}\ntoken: t0k3n`));
    await coreV1Api(new KubeRestClient(cfg)).readNode({ name: 'node-1' });
    assert.deepEqual(seen.at(-1), { url: '/prefix/api/v1/nodes/node-1', authorization: 'Bearer t0k3n', clientCN: 'nodevol-audit' });
  });

  it('a server certificate from another CA is refused; insecure-skip-tls-verify accepts it', async () => {
    const strict = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: other-ca.crt`, 'token: x'));
    await assert.rejects(coreV1Api(new KubeRestClient(strict)).readNode({ name: 'node-1' }), /certificate/i);
    const insecure = await loadKubeconfig(kubeconfig(`server: ${url}\ninsecure-skip-tls-verify: true`, 'token: x'));
    await coreV1Api(new KubeRestClient(insecure)).readNode({ name: 'node-1' });
  });

  it('tls-server-name checks the certificate against that name instead of the URL host', async () => {
    const wrong = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: ca.crt\ntls-server-name: not-kube.example`, 'token: x'));
    await assert.rejects(coreV1Api(new KubeRestClient(wrong)).readNode({ name: 'node-1' }), /not-kube\.example|altnames|certificate/i);
    const right = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: ca.crt\ntls-server-name: kube.example`, 'token: x'));
    await coreV1Api(new KubeRestClient(right)).readNode({ name: 'node-1' });
  });

  it('tokenFile is read again for every request (a rotated token is used at once)', async () => {
    writeFileSync(file('token'), 'one\n');
    const cfg = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: ca.crt`, 'tokenFile: token'));
    const core = coreV1Api(new KubeRestClient(cfg));
    await core.readNode({ name: 'node-1' });
    assert.equal(seen.at(-1)?.authorization, 'Bearer one');
    writeFileSync(file('token'), 'two\n');
    await core.readNode({ name: 'node-1' });
    assert.equal(seen.at(-1)?.authorization, 'Bearer two');
  });

  it('username and password are basic auth', async () => {
    const cfg = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: ca.crt`, 'username: admin\npassword: s3cret'));
    await coreV1Api(new KubeRestClient(cfg)).readNode({ name: 'node-1' });
    assert.equal(seen.at(-1)?.authorization, `Basic ${Buffer.from('admin:s3cret').toString('base64')}`);
  });

  it('a 404 is an error a caller can tell apart', async () => {
    const cfg = await loadKubeconfig(kubeconfig(`server: ${url}\ncertificate-authority: ca.crt`, 'token: x'));
    const client = new KubeRestClient(cfg);
    const notFound = await coreV1Api(client).readNamespacedPersistentVolumeClaim({ name: 'c', namespace: 'ns' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(notFound instanceof KubeApiError);
    assert.equal(notFound.code, 404);
    assert.match(notFound.body, /"reason":"NotFound"/);
  });
});

describe('kubeApi: kubeconfigs it refuses, by file and field', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'nodevol-kubeconfig-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const load = (text: string): Promise<unknown> => {
    const p = path.join(dir, 'kubeconfig');
    writeFileSync(p, text);
    return loadKubeconfig(p);
  };
  const base = (user: string, cluster = 'server: https://127.0.0.1:6443'): string =>
    `current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {${cluster}}\nusers:\n- name: u\n  user: {${user}}\n`;

  for (const [what, text, want] of [
    ['an exec credential plugin', base('exec: {command: aws}'), /users\[name=u\]\.user\.exec: exec credential plugins are not supported/],
    ['an auth-provider', base('auth-provider: {name: gcp}'), /users\[name=u\]\.user\.auth-provider: auth-provider plugins are not supported/],
    ['impersonation', base('token: x, as: admin'), /users\[name=u\]\.user\.as: impersonation is not supported/],
    ['a proxy', base('token: x', 'server: https://h, proxy-url: http://p:3128'), /clusters\[name=k\]\.cluster\.proxy-url: a proxy is not supported/],
    ['no current-context', 'clusters: []\n', /current-context: not set/],
    ['a current-context naming no context', 'current-context: x\ncontexts: []\n', /contexts: no entry named "x"/],
    ['a server that is not a URL', base('token: x', 'server: "not a url"'), /clusters\[name=k\]\.cluster\.server: not a URL/],
    ['a CA file that is not there', base('token: x', 'server: https://h, certificate-authority: nope.crt'), /clusters\[name=k\]\.cluster\.certificate-authority: .*ENOENT.*nope\.crt/],
    ['a client certificate without its key', base('client-certificate-data: eA=='), /client-certificate and client-key go together/],
    ['YAML that is not a map', '- a\n- b\n', /not a kubeconfig/],
  ] as const) {
    it(what, async () => {
      await assert.rejects(load(text), (err: unknown) => err instanceof KubeConfigError && want.test(err.message));
    });
  }

  it('in a pod: the service account CA and token file, the server from the environment (IPv6 in brackets)', async () => {
    writeFileSync(path.join(dir, 'ca.crt'), 'CA');
    const cfg = await loadInCluster({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, dir);
    assert.equal(cfg.server, 'https://[fd00::1]:443');
    assert.equal(cfg.ca?.toString(), 'CA');
    assert.equal(cfg.tokenFile, path.join(dir, 'token'));
    await assert.rejects(loadInCluster({}, dir), /not in a pod/);
  });
});
