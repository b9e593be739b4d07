// VolumeDirClaims: a removal of a leftover volume dir and a MountDevice never work in one
// directory at once (gate CSIListGlobalVolumesWithoutStagingDir's housekeeping retry).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VolumeDirClaims } from '../../../src/nodevol/listGlobalVolumesWithoutStagingDir/volumeDirClaims.js';

const DIR = '/var/lib/kubelet/plugins/kubernetes.io/csi/a/0f';
const OTHER = '/var/lib/kubelet/plugins/kubernetes.io/csi/a/1e';

/** Whether nothing works in `dir`: a removal may claim it (the claim is ended at once). */
function isFree(claims: VolumeDirClaims, dir: string): boolean {
  const end = claims.tryClaimForRemoval(dir);
  end?.();
  return end !== undefined;
}

describe('VolumeDirClaims', () => {
  it('a MountDevice claims a free dir at once (no promise, so no extra turn)', () => {
    const claims = new VolumeDirClaims();
    const release = claims.claimForMountDevice(DIR);
    assert.equal(typeof release, 'function');
    assert.equal(isFree(claims, DIR), false);
    if (typeof release === 'function') release();
    assert.equal(isFree(claims, DIR), true);
  });

  it('a removal is refused while a MountDevice works in the dir, and granted once it is done', () => {
    const claims = new VolumeDirClaims();
    const release = claims.claimForMountDevice(DIR);
    assert.equal(claims.tryClaimForRemoval(DIR), undefined);
    assert.notEqual(claims.tryClaimForRemoval(OTHER), undefined, 'another dir is free');
    if (typeof release === 'function') release();
    assert.notEqual(claims.tryClaimForRemoval(DIR), undefined);
  });

  it('a second removal of the same dir is refused while the first runs', () => {
    const claims = new VolumeDirClaims();
    const end = claims.tryClaimForRemoval(DIR);
    assert.notEqual(end, undefined);
    assert.equal(claims.tryClaimForRemoval(DIR), undefined);
    end?.();
    assert.notEqual(claims.tryClaimForRemoval(DIR), undefined);
  });

  it('a MountDevice that arrives while a removal runs gets its claim only after the removal ended', async () => {
    const claims = new VolumeDirClaims();
    const end = claims.tryClaimForRemoval(DIR);
    const order: string[] = [];
    const claim = claims.claimForMountDevice(DIR);
    assert.ok(claim instanceof Promise);
    const granted = Promise.resolve(claim).then((release) => {
      order.push('mount device');
      return release;
    });
    await Promise.resolve();
    order.push('removal ends');
    end?.();
    const release = await granted;
    assert.deepEqual(order, ['removal ends', 'mount device']);
    assert.equal(claims.tryClaimForRemoval(DIR), undefined, 'the MountDevice now holds it');
    release();
    assert.equal(isFree(claims, DIR), true);
  });

  it('two MountDevice claims of one dir both hold it until the last is released; a release twice counts once', () => {
    const claims = new VolumeDirClaims();
    const a = claims.claimForMountDevice(DIR);
    const b = claims.claimForMountDevice(DIR);
    if (typeof a !== 'function' || typeof b !== 'function') throw new Error('expected immediate claims');
    a();
    a();
    assert.equal(claims.tryClaimForRemoval(DIR), undefined);
    b();
    assert.equal(isFree(claims, DIR), true);
  });

  it("a removal's end called again after a later removal claimed the dir leaves that later claim in place", () => {
    const claims = new VolumeDirClaims();
    const first = claims.tryClaimForRemoval(DIR);
    first?.();
    const second = claims.tryClaimForRemoval(DIR);
    assert.notEqual(second, undefined);
    first?.();
    assert.equal(claims.tryClaimForRemoval(DIR), undefined, 'the second removal still holds it');
    assert.equal(claims.claimForMountDevice(DIR) instanceof Promise, true, 'a MountDevice waits for the second removal');
    second?.();
    assert.equal(isFree(claims, DIR), true);
  });
});
