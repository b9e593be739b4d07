import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderTimelineHtml } from '../../../src/timeline/html.js';
import { CRASH_LINE_PX, layoutTimeline, textWidth } from '../../../src/timeline/layout.js';
import type { TraceEvent } from '../../../src/trace/events.js';
import { renderSideBySide } from '../../../src/timeline/terminal.js';
import { storyOneRuns } from '../../support/timelineFixture.js';

describe('timeline layout', () => {
  it('runs share their step columns, and step N starts at the same x in each', () => {
    const layout = layoutTimeline(storyOneRuns());
    assert.deepEqual(layout.columns.map((c) => c.index), [0, 1, 2, 3]);
    for (let i = 1; i < layout.columns.length; i++) {
      const prev = layout.columns[i - 1]!;
      assert.equal(layout.columns[i]!.x, prev.x + prev.width);
    }
    assert.equal(layout.runs.length, 2);
  });

  it('each violation sits in the column of the step it happened in', () => {
    const layout = layoutTimeline(storyOneRuns());
    const off = layout.runs[0]!;
    assert.deepEqual(off.violations.map((v) => [v.invariant, v.stepIndex]), [['in-use-reported', 2], ['converges', 3]]);
    for (const v of off.violations) {
      const col = layout.columns.find((c) => c.index === v.stepIndex)!;
      assert.ok(v.x >= col.x && v.x < col.x + col.width, `${v.invariant} at x=${v.x} outside column ${JSON.stringify(col)}`);
    }
    assert.deepEqual(layout.runs[1]!.violations, []);
  });

  it('a call with no answer is drawn pending until the crash that ended it; items in a lane never overlap', () => {
    const layout = layoutTimeline(storyOneRuns());
    const csi = layout.runs[0]!.lanes.find((l) => l.id === 'csi')!;
    const unstage = csi.rows.flat().find((i) => i.label.startsWith('UnstageVolume'))!;
    assert.equal(unstage.tone, 'pending');
    assert.match(unstage.label, /no answer/);
    for (const lane of layout.runs[0]!.lanes) {
      for (const row of lane.rows) {
        for (let i = 1; i < row.length; i++) assert.ok(row[i]!.x >= row[i - 1]!.x + row[i - 1]!.width, `${lane.id}: overlap`);
      }
    }
  });
});

