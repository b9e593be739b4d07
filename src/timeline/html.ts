/**
 * The timeline report: one self-contained HTML file (no network, no external file), readable on
 * an air-gapped node. Runs are drawn one above the other on shared step columns, with one
 * horizontal scroll for all of them, so that step N sits at the same x in every run; lane names
 * stay in view while scrolling. Every item's details are in its tooltip; each violation has a
 * marker on its step and an entry in the findings list that links to it.
 */
import type { TraceRun } from './events.js';
import { layoutTimeline, type LaneLayout, type RunLayout, type TimelineItem, type TimelineLayout } from './layout.js';

export interface TimelineDocument {
  readonly title: string;
  /** One paragraph under the title: what the reader is looking at. */
  readonly subtitle?: string;
  readonly runs: readonly TraceRun[];
}

/** Height of one row of items in a lane. */
const ROW_PX = 20;
const NAME_PX = 230;
const HEAD_PX = 44;

export function renderTimelineHtml(doc: TimelineDocument): string {
  const layout = layoutTimeline(doc.runs);
  const runs = layout.runs.map((run, i) => renderRun(run, i, layout)).join('\n');
  const findings = renderFindings(layout);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(doc.title)}</title>
<style>${CSS}</style>
</head>
<body>
<header>
<h1>${esc(doc.title)}</h1>
${doc.subtitle === undefined ? '' : `<p class="subtitle">${esc(doc.subtitle)}</p>`}
<p class="key"><span class="sw ok"></span>succeeded <span class="sw error"></span>failed <span class="sw pending"></span>no answer / still running <span class="sw warn"></span>removed, or attached but not in use <span class="crashkey"></span>restart / reboot <span class="vkey">!</span>invariant violated — hover anything for its details</p>
</header>
<main>
<div class="scroller" style="--track:${layout.width}px">
${runs}
</div>
${findings}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function renderRun(run: RunLayout, runIndex: number, layout: TimelineLayout): string {
  const heads = layout.columns
    .map(
      (c) =>
        `<div class="col" data-step="${c.index}" style="left:${c.x}px;width:${c.width}px"><span class="n">${c.index + 1}</span> ${esc(c.label)}</div>`,
    )
    .join('');
  const lanes = run.lanes.map((lane) => renderLane(lane)).join('\n');
  const height = run.lanes.reduce((h, l) => h + laneHeight(l), 0);
  const markers = run.markers
    .map((m) => `<div class="crash ${m.crash}" style="left:${m.x}px;height:${height}px" title="${esc(m.tip)}"><span>${m.crash}</span></div>`)
    .join('');
  const violations = run.violations
    .map(
      (v) =>
        `<a class="violation" id="${v.id}" href="#f-${v.id}" data-violation="${esc(v.invariant)}" data-step="${v.stepIndex}" style="left:${v.x}px" title="${esc(`${v.invariant}: ${v.message}`)}">!</a>`,
    )
    .join('');
  return `<section class="run" data-run="${runIndex}">
<div class="runhead"><h2>${esc(run.label)}</h2>${run.summary === undefined ? '' : `<p>${esc(run.summary)}</p>`}</div>
<div class="row head"><div class="name">step</div><div class="track" style="height:${HEAD_PX}px">${heads}${violations}</div></div>
<div class="body"><div class="overlay" style="height:${height}px">${markers}</div>
${lanes}
</div>
</section>`;
}

function laneHeight(lane: LaneLayout): number {
  return Math.max(1, lane.rows.length) * ROW_PX + 8;
}

function renderLane(lane: LaneLayout): string {
  const items = lane.rows.flatMap((row, r) => row.map((item) => renderItem(item, r))).join('');
  return `<div class="row lane" data-lane="${lane.id}"><div class="name">${esc(lane.title)}</div><div class="track" style="height:${laneHeight(lane)}px">${items}</div></div>`;
}

function renderItem(item: TimelineItem, row: number): string {
  return `<div class="item ${item.tone}" style="left:${item.x}px;top:${4 + row * ROW_PX}px;min-width:${item.width}px" title="${esc(item.tip)}">${esc(item.label)}</div>`;
}

function renderFindings(layout: TimelineLayout): string {
  const blocks = layout.runs.map((run) => {
    const items =
      run.violations.length === 0
        ? '<li class="none">no invariant violated</li>'
        : run.violations
            .map(
              (v) =>
                `<li id="f-${v.id}"><a href="#${v.id}" data-target="${v.id}"><b>${esc(v.invariant)}</b> at step ${v.stepIndex + 1} (${esc(v.stepLabel)})</a>: ${esc(v.message)}</li>`,
            )
            .join('');
    return `<h3>${esc(run.label)}</h3><ol>${items}</ol>`;
  });
  return `<section class="findings"><h2>Invariants</h2>${blocks.join('')}</section>`;
}

