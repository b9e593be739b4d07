// ESLint flat config. The engine folders may not touch the outside world directly:
// everything there goes through the ports in src/host (filesystem, mount table, clock, ...).
// The layer rules (who may import whom) are in .dependency-cruiser.cjs, also run by `npm run lint`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const engineFolders = [
  'src/api/**',
  'src/layout/**',
  'src/volume/**',
  'src/volumemanager/**',
  'src/operationexecutor/**',
  'src/mount/**',
  'src/features/**',
  'src/audit/**',
  'src/host/**',
  'src/kubelet/**',
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bin/**'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-confusing-void-expression': 'off',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
    },
  },
  {
    // node:test's describe/it return promises the runner awaits itself.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', {
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
      }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: ['eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['.dependency-cruiser.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, sourceType: 'commonjs', globals: { module: 'writable' } },
  },
  {
    files: engineFolders,
    rules: {
      'no-restricted-imports': ['error', {
        paths: [
          { name: 'node:fs', message: 'engine code reads the world through the FileSystem port (src/host/fs.ts)' },
          { name: 'fs', message: 'engine code reads the world through the FileSystem port (src/host/fs.ts)' },
          { name: 'node:fs/promises', message: 'use the FileSystem port' },
          { name: 'fs/promises', message: 'use the FileSystem port' },
          { name: 'node:child_process', message: 'engine code runs nothing; use the Mounter port' },
          { name: 'child_process', message: 'engine code runs nothing; use the Mounter port' },
          { name: 'node:net', message: 'engine code opens no sockets' },
          { name: 'net', message: 'engine code opens no sockets' },
          { name: 'node:http', message: 'engine code opens no sockets; the agent\'s HTTP server is an adapter' },
          { name: 'http', message: 'engine code opens no sockets' },
          { name: 'node:https', message: 'engine code opens no sockets' },
          { name: 'https', message: 'engine code opens no sockets' },
          { name: 'node:http2', message: 'engine code opens no sockets' },
          { name: 'node:dgram', message: 'engine code opens no sockets' },
          { name: 'node:perf_hooks', message: 'use the Clock port' },
          { name: 'node:worker_threads', message: 'engine code starts nothing' },
          { name: '@grpc/grpc-js', message: 'engine code talks to drivers through the CSI client port' },
        ],
      }],
      'no-restricted-globals': ['error',
        { name: 'setTimeout', message: 'use the Clock port' },
        { name: 'setInterval', message: 'use the Clock port' },
        { name: 'setImmediate', message: 'use the Clock port' },
        { name: 'process', message: 'engine code does not read process state' },
        { name: 'performance', message: 'use the Clock port' },
        { name: 'queueMicrotask', message: 'completions come from the ports; the harness decides when' },
      ],
      'no-restricted-syntax': ['error',
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'new Date() reads the wall clock: use the Clock port (new Date(epochMs) to format is fine)' },
        { selector: "CallExpression[callee.name='Date']", message: 'Date() reads the wall clock: use the Clock port' },
      ],
      'no-restricted-properties': ['error',
        { object: 'Date', property: 'now', message: 'use the Clock port' },
        { object: 'Math', property: 'random', message: 'use an injected Rng' },
        { object: 'crypto', property: 'randomUUID', message: 'use an injected Rng' },
      ],
    },
  },
);
