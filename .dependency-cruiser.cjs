// The layer rules of nodevol, checked by `npm run lint` (dependency-cruiser). ARCHITECTURE.md's
// layer picture and table are drawn from this file: change both together
// (test/unit/docs/reference.test.ts checks that both name the same layers).
//
// A layer is a list of folders under src/; every file of a folder belongs to its layer. The one
// folder inside another layer's folder, volume/csi/ (the CSI volume plugin, inside the plugin
// framework's volume/), belongs to its own layer, as kubelet's pkg/volume/csi sits on
// pkg/volume. Each layer may import itself and the layers listed in MAY (an ALLOW-list: an
// import no rule below allows fails the lint). Bottom to top:
//
//   api            api/: Kubernetes object types (Pod, PV, PVC, ...) and the schemas of the
//                  objects read from outside (clusterObjects.ts)
//   ports          ports/: FileSystem, Clock, Logger, ClusterView, Mounter/MountTable (with the
//                  mountinfo entry types), the CSI client and registry, the metrics
//   base           layout/ (kubelet's root dir, names, confinement), features/ (gates),
//                  logging/ (klog), mount/ (mountinfo, mount refs), trace/ (the trace formats)
//   csi            csi/: the CSI contract the engine drives: the instrumented client, the node
//                  state machine, the fault model
//   volume         volume/: plugin framework, specs, volume/util
//   volumeCsi      volume/csi/: the CSI volume plugin
//   opexec         operationexecutor/ (owns the ASW updater interfaces, VolumeToMount and the
//                  mount states it writes)
//   volumemanager  volumemanager/: cache < populator, reconciler < volumeManager.ts (see the
//                  forbidden rules)
//   nodevol        nodevol/: nodevol's own gates, one folder each, implementing the hooks the
//                  kubelet copy below declares (the copy never imports them)
//   node           kubelet/ (node housekeeping: orphaned pod dirs, stuck operations), audit/,
//                  agent/ (the agent runtime and the one composition of a node)
//   adapters       adapters/: node (node:fs, mount(8), the cluster), memory, prometheus, grpc
//   mockdriver     mockdriver/: nodevol mock-driver, a CSI driver program over the adapters,
//                  not the engine
//   sim            sim/ (the simulator), timeline/ (its reports)
//   cli            cli/: the nodevol command, may import everything
//
// There are no exceptions: a new import that crosses a layer the wrong way fails the lint, and
// test/unit/layout/layerRules.test.ts checks that it does.
'use strict';

/** The folders under src/ of each layer. */
const LAYERS = {
  api: ['api'],
  ports: ['ports'],
  base: ['layout', 'features', 'logging', 'mount', 'trace'],
  csi: ['csi'],
  volume: ['volume'],
  volumeCsi: ['volume/csi'],
  opexec: ['operationexecutor'],
  volumemanager: ['volumemanager'],
  nodevol: ['nodevol'],
  node: ['kubelet', 'audit', 'agent'],
  adapters: ['adapters'],
  mockdriver: ['mockdriver'],
  sim: ['sim', 'timeline'],
  cli: ['cli'],
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
  nodevol: ['volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  node: ['nodevol', 'volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  adapters: ['csi', 'base', 'ports', 'api'],
  mockdriver: ['adapters', 'csi', 'base', 'ports', 'api'],
  // The simulator runs the agent's node (kubelet/ housekeeping included) over the memory
  // adapters; its generated workloads name volumes as the mock driver does (mockdriver/volumeId.ts).
  sim: ['mockdriver', 'adapters', 'node', 'nodevol', 'volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
  cli: ['sim', 'mockdriver', 'adapters', 'node', 'nodevol', 'volumemanager', 'opexec', 'volumeCsi', 'volume', 'csi', 'base', 'ports', 'api'],
};

/** The engine: the layers up to nodevol's gates, and kubelet/ and audit/ of the node layer (not agent/). */
const ENGINE_LAYERS = ['api', 'ports', 'base', 'csi', 'volume', 'volumeCsi', 'opexec', 'volumemanager', 'nodevol'];
const ENGINE_NODE_FOLDERS = ['kubelet', 'audit'];

const folders = (layers) => layers.flatMap((l) => LAYERS[l]);
/** The regular expression of files in these folders. */
const inFolders = (list) => `^src/(${list.join('|')})/`;
/** The folders of the other layers nested inside these ones (volume/csi inside volume). */
const nestedIn = (list, others) => folders(others).filter((f) => list.some((g) => f.startsWith(`${g}/`)));

/** One allow rule per layer: its files, less the nested folders of other layers, may import these. */
function allowRule(layer) {
  const own = LAYERS[layer];
  const notMine = nestedIn(own, Object.keys(LAYERS).filter((l) => l !== layer));
  const allowedLayers = [layer, ...MAY[layer]];
  const allowed = folders(allowedLayers);
  const refused = nestedIn(allowed, Object.keys(LAYERS).filter((l) => !allowedLayers.includes(l)));
  return {
    comment: `${layer} may import: itself${MAY[layer].length > 0 ? `, ${MAY[layer].join(', ')}` : ''}`,
    from: notMine.length > 0 ? { path: inFolders(own), pathNot: inFolders(notMine) } : { path: inFolders(own) },
    to: refused.length > 0 ? { path: inFolders(allowed), pathNot: inFolders(refused) } : { path: inFolders(allowed) },
  };
}

/** Node built-ins the engine may never import (it talks to the world through the ports). */
const WORLD = '^(node:)?(fs|fs/promises|child_process|net|http|https|http2|dgram|tls|worker_threads|cluster)$';
const ENGINE = inFolders([...folders(ENGINE_LAYERS), ...ENGINE_NODE_FOLDERS]);

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
      to: { path: '^src/volumemanager/', pathNot: '^src/volumemanager/cache/' },
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
    ...Object.keys(LAYERS).map(allowRule),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