/** HTML-escapes text for element content and double-quoted attributes. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}
const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

const CSS = `
:root{--name:${NAME_PX}px;font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#fff}
body{margin:0}
header{padding:14px 18px 8px;border-bottom:1px solid #dde2ea}
h1{font-size:18px;margin:0 0 4px}
.subtitle{margin:0 0 6px;max-width:1100px;color:#3a4354}
.key{margin:0;color:#4a5366;font-size:12px}
.sw{display:inline-block;width:12px;height:10px;border-radius:2px;margin:0 4px 0 12px;vertical-align:-1px}
.sw.ok{background:#57a773}.sw.error{background:#d62828}.sw.pending{background:#d9a400}.sw.warn{background:#e07b00}
.crashkey{display:inline-block;width:3px;height:12px;background:#7b2cbf;margin:0 4px 0 12px;vertical-align:-2px}
.vkey{display:inline-block;width:14px;height:14px;border-radius:7px;background:#d62828;color:#fff;font-weight:700;font-size:10px;text-align:center;line-height:14px;margin:0 4px 0 12px}
main{padding:0 0 24px}
.scroller{overflow-x:auto;position:relative}
.run{min-width:calc(var(--name) + var(--track));border-bottom:2px solid #c8cfdb;padding-bottom:6px}
.runhead{position:sticky;left:0;width:min(100vw,1200px);padding:10px 18px 4px}
.runhead h2{font-size:15px;margin:0}
.runhead p{margin:2px 0 0;color:#3a4354}
.row{display:flex}
.name{position:sticky;left:0;z-index:3;flex:0 0 var(--name);box-sizing:border-box;padding:4px 10px 4px 18px;background:#f6f8fb;border-right:1px solid #dde2ea;border-top:1px solid #eef1f5;color:#2f3748;font-weight:600;font-size:12px}
.track{position:relative;flex:0 0 var(--track);width:var(--track);border-top:1px solid #eef1f5;background-image:linear-gradient(90deg,transparent 0,transparent 100%)}
.head .track{background:#fbfcfe}
.col{position:absolute;top:0;bottom:0;box-sizing:border-box;border-left:1px solid #c8cfdb;padding:4px 6px;font-size:12px;color:#2f3748;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.col .n{display:inline-block;min-width:16px;height:16px;border-radius:8px;background:#2f3748;color:#fff;text-align:center;font-size:10px;line-height:16px;margin-right:3px}
.body{position:relative}
.overlay{position:absolute;left:var(--name);top:0;width:var(--track);pointer-events:none;z-index:2}
.crash{position:absolute;top:0;width:0;border-left:3px solid #7b2cbf;pointer-events:auto}
.crash.restart{border-left-style:dashed}
.crash span{position:absolute;top:0;left:3px;background:#7b2cbf;color:#fff;font-size:10px;padding:0 3px;border-radius:0 2px 2px 0}
.item{position:absolute;box-sizing:border-box;height:17px;padding:0 4px;border-radius:3px;font-size:11px;line-height:17px;white-space:nowrap;border:1px solid;cursor:default}
.item.ok{background:#e3f4e8;border-color:#57a773;color:#14502a}
.item.error{background:#fde4e4;border-color:#d62828;color:#7a1010}
.item.pending{background:repeating-linear-gradient(45deg,#fff4d6,#fff4d6 5px,#ffe8a8 5px,#ffe8a8 10px);border-color:#d9a400;color:#5c4500}
.item.info{background:#e6eefc;border-color:#5b7fc7;color:#1b3566}
.item.warn{background:#fff0e0;border-color:#e07b00;color:#6b3a00}
.item.danger{background:#f4e1ff;border-color:#7b2cbf;color:#3e0a66}
.violation{position:absolute;bottom:2px;width:18px;height:18px;margin-left:-9px;border-radius:9px;background:#d62828;color:#fff;font-weight:700;text-align:center;line-height:18px;text-decoration:none;z-index:4;box-shadow:0 0 0 2px #fff}
.violation.flash,.findings li.flash{outline:3px solid #ffb703}
.findings{padding:8px 18px}
.findings h2{font-size:15px;margin:6px 0}
.findings h3{font-size:13px;margin:10px 0 2px}
.findings ol{margin:0;padding-left:22px}
.findings li{margin:2px 0}
.findings li.none{list-style:none;color:#14502a}
.findings a{color:#a4161a}
`;

/** Clicking a finding scrolls its marker into view and flashes it (and the other way round). */
const SCRIPT = `
document.addEventListener('click', function (ev) {
  var a = ev.target instanceof Element ? ev.target.closest('a[href^="#"]') : null;
  if (!a) return;
  var el = document.getElementById(a.getAttribute('href').slice(1));
  if (!el) return;
  ev.preventDefault();
  el.scrollIntoView({ block: 'center', inline: 'center' });
  el.classList.add('flash');
  setTimeout(function () { el.classList.remove('flash'); }, 1500);
});
`;
