/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The timeline report in a real browser: what a person sees, not what the HTML string says.
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'puppeteer-core';
import { renderTimelineHtml } from '../../src/timeline/html.js';
import { findChromium, launchChromium } from '../support/browser.js';
import { storyOneRuns } from '../support/timelineFixture.js';

const chromium = findChromium();
const skip = 'missing' in chromium ? chromium.missing : false;

describe('timeline report in headless Chromium', { skip }, () => {
  let browser: Browser;
  let page: Page;
  let dir: string;
  const consoleErrors: string[] = [];
  let renderMs = 0;

  before(async () => {
    if (!('path' in chromium)) return;
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-timeline-'));
    const file = path.join(dir, 'story1.html');
    await writeFile(file, renderTimelineHtml({ title: 'KEP-6058 story 1', runs: storyOneRuns() }));
    browser = await launchChromium(chromium.path);
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    page.on('requestfailed', (r) => consoleErrors.push(`request failed: ${r.url()}`));
    const t0 = performance.now();
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
    renderMs = performance.now() - t0;
  });

  after(async () => {
    await browser?.close();
  });

  it('shows both runs, each with its six lanes visible', async () => {
    const runs = await page.$$eval('section.run', (els) =>
      els.map((s) => ({
        title: s.querySelector('h2')?.textContent ?? '',
        lanes: [...s.querySelectorAll('.lane')].filter((l) => (l as HTMLElement).offsetHeight > 0).map((l) => l.getAttribute('data-lane')),
      })),
    );
    assert.deepEqual(runs.map((r) => r.title), ['CSIGlobalMountReconstruction=false', 'CSIGlobalMountReconstruction=true']);
    for (const r of runs) assert.deepEqual(r.lanes, ['operations', 'csi', 'files', 'mounts', 'status', 'logs']);
  });

  it('draws the violation marker inside the column of its step, aligned across runs', async () => {
    const boxes = await page.evaluate(() => {
      const box = (el: Element | null): { x: number; w: number } | null => {
        if (el === null) return null;
        const r = el.getBoundingClientRect();
        return { x: r.left, w: r.width };
      };
      const off = document.querySelector('section.run[data-run="0"]');
      const on = document.querySelector('section.run[data-run="1"]');
      const marker = off?.querySelector('.violation[data-violation="in-use-reported"]') ?? null;
      const step = marker?.getAttribute('data-step') ?? '';
      return {
        step,
        marker: box(marker),
        column: box(off?.querySelector(`.col[data-step="${step}"]`) ?? null),
        columnOn: box(on?.querySelector(`.col[data-step="${step}"]`) ?? null),
      };
    });
    assert.equal(boxes.step, '2', 'in-use-reported happens after the reboot (step 3, index 2)');
    assert.ok(boxes.marker !== null && boxes.column !== null && boxes.columnOn !== null);
    const centre = boxes.marker.x + boxes.marker.w / 2;
    assert.ok(centre >= boxes.column.x && centre <= boxes.column.x + boxes.column.w, `marker at ${centre}, column ${JSON.stringify(boxes.column)}`);
    assert.equal(boxes.column.x, boxes.columnOn.x, 'the same step starts at the same x in both runs');
  });

  it('a finding link scrolls to its marker and flashes it', async () => {
    await page.click('.findings a[data-target="v-0-1"]');
    const flashed = await page.$eval('#v-0-1', (el) => el.classList.contains('flash'));
    assert.equal(flashed, true);
  });

  it('logs no console error and loads nothing from the network; a screenshot is kept for a person', async (t) => {
    const shot = path.join(dir, 'story1.png');
    await page.screenshot({ path: shot, fullPage: true });
    t.diagnostic(`screenshot: ${shot}; load took ${renderMs.toFixed(0)} ms`);
    assert.deepEqual(consoleErrors, []);
  });
});

describe('nodevol demo report in headless Chromium', { skip }, () => {
  it('story 1: the gate-off in-use-reported marker sits in the column of the restart after the reboot; the gate-on run has none', async (t) => {
    if (!('path' in chromium)) return;
    const { simulate } = await import('../../src/sim/simulation.js');
    const { loadBuiltinScenario } = await import('../../src/sim/scenario.js');
    const { FeatureGate } = await import('../../src/features/features.js');
    const { simRunToTrace } = await import('../../src/timeline/fromSim.js');
    const scenario = loadBuiltinScenario('kep-story-1-drain-reboot');
    const runs = [];
    for (const on of [false, true]) {
      const r = await simulate({ scenario, gates: FeatureGate.of({ CSIGlobalMountReconstruction: on }), seed: 1, fullTrace: true });
      runs.push(simRunToTrace({ label: `gate ${on ? 'on' : 'off'}`, trace: r.trace, violations: r.violations }));
    }
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-demo-browser-'));
    const file = path.join(dir, 'demo.html');
    await writeFile(file, renderTimelineHtml({ title: 'demo', runs }));
    const browser = await launchChromium(chromium.path);
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(String(e)));
      const t0 = performance.now();
      await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
      const loadMs = performance.now() - t0;
      const seen = await page.evaluate(() => {
        const off = document.querySelector('section.run[data-run="0"]');
        const on = document.querySelector('section.run[data-run="1"]');
        const marker = off?.querySelector('.violation[data-violation="in-use-reported"]');
        const step = marker?.getAttribute('data-step') ?? '';
        const col = off?.querySelector(`.col[data-step="${step}"]`);
        const m = marker?.getBoundingClientRect();
        const c = col?.getBoundingClientRect();
        return {
          column: col?.textContent ?? '',
          inside: m !== undefined && c !== undefined && m.left + m.width / 2 >= c.left && m.left + m.width / 2 <= c.right,
          onMarkers: on?.querySelectorAll('.violation').length ?? -1,
          crashes: off?.querySelectorAll('.crash.reboot').length ?? 0,
          operations: [...(on?.querySelectorAll('.lane[data-lane="operations"] .item') ?? [])].map((e) => e.textContent ?? ''),
        };
      });
      await page.screenshot({ path: path.join(dir, 'demo.png'), fullPage: true });
      t.diagnostic(`screenshot: ${path.join(dir, 'demo.png')}; load ${loadMs.toFixed(0)} ms`);
      assert.match(seen.column, /kubelet starts again/);
      assert.equal(seen.inside, true);
      assert.equal(seen.onMarkers, 0);
      assert.equal(seen.crashes, 1);
      // The gate-on run's operations lane shows the mount, the teardown and the recovered volume's unstage.
      for (const op of ['volume_mount', 'volume_unmount', 'unmount_device']) assert.ok(seen.operations.some((l) => l.startsWith(op)), `${op} in ${seen.operations.join(' | ')}`);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
});
