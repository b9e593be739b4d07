import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { register, Registry } from 'prom-client';

import { createVolumeManagerMetrics, METRIC_NAMES, OPERATION_DURATION_BUCKETS_SECONDS } from '../../../src/adapters/prometheus/volumeManagerMetrics.js';
import { noopVolumeManagerMetrics, type VolumeManagerMetrics } from '../../../src/ports/metrics.js';
import { RecordingMetrics } from '../../../src/adapters/memory/recordingMetrics.js';

const BUCKET_LE = ['0.1', '0.25', '0.5', '1', '2.5', '5', '10', '15', '25', '50', '120', '300', '600', '+Inf'];

interface Exposition {
  readonly text: string;
  /** `# TYPE` per metric family. */
  readonly types: ReadonlyMap<string, string>;
  /** `# HELP` per metric family. */
  readonly helps: ReadonlyMap<string, string>;
  /** Sample lines (name{labels} value), in output order. */
  readonly samples: readonly string[];
}

async function render(registry: Registry): Promise<Exposition> {
  const text = await registry.metrics();
  const types = new Map<string, string>();
  const helps = new Map<string, string>();
  const samples: string[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    const help = /^# HELP (\S+) (.*)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    else if (help) helps.set(help[1]!, help[2]!);
    else samples.push(line);
  }
  return { text, types, helps, samples };
}

function samplesOf(e: Exposition, family: string): string[] {
  return e.samples.filter((s) => s === family || s.startsWith(`${family}{`) || s.startsWith(`${family} `) || s.startsWith(`${family}_`));
}

function setup(): { registry: Registry; metrics: VolumeManagerMetrics } {
  const registry = new Registry();
  return { registry, metrics: createVolumeManagerMetrics(registry) };
}

/** The 16 lines prom-client renders for one histogram series holding one observation. */
function oneObservation(family: string, labels: string, seconds: number, sum: string): string[] {
  return [
    ...BUCKET_LE.map(
      (le) => `${family}_bucket{le="${le}",${labels}} ${le === '+Inf' || Number(le) >= seconds ? 1 : 0}`,
    ),
    `${family}_sum{${labels}} ${sum}`,
    `${family}_count{${labels}} 1`,
  ];
}

