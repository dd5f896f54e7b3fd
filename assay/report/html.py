"""One self-contained HTML file: inline CSS, plotly.js inlined once, every chart's data as JSON.

The page needs no network. When every chart is drawn it sets ``data-charts-drawn`` (and
``data-charts-expected``) on ``<html>``; script errors and ``console.error`` calls are counted in
``data-js-errors`` and kept in ``window.__assayErrors``, so a headless browser's ``--dump-dom``
shows whether the page rendered cleanly.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

from assay.connectors.layout import write_atomic
from assay.report.page import Page, esc

if TYPE_CHECKING:
    from assay.report.build import RunReport
    from assay.report.compare import Comparison
    from assay.report.slices import Slices
    from assay.report.trend import Trend

__all__ = ["Page", "esc", "render_html", "write_html"]

CSS = """
:root { --fg:#1f2933; --muted:#616e7c; --line:#e4e7eb; --bg:#f5f7fa; --pass:#2e8b57; --fail:#d9534f;
        --warn:#f0ad4e; --accent:#3b6fb6; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg);
       background:var(--bg); }
header { background:#1f2933; color:#fff; padding:18px 28px 14px; }
header h1 { margin:0 0 4px; font-size:20px; font-weight:600; }
header .meta { color:#cbd2d9; font-size:13px; }
nav { background:#fff; border-bottom:1px solid var(--line); padding:8px 28px; position:sticky; top:0; z-index:5; }
nav a { margin-right:18px; color:var(--accent); text-decoration:none; font-weight:500; }
main { padding:18px 28px 40px; max-width:1500px; margin:0 auto; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin:0 0 18px; }
h2 { margin:0 0 12px; font-size:17px; }
h3 { margin:14px 0 6px; font-size:14px; }
.kpis { display:flex; flex-wrap:wrap; gap:10px; margin:0 0 18px; }
.kpi { background:#fff; border:1px solid var(--line); border-radius:8px; padding:10px 16px; min-width:130px; }
.kpi .v { font-size:21px; font-weight:600; } .kpi .l { color:var(--muted); font-size:12px; }
.kpi.bad .v { color:var(--fail); } .kpi.good .v { color:var(--pass); }
.alert { border:1px solid var(--fail); background:#fdf0ef; color:#7a1f1c; }
.alert h2 { color:var(--fail); } .alert li { margin:2px 0; }
.scroll { overflow-x:auto; max-width:100%; }
table { border-collapse:collapse; width:100%; font-size:13px; }
tr.failed td { background:#fdf0ef; }
th, td { text-align:left; padding:5px 9px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#f8f9fb; font-weight:600; white-space:nowrap; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.neg { color:var(--fail); font-weight:600; } .pos { color:var(--pass); font-weight:600; }
.muted { color:var(--muted); }
.badge { display:inline-block; padding:0 7px; border-radius:10px; font-size:12px; font-weight:600; color:#fff; }
.badge.pass { background:var(--pass); } .badge.fail { background:var(--fail); }
.badge.warn { background:var(--warn); }
.badge.error { background:#8e44ad; } .badge.unscored { background:#9aa5b1; }
.grid { display:grid; grid-template-columns:repeat(auto-fill,minmax(420px,1fr)); gap:14px; }
.card { border:1px solid var(--line); border-radius:6px; padding:8px 10px; }
.card h3 { margin:2px 0 2px; } .card .sub { color:var(--muted); font-size:12px; }
.chart { width:100%; min-height:120px; }
details.trace { border:1px solid var(--line); border-radius:6px; margin:0 0 8px; }
details.trace > summary { cursor:pointer; padding:8px 12px; background:#f8f9fb; list-style-position:inside; }
details.trace > div { padding:8px 14px 12px; }
.msgs { margin-top:8px; }
.msg { border-left:4px solid var(--line); padding:4px 10px; margin:6px 0; background:#fbfcfd; }
.msg .role { font-size:11px; font-weight:700; text-transform:uppercase; color:var(--muted); }
.msg.user { border-color:#3b6fb6; } .msg.assistant { border-color:#2e8b57; } .msg.tool { border-color:#f0ad4e; }
.msg.system, .msg.developer { border-color:#9aa5b1; }
.msg .text { white-space:pre-wrap; word-break:break-word; }
code, pre, .call { font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
.call { background:#eef2f7; border-radius:4px; padding:3px 7px; margin:3px 0; white-space:pre-wrap;
        word-break:break-word; }
pre { background:#f4f5f7; padding:8px; border-radius:4px; white-space:pre-wrap; word-break:break-word;
      max-height:320px; overflow:auto; }
.note { color:var(--muted); font-size:12px; margin:4px 0 10px; }
footer { color:var(--muted); font-size:12px; text-align:center; padding:0 0 24px; }
"""

ERROR_HOOK = """
window.__assayErrors = [];
(function () {
  function note(msg) {
    window.__assayErrors.push(String(msg));
    document.documentElement.setAttribute('data-js-errors', String(window.__assayErrors.length));
  }
  window.__assayNote = note;
  window.addEventListener('error', function (e) { note(e.message || e); });
  window.addEventListener('unhandledrejection', function (e) { note(e.reason || 'unhandled rejection'); });
  var original = console.error;
  console.error = function () { note(Array.prototype.join.call(arguments, ' ')); original.apply(console, arguments); };
})();
"""

DRAW = """
(function () {
  var els = document.querySelectorAll('[data-fig]');
  var root = document.documentElement;
  root.setAttribute('data-charts-expected', String(els.length));
  var jobs = [];
  els.forEach(function (el) {
    try {
      var spec = JSON.parse(document.getElementById(el.getAttribute('data-fig')).textContent);
      var config = {displaylogo: false, displayModeBar: false, responsive: true};
      jobs.push(Plotly.newPlot(el, spec.data, spec.layout || {}, config).then(function () {
        return el.querySelector('svg.main-svg') ? 1 : 0;
      }));
    } catch (e) { window.__assayNote(e); }
  });
  Promise.all(jobs).then(function (drawn) {
    root.setAttribute('data-charts-drawn', String(drawn.reduce(function (a, b) { return a + b; }, 0)));
  }, function (e) { window.__assayNote(e); });
})();
"""


def render_html(
    report: RunReport,
    *,
    comparison: Comparison | None = None,
    trend: Trend | None = None,
    title: str | None = None,
    notices: list[str] | None = None,
    slices: Slices | None = None,
) -> str:
    """The whole page as a string (see :func:`write_html`)."""
    from assay.report import sections
    from assay.report.charts import plotly_js

    page = Page()
    nav = [("evaluators", "Evaluators")]
    body = [sections.notices(notices or []), sections.kpis(report), sections.gates(report)]
    if report.summary.get("gates") or report.summary.get("status") not in (None, "ok"):
        nav.insert(0, ("gates", "Gates"))
    if comparison is not None:
        body.append(sections.comparison(page, comparison))
        nav.insert(0, ("compare", "Compare"))
    body.append(sections.evaluators(page, report))
    if slices is not None:
        body.append(sections.slices(slices))
        nav.append(("slices", f"By {slices.by}"))
    if trend is not None and len(trend.points) > 1:
        body.append(sections.trend(page, trend))
        nav.append(("trend", "Trend"))
    body.append(sections.worst(report))
    body.append(sections.dead_letters(page, report))
    body.append(sections.judges(page, report))
    nav += [("worst", "Worst traces"), ("dead-letters", "Dead letters"), ("judges", "Judges")]
    info = report.info
    s = report.summary
    heading = title or f"assay report — {info.label}"
    meta = (
        f"{esc(info.location)} · run {esc(s.get('run_id'))} · status {esc(s.get('status'))} · "
        f"exit {esc(s.get('exit_code'))} · started {esc(s.get('started_at'))} · "
        f"{'complete (_SUCCESS)' if info.complete else 'incomplete (no _SUCCESS)'}"
    )
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en" data-js-errors="0"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(heading)}</title><style>{CSS}</style>",
            f"<script>{ERROR_HOOK}</script>",
            f"<script>{plotly_js()}</script></head><body>",
            f"<header><h1>{esc(heading)}</h1><div class='meta'>{meta}</div></header>",
            "<nav>" + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in nav) + "</nav>",
            "<main>",
            *body,
            "</main>",
            f"<footer>generated by assay on {generated} · self-contained, no network needed</footer>",
            *page.figures,
            f"<script>{DRAW}</script></body></html>\n",
        ]
    )


def write_html(
    path: str | os.PathLike[str],
    report: RunReport,
    *,
    comparison: Comparison | None = None,
    trend: Trend | None = None,
    title: str | None = None,
    notices: list[str] | None = None,
    slices: Slices | None = None,
) -> Path:
    """Write the HTML report of ``report`` (optionally with a comparison and a trend) to ``path``.

    When ``comparison`` is given, ``report`` should be ``comparison.current``; ``notices`` (nights
    that failed after this one, say) lead the page in a red box."""
    out = Path(path)
    text = render_html(report, comparison=comparison, trend=trend, title=title, notices=notices, slices=slices)
    write_atomic(out, text.encode("utf-8"))
    return out
