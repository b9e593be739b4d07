// A fresh root dir starts without an error: the agent creates kubelet's data dirs first.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DATA_DIR_MODE, setupDataDirs } from '../../../src/agent/dataDirs.js';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

describe('setupDataDirs', () => {
  it('creates pods/, plugins/ and plugins_registry/ with mode 0750, after which the first start logs no error', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    for (const d of ['pods', 'plugins', 'plugins_registry']) {
      const st = await node.fs.stat(`${ROOT}/${d}`);
      assert.equal(st.type, 'directory');
      assert.equal(st.mode, DATA_DIR_MODE);
    }
    await node.startKubelet(true);
    await node.steps(3);
    assert.deepEqual(node.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg), []);
  });

  it('without it, the same fresh root logs the missing pods/ dir (what the agent used to do)', async () => {
    const node = new InMemoryNode();
    await node.startKubelet(true);
    assert.ok(node.logger.lines.some((l) => l.severity === 'E'));
  });

  it('leaves existing dirs alone and names the path when a file is in the way', async () => {
    const node = new InMemoryNode();
    node.fs.writeRaw(`${ROOT}/pods/keep/file`, 'x');
    node.fs.writeRaw(`${ROOT}/plugins`, 'not a dir');
    await assert.rejects(setupDataDirs(node.fs, node.layout), /error creating data directory \/var\/lib\/kubelet\/plugins/);
    assert.equal(await node.exists(`${ROOT}/pods/keep/file`), true);
  });
});
