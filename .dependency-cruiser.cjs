// The layer rules of nodevol, checked by `npm run lint` (dependency-cruiser). ARCHITECTURE.md's
// layer picture and table are drawn from this file: change both together
// (test/unit/docs/reference.test.ts checks that both name the same layers).
//
// Each layer may import itself and the layers listed in its `may` (an ALLOW-list: an import not
// allowed by some rule below fails the lint). Bottom to top:
//
//   api        Kubernetes object types (Pod, PV, PVC) and the schemas of the objects read from
//              outside (clusterObjects.ts)
//   ports      the ports: FileSystem, Clock, Logger, ClusterView, Mounter/MountTable (with the
//              mountinfo entry types), CSI client, VolumeManagerMetrics
//   base       layout (kubelet's root dir, names, confinement), features (gates), logging (klog),
//              mount (mountinfo, mount refs), trace (the trace formats: timeline events, the
//              trace file, agent lives, the simulator's trace)
//   csi        CSI contracts beside the engine: types, the instrumented client, the node state machine
//   volume     plugin framework, specs, volume/util
//   volumeCsi  the CSI volume plugin
//   opexec     operationexecutor
//              (owns the ASW updater interfaces, VolumeToMount and the mount states it writes)
//   volumemanager  cache < populator, reconciler < volumeManager.ts (see the forbidden rules)
//   node       kubelet/ (node housekeeping), audit/, agent/
//   adapters   beside the engine: adapters/node, adapters/memory, adapters/prometheus,
//              adapters/grpc
//   mockdriver nodevol mock-driver: a CSI driver program over the adapters, not the engine
//   sim        sim/, timeline/ (the simulator and its reports)
//   cli        the nodevol command: may import everything
//
// There are no exceptions: a new import that crosses a layer the wrong way fails the lint, and
// test/unit/layout/layerRules.test.ts checks that it does.
'use strict';

const L = {
  api: '^src/api/',
  ports: '^src/ports/',
  base: '^src/(layout|features|logging|mount|trace)/',
  csi: '^src/csi/[^/]+\\.ts$',
  volume: '^src/volume/(?!csi/)',
  volumeCsi: '^src/volume/csi/',
  opexec: '^src/operationexecutor/',
  volumemanager: '^src/volumemanager/',
  node: '^src/(kubelet|audit|agent)/',
  adapters: '^src/adapters/',
  mockdriver: '^src/mockdriver/',
  sim: '^src/(sim|timeline)/',
  cli: '^src/cli/',
};

/** Which layers each layer may import (besides itself). */
const MAY = {
  api: [],
  ports: ['api'],
  base: ['ports', 'api'],
  csi: ['base', 'ports', 'api'],
  volume: ['csi', 'base', 'ports', 'api'],
  volumeCsi: ['volume', 'csi', 'base', 'ports', 'api'],
  opexec: ['volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  volumemanager: ['opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  node: ['volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  adapters: ['csi', 'base', 'ports', 'api'],
  mockdriver: ['adapters', 'csi', 'base', 'ports', 'api'],
  // The simulator runs the agent's loops, housekeeping (kubelet/orphanedPodDirs) included; its
  // generated workloads name volumes as the mock driver does (mockdriver/volumeId.ts).
  sim: ['mockdriver', 'adapters', 'node', 'volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  cli: ['sim', 'mockdriver', 'adapters', 'node', 'volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
};

const anyOf = (names) => names.map((n) => `(?:${L[n]})`).join('|');

/** The layer of a path, for rules below (first match wins: volume/csi is volumeCsi, not volume). */
const ORDER = ['api', 'ports', 'adapters', 'mockdriver', 'csi', 'base', 'volumeCsi', 'volume', 'opexec', 'volumemanager', 'node', 'sim', 'cli'];

/** Node built-ins the engine may never import (it talks to the world through the ports). */
const WORLD = '^(node:)?(fs|fs/promises|child_process|net|http|https|http2|dgram|tls|worker_threads|cluster)$';
const ENGINE = anyOf(['api', 'ports', 'csi', 'volume', 'volumeCsi', 'opexec', 'volumemanager']) + '|^src/(layout|features|mount|kubelet|audit)/';

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'No import cycles.', from: {}, to: { circular: true } },
    {
      name: 'engine-uses-ports',
      severity: 'error',
      comment: 'Engine code reads and changes the world only through the ports in src/ports (lint also bans the globals).',
      from: { path: ENGINE },
      to: { dependencyTypes: ['core'], path: WORLD },
    },
    {
      name: 'engine-no-grpc',
      severity: 'error',
      comment: 'Engine code talks to drivers through the CSI client port, never gRPC.',
      from: { path: ENGINE },
      to: { path: '@grpc/' },
    },
    {
      name: 'volumemanager-cache-is-bottom',
      severity: 'error',
      comment: 'The caches only keep books: they import nothing else of the volume manager.',
      from: { path: '^src/volumemanager/cache/' },
      to: { path: '^src/volumemanager/(?!cache/)' },
    },
    {
      name: 'volumemanager-parts-independent',
      severity: 'error',
      comment: 'populator and reconciler do not import each other or volumeManager.ts, which wires them.',
      from: { path: '^src/volumemanager/(populator|reconciler)/' },
      to: { path: '^src/volumemanager/(populator/|reconciler/|volumeManager\\.ts$)', pathNot: '^src/volumemanager/$1/' },
    },
  ],
  allowedSeverity: 'error',
  allowed: [
    { comment: 'npm packages and node built-ins (the engine is restricted by the forbidden rules)', from: {}, to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'core'] } },
    ...ORDER.map((layer) => ({
      comment: `${layer} may import: itself${MAY[layer].length > 0 ? `, ${MAY[layer].join(', ')}` : ''}`,
      from: { path: L[layer], pathNot: anyOf(ORDER.slice(0, ORDER.indexOf(layer)).filter((l) => l !== layer)) },
      to: { path: anyOf([layer, ...MAY[layer]]) },
    })),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
