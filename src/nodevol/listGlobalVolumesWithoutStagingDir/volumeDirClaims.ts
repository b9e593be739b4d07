/**
 * nodevol (gate CSIListGlobalVolumesWithoutStagingDir): who is working in a global volume
 * directory (`<driver>/<sha256(handle)>`) of this kubelet life. A MountDevice builds the
 * directory (mkdir, the vol_data.json temp file, its rename); the removal of a leftover the
 * listing found takes it apart (unlink of that temp file, rmdir). Without coordination the
 * removal can unlink the temp file a MountDevice has just written, or rmdir the staging dir it
 * has just made. So the two never overlap on one directory: a removal is skipped (and retried at
 * the next housekeeping pass) while a MountDevice works there, and a MountDevice that arrives
 * while a removal runs waits for it (a handful of file system calls) before it touches anything.
 *
 * In memory, like the operations themselves: a crash ends every claim with the life that held it.
 * Kubelet has no such step (it never removes a leftover volume dir); with the gate off there is no
 * claim at all (the CSI attacher's beginMountDevice hook is absent).
 */
export class VolumeDirClaims {
  /** Volume dir → MountDevice calls working in it (two for one volume never run at once, but count). */
  readonly #mountDevices = new Map<string, number>();
  /** Volume dir → the end of the removal working in it. */
  readonly #removals = new Map<string, Promise<void>>();

  /**
   * For MountDevice: claims `dir` at once when no removal works there (a function that ends the
   * claim), else a promise of the claim, taken when the removal has ended.
   */
  claimForMountDevice(dir: string): (() => void) | Promise<() => void> {
    const removal = this.#removals.get(dir);
    if (removal !== undefined) return removal.then(() => this.claimForMountDevice(dir));
    this.#mountDevices.set(dir, (this.#mountDevices.get(dir) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#mountDevices.get(dir) ?? 1) - 1;
      if (left === 0) this.#mountDevices.delete(dir);
      else this.#mountDevices.set(dir, left);
    };
  }

  /**
   * For the removal of a leftover: claims `dir` unless a MountDevice or another removal works
   * there, in which case it returns undefined and the caller leaves the directory for later.
   */
  tryClaimForRemoval(dir: string): (() => void) | undefined {
    if (this.#mountDevices.has(dir) || this.#removals.has(dir)) return undefined;
    let end!: () => void;
    const removal = new Promise<void>((resolve) => (end = resolve));
    this.#removals.set(dir, removal);
    return () => {
      if (this.#removals.get(dir) === removal) this.#removals.delete(dir);
      end();
    };
  }
}