describe('VolumeManagerMetrics (prom-client)', () => {
  it('registers exactly kubelet\'s metric names, without a kubelet_ prefix, with their types', async () => {
    const { registry } = setup();
    const e = await render(registry);
    assert.deepEqual(
      [...e.types.entries()],
      [
        ['reconstruct_volume_operations_total', 'counter'],
        ['reconstruct_volume_operations_errors_total', 'counter'],
        ['force_cleaned_failed_volume_operations_total', 'counter'],
        ['force_cleaned_failed_volume_operation_errors_total', 'counter'],
        ['storage_operation_duration_seconds', 'histogram'],
        ['csi_operations_seconds', 'histogram'],
        ['volume_manager_total_volumes', 'gauge'],
      ],
    );
    assert.doesNotMatch(e.text, /kubelet_/);
  });

  it('help strings are kubelet\'s, marked [ALPHA]', async () => {
    const { registry } = setup();
    const { helps } = await render(registry);
    assert.equal(
      helps.get('reconstruct_volume_operations_total'),
      '[ALPHA] The number of volumes that were attempted to be reconstructed from the operating system during kubelet startup. This includes both successful and failed reconstruction.',
    );
    assert.equal(
      helps.get('reconstruct_volume_operations_errors_total'),
      '[ALPHA] The number of volumes that failed reconstruction from the operating system during kubelet startup.',
    );
    assert.equal(
      helps.get('force_cleaned_failed_volume_operations_total'),
      '[ALPHA] The number of volumes that were force cleaned after their reconstruction failed during kubelet startup. This includes both successful and failed cleanups.',
    );
    assert.equal(
      helps.get('force_cleaned_failed_volume_operation_errors_total'),
      '[ALPHA] The number of volumes that failed force cleanup after their reconstruction failed during kubelet startup.',
    );
    assert.equal(helps.get('storage_operation_duration_seconds'), '[ALPHA] Storage operation duration');
    assert.equal(
      helps.get('csi_operations_seconds'),
      '[ALPHA] Container Storage Interface operation duration with gRPC error code status total',
    );
    assert.equal(helps.get('volume_manager_total_volumes'), '[ALPHA] Number of volumes in Volume Manager');
  });

  it('before any call: both reconstruct counters (unlabelled, as kubelet\'s) and both force-clean counters read 0, histograms and the gauge are empty', async () => {
    const { registry } = setup();
    const e = await render(registry);
    assert.deepEqual(e.samples, [
      'reconstruct_volume_operations_total 0',
      'reconstruct_volume_operations_errors_total 0',
      'force_cleaned_failed_volume_operations_total 0',
      'force_cleaned_failed_volume_operation_errors_total 0',
    ]);
  });

  it('reconstruction attempts count, and failures also count as errors, with no label (kubelet: plain counters; KEP-6058 adds source at beta)', async () => {
    const { registry, metrics } = setup();
    metrics.reconstructVolumeOperation('pod-local', false);
    metrics.reconstructVolumeOperation('pod-local', true);
    metrics.reconstructVolumeOperation('pod-local', false);
    metrics.reconstructVolumeOperation('global-mount', true);
    const e = await render(registry);
    assert.deepEqual(samplesOf(e, 'reconstruct_volume_operations_total'), ['reconstruct_volume_operations_total 4']);
    assert.deepEqual(samplesOf(e, 'reconstruct_volume_operations_errors_total'), ['reconstruct_volume_operations_errors_total 2']);
    assert.deepEqual(e.samples.filter((l) => l.includes('source=')), []);
  });

  it('force cleanups count, and failed ones also count in the singular-named errors counter', async () => {
    const { registry, metrics } = setup();
    metrics.forceCleanedFailedVolumeOperation(false);
    metrics.forceCleanedFailedVolumeOperation(true);
    metrics.forceCleanedFailedVolumeOperation(false);
    const e = await render(registry);
    assert.deepEqual(samplesOf(e, 'force_cleaned_failed_volume_operations_total'), [
      'force_cleaned_failed_volume_operations_total 3',
    ]);
    assert.deepEqual(samplesOf(e, 'force_cleaned_failed_volume_operation_errors_total'), [
      'force_cleaned_failed_volume_operation_errors_total 1',
    ]);
  });

  it('both histograms use kubelet\'s buckets .1 .25 .5 1 2.5 5 10 15 25 50 120 300 600', () => {
    assert.deepEqual(OPERATION_DURATION_BUCKETS_SECONDS, [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600]);
  });

  it('a storage operation is observed in seconds with volume_plugin, operation_name, status and migrated="false"', async () => {
    const { registry, metrics } = setup();
    metrics.storageOperation('kubernetes.io/csi:ebs.csi.example.com', 'volume_mount', 'success', 300);
    const e = await render(registry);
    assert.deepEqual(
      samplesOf(e, 'storage_operation_duration_seconds'),
      oneObservation(
        'storage_operation_duration_seconds',
        'volume_plugin="kubernetes.io/csi:ebs.csi.example.com",operation_name="volume_mount",status="success",migrated="false"',
        0.3,
        '0.3',
      ),
    );
  });

  it('failed and migrated storage operations get their own series', async () => {
    const { registry, metrics } = setup();
    metrics.storageOperation('kubernetes.io/csi:d', 'unmount_device', 'fail-unknown', 700_000);
    metrics.storageOperation('kubernetes.io/csi:d', 'unmount_device', 'fail-unknown', 1000, true);
    const e = await render(registry);
    const counts = samplesOf(e, 'storage_operation_duration_seconds_count');
    assert.deepEqual(counts, [
      'storage_operation_duration_seconds_count{volume_plugin="kubernetes.io/csi:d",operation_name="unmount_device",status="fail-unknown",migrated="false"} 1',
      'storage_operation_duration_seconds_count{volume_plugin="kubernetes.io/csi:d",operation_name="unmount_device",status="fail-unknown",migrated="true"} 1',
    ]);
    // 700 s lies above the last finite bucket: only +Inf holds it.
    assert.ok(
      e.samples.includes(
        'storage_operation_duration_seconds_bucket{le="600",volume_plugin="kubernetes.io/csi:d",operation_name="unmount_device",status="fail-unknown",migrated="false"} 0',
      ),
    );
    assert.ok(
      e.samples.includes(
        'storage_operation_duration_seconds_bucket{le="+Inf",volume_plugin="kubernetes.io/csi:d",operation_name="unmount_device",status="fail-unknown",migrated="false"} 1',
      ),
    );
  });

  it('a CSI call is observed in seconds with driver_name, method_name, grpc_status_code and migrated="false"', async () => {
    const { registry, metrics } = setup();
    metrics.csiOperation('ebs.csi.example.com', 'NodeUnstageVolume', 'DeadlineExceeded', 1200);
    const e = await render(registry);
    assert.deepEqual(
      samplesOf(e, 'csi_operations_seconds'),
      oneObservation(
        'csi_operations_seconds',
        'driver_name="ebs.csi.example.com",method_name="NodeUnstageVolume",grpc_status_code="DeadlineExceeded",migrated="false"',
        1.2,
        '1.2',
      ),
    );
  });

  it('a duration equal to a bucket boundary falls in that bucket', async () => {
    const { registry, metrics } = setup();
    metrics.csiOperation('d', 'NodeStageVolume', 'OK', 500);
    const e = await render(registry);
    assert.ok(e.samples.includes('csi_operations_seconds_bucket{le="0.25",driver_name="d",method_name="NodeStageVolume",grpc_status_code="OK",migrated="false"} 0'));
    assert.ok(e.samples.includes('csi_operations_seconds_bucket{le="0.5",driver_name="d",method_name="NodeStageVolume",grpc_status_code="OK",migrated="false"} 1'));
  });

  it('setTotalVolumes replaces every series each call, reports an empty plugin as N/A and sums duplicates', async () => {
    const { registry, metrics } = setup();
    metrics.setTotalVolumes([
      { pluginName: 'kubernetes.io/csi:a', state: 'actual_state_of_world', count: 2 },
      { pluginName: 'kubernetes.io/csi:a', state: 'desired_state_of_world', count: 3 },
      { pluginName: 'kubernetes.io/csi:b', state: 'desired_state_of_world', count: 1 },
    ]);
    assert.deepEqual(samplesOf(await render(registry), 'volume_manager_total_volumes'), [
      'volume_manager_total_volumes{plugin_name="kubernetes.io/csi:a",state="actual_state_of_world"} 2',
      'volume_manager_total_volumes{plugin_name="kubernetes.io/csi:a",state="desired_state_of_world"} 3',
      'volume_manager_total_volumes{plugin_name="kubernetes.io/csi:b",state="desired_state_of_world"} 1',
    ]);

    metrics.setTotalVolumes([
      { pluginName: '', state: 'actual_state_of_world', count: 1 },
      { pluginName: '', state: 'actual_state_of_world', count: 4 },
      { pluginName: 'kubernetes.io/csi:a', state: 'desired_state_of_world', count: 0 },
    ]);
    assert.deepEqual(samplesOf(await render(registry), 'volume_manager_total_volumes'), [
      'volume_manager_total_volumes{plugin_name="N/A",state="actual_state_of_world"} 5',
      'volume_manager_total_volumes{plugin_name="kubernetes.io/csi:a",state="desired_state_of_world"} 0',
    ]);

    metrics.setTotalVolumes([]);
    assert.deepEqual(samplesOf(await render(registry), 'volume_manager_total_volumes'), []);
  });

  it('registering twice in one registry is refused', () => {
    const { registry } = setup();
    assert.throws(() => createVolumeManagerMetrics(registry), /already been registered/);
  });
});