describe('timeline layout: labels and lines', () => {
  it('no crash line crosses a label: the reboot moves right of "UnstageVolume vol-1 (no answer)", whose box ends before the line', () => {
    const layout = layoutTimeline(storyOneRuns());
    for (const run of layout.runs) {
      const reboot = run.markers.find((m) => m.crash === 'reboot')!;
      const lineLeft = reboot.x - CRASH_LINE_PX;
      const unstage = run.lanes.find((l) => l.id === 'csi')!.rows.flat().find((i) => i.label === 'UnstageVolume vol-1 (no answer)')!;
      assert.ok(unstage.x + unstage.width < lineLeft, `box ${unstage.x}+${unstage.width} reaches the line at ${lineLeft}`);
      for (const lane of run.lanes) {
        for (const item of [...lane.rows.flat(), ...lane.summary]) {
          if (item.x < reboot.x) assert.ok(item.x + textWidth(item.label) < lineLeft, `${lane.id}: "${item.label}" at ${item.x} runs into the line at ${lineLeft}`);
        }
      }
    }
    // The room is made at the end of the step before the reboot, so both runs keep their columns.
    const reboots = layout.runs.map((r) => r.markers[0]?.x);
    assert.equal(reboots[0], reboots[1]);
    const rebootColumn = layout.columns.find((c) => c.label === 'reboot')!;
    assert.ok(reboots[0]! >= rebootColumn.x && reboots[0]! < rebootColumn.x + rebootColumn.width);
  });

  it('a crash in the middle of a step gets its room before its own slot', () => {
    const events: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 'one step' },
      { kind: 'csi', t: 10, method: 'NodeUnstageVolume', volumeId: 'a-rather-long-volume-handle', outcome: 'sent' },
      { kind: 'crash', t: 20, crash: 'restart' },
      { kind: 'mount', t: 30, action: 'mount', target: '/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount' },
    ];
    const run = layoutTimeline([{ label: 'r', events }]).runs[0]!;
    const call = run.lanes.find((l) => l.id === 'csi')!.rows.flat()[0]!;
    const line = run.markers[0]!.x - CRASH_LINE_PX;
    assert.ok(call.x + textWidth(call.label) < line, `"${call.label}" at ${call.x} and the line at ${line}`);
    assert.ok(call.x + call.width < line);
    const mount = run.lanes.find((l) => l.id === 'mounts')!.rows.flat()[0]!;
    assert.ok(mount.x >= run.markers[0]!.x, 'what follows the crash stays right of its line');
  });

  it('labels every box: routine NodeGetCapabilities calls at one instant are one box, "GetCaps ×3"', () => {
    const caps = (t: number): TraceEvent => ({ kind: 'csi', t, end: t, method: 'NodeGetCapabilities', volumeId: '', outcome: 'OK', request: {} });
    const layout = layoutTimeline([{ label: 'r', events: [{ kind: 'step', t: 0, index: 0, label: 's' }, caps(5), caps(5), caps(5), caps(9), { kind: 'csi', t: 9, end: 9, method: 'NodeGetInfo', volumeId: '', outcome: 'OK' }] }]);
    const items = layout.runs[0]!.lanes.find((l) => l.id === 'csi')!.rows.flat();
    assert.deepEqual(items.map((i) => i.label).sort(), ['GetCaps', 'GetCaps ×3', 'GetInfo']);
    assert.match(items.find((i) => i.label === 'GetCaps ×3')!.tip, /^3 calls at this instant:/);
    for (const run of layoutTimeline(storyOneRuns()).runs) for (const lane of run.lanes) for (const item of [...lane.rows.flat(), ...lane.summary]) assert.notEqual(item.label.trim(), '', `${lane.id}: a box with no label`);
  });

  it('draws a collapsed lane as labelled boxes counting its changes, none overlapping the next', () => {
    const mkdir = (t: number, n: number): TraceEvent => ({ kind: 'file', t, action: 'mkdir', path: `/var/lib/kubelet/pods/p${n}` });
    const events: TraceEvent[] = [
      { kind: 'step', t: 0, index: 0, label: 's0' },
      ...Array.from({ length: 9 }, (_, n) => mkdir(1, n)),
      { kind: 'step', t: 500, index: 1, label: 's1' },
      mkdir(600, 9),
      { kind: 'step', t: 700, index: 2, label: 's2' },
      // Two instants one slot apart: closer than a label, one box.
      mkdir(800, 10),
      { kind: 'file', t: 801, action: 'rmdir', path: '/var/lib/kubelet/pods/p10' },
    ];
    const lane = layoutTimeline([{ label: 'r', events }]).runs[0]!.lanes.find((l) => l.id === 'files')!;
    assert.equal(lane.collapsed, true);
    assert.deepEqual(lane.summary.map((i) => `${i.label} ${i.tone}`), ['9 changes added', '1 change added', '2 changes mixed']);
    assert.match(lane.summary[2]!.tip, /^mkdir \/var\/lib\/kubelet\/pods\/p10 at 800 ms\nrmdir \/var\/lib\/kubelet\/pods\/p10 at 801 ms$/);
    for (let i = 1; i < lane.summary.length; i++) assert.ok(lane.summary[i - 1]!.x + textWidth(lane.summary[i - 1]!.label) <= lane.summary[i]!.x + 4);
  });

  it('the timeline is as wide as its longest label needs, past the last column', () => {
    const layout = layoutTimeline(storyOneRuns());
    for (const run of layout.runs) for (const lane of run.lanes) for (const item of lane.rows.flat()) assert.ok(item.x + textWidth(item.label) <= layout.width, `"${item.label}" ends past ${layout.width}`);
  });
});

