/**
 * The timeline report: one self-contained HTML file (no network, no external file), readable on
 * an air-gapped node. Runs are drawn one above the other on shared step columns, with one
 * horizontal scroll for all of them, so that step N sits at the same x in every run; lane names
 * stay in view while scrolling. Every item's details are in its tooltip; each violation has a
 * marker on its step and an entry in the findings list that links to it.
 */
import type { TraceRun } from '../trace/events.js';
import { CRASH_LINE_PX, layoutTimeline, type LaneLayout, type RunLayout, type TimelineItem, type TimelineLayout } from './layout.js';

export interface TimelineDocument {
  readonly title: string;
  /** One paragraph under the title: what the reader is looking at. */
  readonly subtitle?: string;
  readonly runs: readonly TraceRun[];
  /** Per run (same index), a line under its headline: what its verdict does not cover. */
  readonly notes?: readonly (string | undefined)[];
}

/** Height of one row of items in a lane. */
const ROW_PX = 20;
const NAME_PX = 230;
/** The lane names' width on a narrow screen (up to 1000 px), leaving the steps more room. */
const NARROW_NAME_PX = 150;

export function renderTimelineHtml(doc: TimelineDocument): string {
  const layout = layoutTimeline(doc.runs);
  const runs = layout.runs.map((run, i) => renderRun(run, i, layout)).join('\n');
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
${renderVerdicts(layout, doc.notes ?? [])}
${doc.subtitle === undefined ? '' : `<p class="subtitle">${esc(doc.subtitle)}</p>`}
${KEY}
</header>
<main>
<div class="scroller" style="--track:${layout.width}px">
${runs}
</div>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

/**
 * The top of the report: per run, one headline (what it did with volumesInUse), the sentence
 * that explains it, and the invariants it broke, each linked to its marker.
 */
function renderVerdicts(layout: TimelineLayout, notes: readonly (string | undefined)[]): string {
  const cards = layout.runs.map((run, i) => {
    const v = run.verdict;
    const findings =
      run.violations.length === 0
        ? '<li class="none">no invariant violated</li>'
        : run.violations
            .map(
              (x) =>
                `<li id="f-${x.id}"><a href="#${x.id}" data-target="${x.id}"><b>${esc(x.invariant)}</b> at step ${x.stepIndex + 1}, ${esc(x.stepLabel)}</a>: ${esc(x.message)}</li>`,
            )
            .join('');
    return `<article class="verdict v-${v.kind}" data-run="${i}" data-verdict="${v.kind}">
<h2>${esc(run.label)}</h2>
<p class="headline hl-${v.kind}">${esc(headlineText(run))}</p>
${notes[i] === undefined ? '' : `<p class="note">${esc(notes[i])}</p>\n`}<p class="why">${esc(v.explanation)}${run.summary === undefined ? '' : ` ${esc(run.summary)}`}</p>
<ol class="findings">${findings}</ol>
</article>`;
  });
  return `<section class="verdicts" style="--runs:${Math.min(3, Math.max(1, layout.runs.length))}">${cards.join('\n')}</section>`;
}

function headlineText(run: RunLayout): string {
  return `${run.verdict.kind === 'unsafe' ? '✗' : '✓'} ${run.verdict.headline}`;
}

function renderRun(run: RunLayout, runIndex: number, layout: TimelineLayout): string {
  const heads = layout.columns
    .map(
      (c) =>
        `<div class="col" data-step="${c.index}" style="width:${c.width}px" title="${esc(`${c.index + 1} ${c.label}`)}"><span class="n">${c.index + 1}</span> ${breakAfterCommas(esc(c.label))}</div>`,
    )
    .join('');
  const lanes = run.lanes.map((lane) => renderLane(lane)).join('\n');
  // The line sits in the gap before the crash's slot; its tag in a strip of its own above the lanes.
  const markers = run.markers.map((m) => `<div class="crash ${m.crash}" style="left:${m.x - CRASH_LINE_PX}px" title="${esc(m.tip)}"><span>${m.crash}</span></div>`).join('');
  const violations = run.violations
    .map(
      (v) =>
        `<a class="violation" id="${v.id}" href="#f-${v.id}" data-violation="${esc(v.invariant)}" data-step="${v.stepIndex}" style="left:${v.x}px" title="${esc(`${v.invariant}: ${v.message}`)}">!</a>`,
    )
    .join('');
  return `<section class="run" data-run="${runIndex}">
<div class="runhead"><h2>${esc(run.label)}</h2><span class="headline hl-${run.verdict.kind}">${esc(headlineText(run))}</span></div>
<div class="row head"><div class="name">step</div><div class="track">${heads}${violations}</div></div>
<div class="body${run.markers.length > 0 ? ' crashes' : ''}"><div class="overlay">${markers}</div>
${lanes}
</div>
</section>`;
}

function laneHeight(rows: number): number {
  return Math.max(1, rows) * ROW_PX + 8;
}

function renderLane(lane: LaneLayout): string {
  const items = lane.rows.flatMap((row, r) => row.map((item) => renderItem(item, r))).join('');
  const full = `<div class="track full" style="height:${laneHeight(lane.rows.length)}px">${items}</div>`;
  if (!lane.collapsed) return `<div class="row lane" data-lane="${lane.id}"><div class="name">${esc(lane.title)}</div>${full}</div>`;
  // Collapsed: one row of boxes counting the changes ("3 changes"); the button shows the full lane.
  const all = lane.rows.flat();
  const summary = lane.summary.map((item) => renderItem(item, 0)).join('');
  return `<div class="row lane collapsed" data-lane="${lane.id}"><div class="name"><button type="button" class="toggle" aria-expanded="false">${esc(lane.title)} <span class="count">(${all.length})</span></button></div><div class="track summary" style="height:${laneHeight(1)}px">${summary}</div>${full}</div>`;
}

function renderItem(item: TimelineItem, row: number): string {
  const style = `left:${item.x}px;top:${4 + row * ROW_PX}px;min-width:${item.width}px`;
  return `<div class="item ${item.tone}${item.minor === true ? ' minor' : ''}" style="${style}" title="${esc(item.tip)}">${esc(item.label)}</div>`;
}

/** The legend: each colour once, with the one thing it means. */
const KEY = `<div class="key">
<p><span class="sw ok"></span>succeeded <span class="sw error"></span>failed <span class="sw pending"></span>no answer / still running <span class="sw added"></span>created / mounted <span class="sw removed"></span>removed / unmounted <span class="sw lost"></span>lost in the reboot <span class="crashkey"></span>restart / reboot <span class="sw warn"></span>warning logged <span class="sw reason"></span>found at start (why a volume is kept) <span class="vkey">!</span>invariant violated</p>
<p><b>volumesInUse vs volumesAttached:</b> <span class="sw in-use"></span>every staged volume in use <span class="sw not-yet"></span>attached, not in use, nothing staged <span class="sw unsafe"></span>dropped while staged: another node may attach it <span class="sw safe"></span>unstaged, then dropped: safe — hover anything for its details</p>
</div>`;

/** A long comma-separated list (an agent's gates) breaks after its commas, not inside a name. */
function breakAfterCommas(html: string): string {
  return html.replace(/,(?=\S)/g, ',<wbr>');
}

/** HTML-escapes text for element content and double-quoted attributes. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}
const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

const CSS = `
:root{--name:${NAME_PX}px;font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#fff}
body{margin:0}
header{padding:10px 18px 6px;border-bottom:1px solid #dde2ea}
h1{font-size:17px;margin:0 0 6px}
.verdicts{display:grid;grid-template-columns:repeat(var(--runs),minmax(0,1fr));gap:10px;margin:0 0 6px}
.verdict{border:1px solid #dde2ea;border-left-width:6px;border-radius:4px;padding:6px 10px}
.v-unsafe{border-left-color:#9b1111}.v-safe{border-left-color:#0f766e}.v-clean{border-left-color:#57a773}
.verdict h2{font-size:12px;margin:0;color:#4a5366;font-weight:600}
.verdict .headline{display:block;font-size:16px;font-weight:700;margin:2px 0}
.hl-unsafe{color:#9b1111}.hl-safe{color:#0f766e}.hl-clean{color:#14502a}
.verdict .why{margin:0 0 2px;color:#2f3748}
.verdict .note{margin:0 0 4px;padding:2px 6px;border-left:3px solid #b7791f;background:#fdf6e3;color:#5c3d0a;font-weight:600}
.verdict ol{margin:0;padding-left:20px;font-size:12px}
.verdict li{margin:1px 0}
.verdict li.none{list-style:none;margin-left:-20px;color:#14502a}
.verdict a{color:#a4161a}
.subtitle{margin:0 0 4px;max-width:1500px;color:#4a5366;font-size:12px}
.key{color:#4a5366;font-size:12px}
.key p{margin:0}
.sw{display:inline-block;width:12px;height:10px;border-radius:2px;margin:0 4px 0 10px;vertical-align:-1px;box-sizing:border-box;border:1px solid}
.crashkey{display:inline-block;width:3px;height:12px;background:#7b2cbf;margin:0 4px 0 10px;vertical-align:-2px}
.vkey{display:inline-block;width:14px;height:14px;border-radius:7px;background:#d62828;color:#fff;font-weight:700;font-size:10px;text-align:center;line-height:14px;margin:0 4px 0 10px}
main{padding:0 0 24px}
.scroller{overflow-x:auto;position:relative}
.run{min-width:calc(var(--name) + var(--track));border-bottom:2px solid #c8cfdb;padding-bottom:4px}
.runhead{position:sticky;left:0;width:min(100vw,1500px);box-sizing:border-box;padding:6px 18px 3px;display:flex;gap:14px;align-items:baseline}
.runhead h2{font-size:14px;margin:0}
.runhead .headline{font-size:13px;font-weight:700}
.row{display:flex}
.name{position:sticky;left:0;z-index:3;flex:0 0 var(--name);box-sizing:border-box;padding:4px 10px 4px 18px;background:#f6f8fb;border-right:1px solid #dde2ea;border-top:1px solid #eef1f5;color:#2f3748;font-weight:600;font-size:12px}
.track{position:relative;flex:0 0 var(--track);width:var(--track);border-top:1px solid #eef1f5}
.head .track{background:#fbfcfe;display:flex;align-items:stretch}
.lane[data-lane="status"] .track{background:#fafbfd}
.col{flex:0 0 auto;box-sizing:border-box;border-left:1px solid #c8cfdb;padding:4px 6px 24px;font-size:12px;line-height:16px;color:#2f3748;overflow:hidden;white-space:normal;overflow-wrap:anywhere}
.col .n{display:inline-block;min-width:16px;height:16px;border-radius:8px;background:#2f3748;color:#fff;text-align:center;font-size:10px;line-height:16px;margin-right:3px}
.body{position:relative}
.overlay{position:absolute;left:var(--name);top:0;bottom:0;width:var(--track);pointer-events:none;z-index:2}
.body.crashes{padding-top:16px}
.crash{position:absolute;top:0;bottom:0;width:0;border-left:${CRASH_LINE_PX}px solid #7b2cbf;pointer-events:auto}
.crash.restart{border-left-style:dashed}
.crash span{position:absolute;top:1px;left:0;background:#7b2cbf;color:#fff;font-size:10px;line-height:13px;padding:0 3px;border-radius:0 2px 2px 0}
.item{position:absolute;box-sizing:border-box;height:17px;padding:0 4px;border-radius:3px;font-size:11px;line-height:15px;white-space:nowrap;border:1px solid;cursor:default}
.item.minor{opacity:.75;font-size:10px}
.ok{background:#e3f4e8;border-color:#57a773;color:#14502a}
.error{background:#fde4e4;border-color:#d62828;color:#7a1010}
.pending{background:repeating-linear-gradient(45deg,#fff4d6,#fff4d6 5px,#ffe8a8 5px,#ffe8a8 10px);border-color:#d9a400;color:#5c4500}
.added{background:#e6eefc;border-color:#5b7fc7;color:#1b3566}
.removed{background:#fff;border-color:#6b7280;border-style:dashed;color:#374151}
.lost{background:#f4e1ff;border-color:#7b2cbf;color:#3e0a66}
.warn{background:#fff0e0;border-color:#e07b00;color:#6b3a00}
.reason{background:#ecebff;border-color:#4c3fc2;border-width:1px 1px 1px 4px;color:#241a7a;font-weight:600}
.in-use{background:#e3f4e8;border-color:#57a773;color:#14502a}
.not-yet{background:#eceff3;border-color:#aab2c0;color:#3a4354}
.unsafe{background:#9b1111;border-color:#6a0000;color:#fff;font-weight:700}
.safe{background:#d5f5ef;border-color:#0f766e;color:#0b4f49;font-weight:600}
.lane .toggle{all:unset;cursor:pointer;display:block}
.lane .toggle::before{content:"▸ ";color:#6b7280}
.lane:not(.collapsed) .toggle::before{content:"▾ "}
.lane .count{font-weight:400;color:#6b7280}
.lane.collapsed .full,.lane:not(.collapsed) .summary{display:none}
.mixed{background:#f3f4f6;border-color:#6b7280;color:#374151}
.violation{position:absolute;bottom:2px;width:18px;height:18px;margin-left:-9px;border-radius:9px;background:#d62828;color:#fff;font-weight:700;text-align:center;line-height:18px;text-decoration:none;z-index:4;box-shadow:0 0 0 2px #fff}
.violation.flash,.verdict li.flash{outline:3px solid #ffb703}
@media (max-width:1000px){:root{--name:${NARROW_NAME_PX}px}.name{padding-left:10px}}
`;

/**
 * On load (unless the address names an anchor), when the step of the first violation is not
 * wholly on screen, the timeline scrolls sideways to show it, with the unsafe volumesInUse box of
 * its run when both fit: on a narrow screen the steps before it are the ones left off. Clicking a finding scrolls
 * its marker into view and flashes it (and the other way round); a collapsed lane's button shows
 * the whole lane, and hides it again.
 */
const SCRIPT = `
(function () {
  if (location.hash !== '') return;
  var marker = document.querySelector('.violation');
  var scroller = document.querySelector('.scroller');
  if (!marker || !scroller) return;
  var run = marker.closest('.run');
  var col = run.querySelector('.col[data-step="' + marker.getAttribute('data-step') + '"]');
  var name = run.querySelector('.name');
  if (!col || !name) return;
  var left = name.getBoundingClientRect().right;
  var right = scroller.getBoundingClientRect().right;
  var c = col.getBoundingClientRect();
  if (c.right <= right) return;
  var target = c.right;
  var unsafe = run.querySelector('.lane[data-lane="status"] .item.unsafe');
  if (unsafe) {
    var u = unsafe.getBoundingClientRect();
    if (u.right > target && u.right - c.left + 24 <= right - left) target = u.right;
  }
  var by = Math.min(target + 12 - right, c.left - left - 12);
  if (by > 0) scroller.scrollLeft += by;
})();
document.addEventListener('click', function (ev) {
  var t = ev.target instanceof Element ? ev.target : null;
  var toggle = t ? t.closest('.lane .toggle') : null;
  if (toggle) {
    var lane = toggle.closest('.lane');
    var collapsed = lane.classList.toggle('collapsed');
    toggle.setAttribute('aria-expanded', collapsed ? 'false' : 'true');
    return;
  }
  var a = t ? t.closest('a[href^="#"]') : null;
  if (!a) return;
  var el = document.getElementById(a.getAttribute('href').slice(1));
  if (!el) return;
  ev.preventDefault();
  el.scrollIntoView({ block: 'center', inline: 'center' });
  el.classList.add('flash');
  setTimeout(function () { el.classList.remove('flash'); }, 1500);
});
`;
