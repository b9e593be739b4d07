/**
 * Loads an npm package that is imported on demand (prom-client for `-o prom`, yaml for
 * `-o yaml` and the kubeconfig): what `await import(specifier)` does.
 *
 * Why not `import()` itself: bin/nodevol.js runs the CLI bundle as a classic script compiled from
 * a V8 code cache (scripts/bundle.ts), and on Node 20 an `import()` inside code deserialized from
 * a code cache fails ("A dynamic import callback was not specified"), whatever
 * importModuleDynamically says. The launcher therefore hands the bundle its own `import()` as
 * `__nodevolImport`, a parameter of the function the bundle runs in; the compiled modules in
 * dist/src/ (NODEVOL_BUNDLE=0, tests) have no such parameter and import directly.
 */
declare const __nodevolImport: ((specifier: string) => Promise<unknown>) | undefined;

/** `import(specifier)`, typed by the caller: `importExternal<typeof import('yaml')>('yaml')`. */
export async function importExternal<Module>(specifier: string): Promise<Module> {
  const viaLauncher = typeof __nodevolImport === 'function' ? __nodevolImport : undefined;
  return (await (viaLauncher !== undefined ? viaLauncher(specifier) : import(specifier))) as Module;
}