describe('noopVolumeManagerMetrics and RecordingMetrics', () => {
  it('the no-op port accepts every call, returns nothing and exposes nothing in the default registry', async () => {
    const before = await register.metrics();
    const results: unknown[] = [
      noopVolumeManagerMetrics.reconstructVolumeOperation('pod-local', true),
      noopVolumeManagerMetrics.forceCleanedFailedVolumeOperation(true),
      noopVolumeManagerMetrics.storageOperation('p', 'volume_mount', 'success', 1),
      noopVolumeManagerMetrics.csiOperation('d', 'NodeStageVolume', 'OK', 1),
      noopVolumeManagerMetrics.setTotalVolumes([{ pluginName: 'p', state: 'actual_state_of_world', count: 3 }]),
    ];
    assert.deepEqual(results, [undefined, undefined, undefined, undefined, undefined]);
    const after = await register.metrics();
    assert.equal(after, before);
    for (const name of Object.values(METRIC_NAMES)) assert.equal(after.includes(name), false, `${name} leaked into the default registry`);
    assert.deepEqual(Object.keys(noopVolumeManagerMetrics).sort(), [
      'csiOperation', 'forceCleanedFailedVolumeOperation', 'reconstructVolumeOperation', 'setTotalVolumes', 'storageOperation',
    ]);
  });

  it('the recording port records every call in order, with migrated defaulting to false and counts copied', () => {
    const rec = new RecordingMetrics();
    const counts = [{ pluginName: 'kubernetes.io/csi:a', state: 'actual_state_of_world' as const, count: 1 }];
    rec.reconstructVolumeOperation('global-mount', false);
    rec.forceCleanedFailedVolumeOperation(true);
    rec.storageOperation('kubernetes.io/csi:a', 'volume_unmount', 'fail-unknown', 42);
    rec.csiOperation('a', 'NodeUnpublishVolume', 'OK', 7);
    rec.setTotalVolumes(counts);
    counts[0]!.count = 99;
    assert.deepEqual(rec.events, [
      { kind: 'reconstructVolumeOperation', source: 'global-mount', failed: false },
      { kind: 'forceCleanedFailedVolumeOperation', failed: true },
      {
        kind: 'storageOperation', volumePlugin: 'kubernetes.io/csi:a', operationName: 'volume_unmount',
        status: 'fail-unknown', durationMs: 42, migrated: false,
      },
      { kind: 'csiOperation', driverName: 'a', methodName: 'NodeUnpublishVolume', grpcStatusCode: 'OK', durationMs: 7 },
      { kind: 'setTotalVolumes', counts: [{ pluginName: 'kubernetes.io/csi:a', state: 'actual_state_of_world', count: 1 }] },
    ]);
    assert.deepEqual(rec.ofKind('csiOperation').map((e) => e.methodName), ['NodeUnpublishVolume']);
  });
});
