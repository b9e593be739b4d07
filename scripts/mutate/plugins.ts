/**
 * The two StrykerJS plugins of `npm run mutate` (loaded from dist/ by stryker.config.mjs):
 *
 * - `ordered-tap`, the tap runner that runs the killers in the order the config lists them
 *   (cheapest first: the unit tests, then the built-in scenarios, then the generated workloads).
 *   Stryker runs the tests covering a mutant in dry-run order and stops at the first that fails;
 *   the stock tap runner's dry run takes its glob's order, this one the config's list.
 * - `log-text`, an ignorer: every mutant inside the arguments of a logger call (`info`, `warning`
 *   or `error` on a `log`/`logger`, or on its `.v(n)`) changes only the line logged, never a
 *   decision, so it is left out of the score (docs/benchmarks.md, "Mutation score").
 */
import type { StrykerOptions } from '@stryker-mutator/api/core';
import type { Ignorer, NodePath } from '@stryker-mutator/api/ignore';
import type { Logger } from '@stryker-mutator/api/logging';
import { commonTokens, declareFactoryPlugin, declareValuePlugin, PluginKind, tokens, type Injector, type PluginContext } from '@stryker-mutator/api/plugin';
import { DryRunStatus, type DryRunOptions, type DryRunResult } from '@stryker-mutator/api/test-runner';
import { TapTestRunner } from '@stryker-mutator/tap-runner';

/** The `tap.testFiles` option: here a list of files, in the order to run them. */
export function tapTestFiles(options: StrykerOptions): string[] {
  const tap: unknown = options['tap'];
  if (typeof tap !== 'object' || tap === null || !('testFiles' in tap) || !Array.isArray(tap.testFiles)) throw new Error('ordered-tap: tap.testFiles must be a list of test files');
  return tap.testFiles.map((f: unknown) => {
    if (typeof f !== 'string') throw new Error(`ordered-tap: tap.testFiles holds ${JSON.stringify(f)}, not a file name`);
    return f;
  });
}

class OrderedTapRunner extends TapTestRunner {
  readonly #files: string[];
  constructor(options: StrykerOptions, log: Logger, globalNamespace: '__stryker__' | '__stryker2__') {
    super(options, log, globalNamespace);
    this.#files = tapTestFiles(options);
  }
  override async dryRun(options: DryRunOptions): Promise<DryRunResult> {
    const result = await super.dryRun({ ...options, testFiles: options.testFiles ?? this.#files });
    if (result.status !== DryRunStatus.Complete) return result;
    return { ...result, tests: result.tests.map((t) => (t.fileName === undefined ? t : { ...t, fileName: sourceOfTestFile(t.fileName) })) };
  }
}

/**
 * The TypeScript source of a built killer (`…/dist/test/x.test.js` → `…/test/x.test.ts`), the name
 * a test's file is reported under. StrykerJS's incremental mode diffs each test file's source
 * against the last run's, looking it up among the project's files: `dist/` is not one of them
 * (ignored: the sandbox builds its own), so under the built name every killer looked deleted and
 * every mutant ran again. A name outside `dist/test/` is returned as it is.
 */
export function sourceOfTestFile(fileName: string): string {
  const m = /^(.*?)(^|[/\\])dist[/\\](test[/\\].*)\.js$/.exec(fileName);
  return m === null ? fileName : `${m[1] ?? ''}${m[2] ?? ''}${m[3] ?? ''}.ts`;
}

function createOrderedTapRunner(injector: Injector<PluginContext>): OrderedTapRunner {
  return injector.provideValue('globalNamespace', '__stryker__' as const).injectClass(OrderedTapRunner);
}
createOrderedTapRunner.inject = tokens(commonTokens.injector);

/** The part of a Babel node the ignorer reads. */
interface Node {
  readonly type: string;
  readonly name?: unknown;
  readonly callee?: Node;
  readonly object?: Node;
  readonly property?: Node;
  readonly computed?: unknown;
}

const LOG_METHODS = new Set(['info', 'warning', 'error']);
const LOGGER_NAMES = new Set(['log', 'logger']);

function isNode(x: unknown): x is Node {
  return typeof x === 'object' && x !== null && typeof (x as { type?: unknown }).type === 'string';
}

function propertyName(member: Node): string | undefined {
  return member.computed !== true && member.property?.type === 'Identifier' && typeof member.property.name === 'string' ? member.property.name : undefined;
}

/** `log`, `logger`, `x.log`, `x.logger`, or any of those `.v(n)`. */
export function isLogger(n: Node | undefined): boolean {
  if (n === undefined) return false;
  if (n.type === 'Identifier') return typeof n.name === 'string' && LOGGER_NAMES.has(n.name);
  if (n.type === 'MemberExpression' || n.type === 'OptionalMemberExpression') return LOGGER_NAMES.has(propertyName(n) ?? '');
  if ((n.type === 'CallExpression' || n.type === 'OptionalCallExpression') && n.callee !== undefined && (n.callee.type === 'MemberExpression' || n.callee.type === 'OptionalMemberExpression')) {
    return propertyName(n.callee) === 'v' && isLogger(n.callee.object);
  }
  return false;
}

/** Whether a node is a logger call whose arguments are only the line it logs. */
export function isLogCall(node: unknown): boolean {
  if (!isNode(node) || (node.type !== 'CallExpression' && node.type !== 'OptionalCallExpression')) return false;
  const callee = node.callee;
  if (callee === undefined || (callee.type !== 'MemberExpression' && callee.type !== 'OptionalMemberExpression')) return false;
  return LOG_METHODS.has(propertyName(callee) ?? '') && isLogger(callee.object);
}

export const logTextIgnorer: Ignorer = {
  shouldIgnore(path: NodePath): string | undefined {
    return isLogCall((path as { node?: unknown }).node) ? 'log text: the arguments of a logger call change only the line logged' : undefined;
  },
};

export const strykerPlugins = [declareFactoryPlugin(PluginKind.TestRunner, 'ordered-tap', createOrderedTapRunner), declareValuePlugin(PluginKind.Ignore, 'log-text', logTextIgnorer)];
