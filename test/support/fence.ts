/**
 * A fence around one kubelet life's ports, for the in-memory harness (the simulator's fenced
 * ports, without its numbering and scheduling): once the life is crashed, no call it makes has any
 * effect and no call it made settles. A call already inside a port when the crash comes runs to
 * its end there (an in-memory fs or mount operation, or a CSI call at the driver: the real world),
 * but its caller never hears back, so nothing the dead life would do next happens.
 */
export class Life {
  #alive = true;

  get alive(): boolean {
    return this.#alive;
  }

  crash(): void {
    this.#alive = false;
  }

  /**
   * `port` behind this life's fence: every method call goes through {@link Life.call}; a method
   * that returns an object to call further (a CSI driver registry's client) returns it fenced
   * too. Properties that are not functions are read as they are.
   */
  fence<T extends object>(port: T): T {
    return new Proxy(port, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]): unknown => this.call(() => (value as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
  }

  /** Runs `f` while alive; its promise settles only if the life is still alive by then. */
  call(f: () => unknown): unknown {
    if (!this.#alive) return new Promise<never>(() => undefined);
    const result = f();
    if (result instanceof Promise) {
      return new Promise((resolve, reject) => {
        result.then(
          (v: unknown) => {
            if (this.#alive) resolve(v);
          },
          (err: unknown) => {
            if (this.#alive) reject(err instanceof Error ? err : new Error(String(err)));
          },
        );
      });
    }
    if (result !== null && typeof result === 'object') return this.fence(result);
    return result;
  }
}