describe('timeline HTML', () => {
  it('is self-contained: no external script, style, image or font, and no http(s) URL at all', () => {
    const html = renderTimelineHtml({ title: 'story 1', runs: storyOneRuns() });
    assert.doesNotMatch(html, /\b(src|href)="(?!#)/);
    assert.doesNotMatch(html, /https?:\/\//);
    assert.doesNotMatch(html, /@import|url\(/);
  });

  it('escapes every text that comes from the trace', () => {
    const runs = storyOneRuns();
    const hostile = {
      ...runs[0]!,
      label: '<script>alert(1)</script>',
      events: [
        ...runs[0]!.events,
        { kind: 'file' as const, t: 10, action: 'write' as const, path: '/x/"><img onerror=alert(1)>' },
        { kind: 'reconstruct' as const, t: 11, found: 'failed' as const, volumeName: '<img src=x>', podName: '"><img onerror=alert(2)>', detail: '<img src=y>' },
      ],
    };
    const html = renderTimelineHtml({ title: '<b>t</b>', runs: [hostile] });
    assert.doesNotMatch(html, /<script>alert/);
    assert.doesNotMatch(html, /<img/);
    assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  });

  it('has one section per run, six lanes each (the file lane collapsed), and a findings entry linking to each violation marker', () => {
    const html = renderTimelineHtml({ title: 'story 1', runs: storyOneRuns() });
    assert.equal(html.match(/<section class="run"/g)?.length, 2);
    assert.equal(html.match(/class="row lane[ "]/g)?.length, 12);
    assert.equal(html.match(/class="row lane collapsed" data-lane="files"/g)?.length, 2);
    assert.equal(html.match(/class="row lane collapsed"/g)?.length, 2, 'only the file lane starts collapsed');
    for (const id of ['v-0-0', 'v-0-1']) {
      assert.match(html, new RegExp(`id="${id}"[^>]*data-violation`));
      assert.match(html, new RegExp(`href="#${id}"`));
    }
  });
});

describe('timeline report headlines', () => {
  it('opens with one headline per run, before the first lane, in the colour of its verdict', () => {
    const html = renderTimelineHtml({ title: 'story 1', runs: storyOneRuns() });
    const headlines = [...html.matchAll(/<p class="headline hl-(\w+)">([^<]*)<\/p>/g)].map((m) => [m[1], m[2]]);
    assert.deepEqual(headlines, [
      ['unsafe', '✗ vol-1 dropped from volumesInUse while staged → another node may attach it'],
      ['safe', '✓ vol-1 unstaged first, then dropped from volumesInUse: safe'],
    ]);
    assert.ok(html.indexOf('class="headline') < html.indexOf('class="row lane'));
    // The sentence that explains the violation is at the top too, next to its headline.
    assert.ok(html.indexOf('href="#v-0-0"') < html.indexOf('<section class="run"'));
  });

  it('the volumesInUse lane tells the runs apart: dropped while staged in one, unstaged then dropped in the other', () => {
    const layout = layoutTimeline(storyOneRuns());
    const tones = layout.runs.map((r) => r.lanes.find((l) => l.id === 'status')!.rows.flat().sort((a, b) => a.x - b.x).map((i) => i.tone));
    assert.deepEqual(tones, [
      ['in-use', 'unsafe'],
      ['in-use', 'in-use', 'safe'],
    ]);
    const off = layout.runs[0]!.lanes.find((l) => l.id === 'status')!.rows.flat().find((i) => i.tone === 'unsafe')!;
    assert.match(off.label, /^✗ vol-1 dropped while staged · in use: ∅ · attached: vol-1$/);
  });

  it('shows why the gate-on run kept vol-1: the global listing found it uncertain, in the step it happened, before its unstage', () => {
    const layout = layoutTimeline(storyOneRuns());
    const ops = (run: number) => layout.runs[run]!.lanes.find((l) => l.id === 'operations')!.rows.flat();
    const reason = ops(1).find((i) => i.tone === 'reason');
    assert.equal(reason?.label, 'vol-1: global listing → uncertain');
    assert.match(reason?.tip ?? '', /listed the global mount of kubernetes\.io\/csi\/mock\.csi\.nodevol\.io\^vol-1, which no pod directory names/);
    const col = layout.columns.find((c) => c.index === 2)!;
    assert.ok(reason !== undefined && reason.x >= col.x && reason.x < col.x + col.width, 'in the reboot step, where the fixture finds it');
    const unstage = ops(1).find((i) => i.label.startsWith('unmount_device') && i.tone === 'ok');
    assert.ok(unstage !== undefined && unstage.x > reason.x, 'before the unstage it leads to');
    assert.equal(ops(0).filter((i) => i.tone === 'reason').length, 0, 'gate off: nothing found it');
  });

  it('abbreviates the global mount hash as git does, and never clips a path label', () => {
    const hash = 'd2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731c1f0';
    const dir = `/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/${hash}`;
    const layout = layoutTimeline([
      {
        label: 'run',
        events: [
          { kind: 'step', t: 0, index: 0, label: 'start' },
          { kind: 'mount', t: 1, action: 'mount', target: `${dir}/globalmount` },
          { kind: 'file', t: 2, action: 'write', path: `${dir}/vol_data.json` },
          { kind: 'file', t: 3, action: 'mkdir', path: '/var/lib/kubelet/pods/0123456789abcdef-0123-4567-89ab-cdef01234567/volumes/kubernetes.io~csi' },
        ],
      },
    ]);
    const labels = layout.runs[0]!.lanes.flatMap((l) => l.rows.flat().map((i) => i.label));
    assert.deepEqual(labels.sort(), ['+ d2e8363f/globalmount', 'mkdir volumes/kubernetes.io~csi', 'write d2e8363f/vol_data.json'].sort());
  });
});

describe('timeline in the terminal', () => {
  it('narrates both runs side by side, step by step, with what the attach/detach controller may do', () => {
    const text = renderSideBySide(storyOneRuns(), { width: 140 });
    const lines = text.split('\n');
    assert.match(lines[0] ?? '', /^step +CSIGlobalMountReconstruction=false +CSIGlobalMountReconstruction=true$/);
    const reboot = lines.findIndex((l) => l.startsWith('3 reboot'));
    assert.ok(reboot > 0, text);
    assert.match(lines[reboot] ?? '', /── node reboots: every mount gone ──.*── node reboots: every mount gone ──/);
    // In the reboot step, the left column (gate off) drops the volume, the right one keeps it.
    const block = lines.slice(reboot, lines.indexOf('', reboot));
    const split = (lines[0] ?? '').indexOf('CSIGlobalMountReconstruction=true');
    assert.ok(block.some((l) => l.slice(0, split).includes('volumesInUse = []')), text);
    assert.ok(block.some((l) => l.slice(split).includes('volumesInUse = [vol-1]')), text);
    assert.match(text, /✗ in-use-reported/);
    assert.ok(block.some((l) => l.slice(split).includes('vol-1 found by the global listing')), text);
    assert.ok(!block.some((l) => l.slice(0, split).includes('global listing')), text);
    assert.match(text, /→ the attach\/detach controller may now detach it/);
    // Every line fits the width asked for.
    for (const l of lines) assert.ok(l.length <= 140, `${l.length}: ${l}`);
  });

  it('too narrow for two runs side by side, tells them one after the other, every line within the width', () => {
    const text = renderSideBySide(storyOneRuns(), { width: 60 });
    const lines = text.split('\n');
    for (const l of lines) assert.ok(l.length <= 60, `${l.length}: ${l}`);
    const off = lines.indexOf('CSIGlobalMountReconstruction=false');
    const on = lines.indexOf('CSIGlobalMountReconstruction=true');
    assert.ok(off >= 0 && on > off, text);
    assert.ok(lines.slice(off, on).some((l) => l.trim() === 'volumesInUse = []'), text);
    assert.ok(lines.slice(on).some((l) => l.includes('deletePod uid-1 (NodeUnstageVolume hangs)')), text);
  });

  it('colours only when asked', () => {
    const ESC = '\u001b[';
    assert.ok(!renderSideBySide(storyOneRuns()).includes(ESC));
    assert.ok(renderSideBySide(storyOneRuns(), { color: true }).includes(`${ESC}31m✗ in-use-reported`));
  });
});
