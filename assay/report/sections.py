"""The sections of the HTML report, each a function of the report data returning HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.report import charts
from assay.report.page import Page, esc
from assay.report.terminal import judge_rows
from assay.report.unpaired import MEAN_TEST, PASS_TEST
from assay.stats.pvalues import format_p

if TYPE_CHECKING:
    from assay.report.aggregate import WorstTrace
    from assay.report.build import RunReport
    from assay.report.compare import Comparison, Flip
    from assay.report.slices import Slices
    from assay.report.trend import Trend
    from assay.stats import PairedDelta, UnpairedDelta

SHOWN_FLIPS = 10
"""Flipped verdicts shown before the "more" fold."""

__all__ = ["comparison", "dead_letters", "evaluators", "judges", "kpis", "paired", "trend", "worst"]


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _int(x: Any) -> str:
    return f"{int(x or 0):,}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _delta(x: float | None, digits: int = 3) -> str:
    if x is None:
        return '<span class="muted">-</span>'
    cls = "neg" if x < 0 else "pos" if x > 0 else "muted"
    return f'<span class="{cls}">{x:+.{digits}f}</span>'


def _status_badge(status: str) -> str:
    """A night's status: green when ok, amber for a whole output that failed a gate, red else."""
    cls = "pass" if status == "ok" else "warn" if status in ("gate_failed", "dead_letters") else "fail"
    return f'<span class="badge {cls}">{esc(status)}</span>'


def _badge(verdict: str) -> str:
    return f'<span class="badge {esc(verdict)}">{esc(verdict)}</span>'


def _table(head: list[str], rows: list[list[str]], numeric: set[int] | frozenset[int] = frozenset()) -> str:
    th = "".join(f'<th class="n">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def slices(sl: Slices) -> str:
    """Pass rate and mean of every result key per value of the slicing field."""
    head = [esc(sl.by), "rows", *(esc(k) for k in sl.keys)]
    rows = []
    for value in sl.ordered():
        group = sl.groups[value]
        cells = []
        for key in sl.keys:
            agg = group.get(key)
            cells.append("-" if agg is None else f"{_pct(agg.pass_rate)} <span class='muted'>({_num(agg.mean)})</span>")
        rows.append([f"<b>{esc(value)}</b>", _int(sl.rows.get(value, 0)), *cells])
    return "".join(
        [
            f'<section id="slices"><h2>By {esc(sl.by)}</h2>',
            "<p class='note'>Pass rate (mean score) per value, read back from the source records.</p>",
            _table(head, rows, set(range(1, len(head)))),
            "</section>",
        ]
    )


def notices(items: list[str]) -> str:
    """Nights that failed after the one reported (or why no night is whole), first on the page."""
    if not items:
        return ""
    lis = "".join(f"<li>{esc(n)}</li>" for n in items)
    return f'<section class="alert" id="notices"><h2>Attention</h2><ul>{lis}</ul></section>'


def gates(report: RunReport) -> str:
    """The run's verdict and its gates: which failed, with threshold and value."""
    s = report.summary
    records = [g for g in s.get("gates") or [] if isinstance(g, dict)]
    status = s.get("status")
    messages = [m for m in s.get("messages") or [] if isinstance(m, str)]
    if not records and not messages and status in (None, "ok"):
        return ""
    applied = s.get("gates_applied", True)
    rows, failed_rows = [], 0
    for g in sorted(records, key=lambda g: (bool(g.get("passed")), str(g.get("key")))):
        ok = bool(g.get("passed"))
        failed_rows += not ok
        rows.append(
            [
                f"<b>{esc(g.get('key'))}</b>",
                esc(g.get("check")),
                esc(g.get("on", "point")),
                _num(g.get("threshold")),
                _num(g.get("actual")),
                _badge("pass" if ok else "fail"),
            ]
        )
    verdict = f"status <b>{esc(status)}</b> · exit {esc(s.get('exit_code'))}"
    if not applied:
        verdict += " · gates recorded by this shard, applied by <code>assay merge</code>"
    head = f'<section id="gates" class="{"alert" if failed_rows or status not in (None, "ok") else ""}">'
    parts = [head, f"<h2>Verdict and gates</h2><p>{verdict}</p>"]
    if rows:
        parts.append(_table(["result key", "check", "on", "threshold", "value", "result"], rows, {3, 4}))
    if messages:
        parts.append("<ul>" + "".join(f"<li>{esc(m)}</li>" for m in messages) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def kpis(report: RunReport) -> str:
    """The headline numbers: records, dead letters, judge usage, wall time."""
    c = report.counts
    totals = report.summary.get("totals") or {}
    items = [
        ("read", _int(c.get("read")), ""),
        ("scored", _int(c.get("scored")), ""),
        ("dead letters", _int(c.get("dead_letters")), "bad" if c.get("dead_letters") else "good"),
        ("rows with warnings", _int(report.rows_with_warnings), ""),
    ]
    if totals.get("requests"):
        items += [
            ("judge requests", _int(totals.get("requests")), ""),
            ("429s", _int(totals.get("rate_limited_429")), "bad" if totals.get("rate_limited_429") else ""),
            ("judge cost", f"${float(totals.get('cost_usd') or 0):.4f}", ""),
        ]
    batch = totals.get("batch")
    if isinstance(batch, dict):  # batch judges: the split of the judge cost
        if not totals.get("requests"):
            items.append(("judge cost", f"${float(totals.get('cost_usd') or 0):.4f}", ""))
        items += [
            ("of it batch", f"${float(batch.get('cost_usd') or 0):.4f}", ""),
            ("batch lines", _int(batch.get("lines")), ""),
        ]
    if report.summary.get("wall_time_s") is not None:
        items.append(("wall time", f"{report.summary['wall_time_s']:,} s", ""))
    status = report.summary.get("status")
    if status:
        items.append(("status", esc(status), "good" if status == "ok" else "bad"))
    cards = "".join(
        f'<div class="kpi {cls}"><div class="v">{v}</div><div class="l">{esc(label)}</div></div>'
        for label, v, cls in items
    )
    note = "" if report.from_rows else '<p class="note">No result rows were readable: numbers from _SUMMARY.json.</p>'
    return f'<div class="kpis">{cards}</div>{note}'


def evaluators(page: Page, report: RunReport) -> str:
    """Per result key: counts, mean, pass rate, errors; overview bars; a score histogram each."""
    rows = []
    for k in report.keys.values():
        errors = f'<span class="neg">{k.errors:,}</span>' if k.errors else "0"
        rows.append(
            [
                f"<b>{esc(k.key)}</b>",
                _int(k.count),
                _int(k.scored),
                errors,
                _int(k.unscored),
                _num(k.mean),
                _pct(k.pass_rate),
                _num(k.threshold, 2),
                f"${k.cost_usd:.4f}" if k.cost_usd else "-",
            ]
        )
    head = ["result key", "count", "scored", "errors", "unscored", "mean", "pass rate", "threshold", "cost"]
    parts = ['<section id="evaluators"><h2>Evaluators</h2>', _table(head, rows, set(range(1, 9)))]
    if report.keys:
        parts.append(f"<h3>Pass rate and mean score</h3>{page.chart(charts.evaluator_overview(report))}")
    if report.from_rows:
        cards = []
        for k in report.keys.values():
            errs = "".join(
                f"<div class='sub'>error ×{n:,}: {esc(msg)}</div>" for msg, n in k.error_messages.most_common(3)
            )
            sub = f"mean {_num(k.mean)} · pass rate {_pct(k.pass_rate)} · errors {k.errors:,}"
            chart = page.chart(charts.histogram(k))
            cards.append(f"<div class='card'><h3>{esc(k.key)}</h3><div class='sub'>{sub}</div>{errs}{chart}</div>")
        parts.append(f"<h3>Score distributions</h3><div class='grid'>{''.join(cards)}</div>")
    parts.append("</section>")
    return "".join(parts)


def _flip_rows(flips: list[Flip]) -> list[list[str]]:
    return [
        [
            esc(f.trace_id),
            esc(f.key),
            f"{_badge(f.before)} → {_badge(f.after)}",
            f"{_num(f.score_before, 2)} → {_num(f.score_after, 2)}",
            f"<div class='muted'>before: {esc(f.comment_before)}</div><div>now: {esc(f.comment_after)}</div>",
        ]
        for f in flips
    ]


def _ci(d: PairedDelta | UnpairedDelta | None) -> str:
    if d is None:
        return '<span class="muted">-</span>'
    if d.interval is None:
        return _delta(d.delta)
    return f"{_delta(d.delta)} <span class='muted'>[{d.interval[0]:+.3f}, {d.interval[1]:+.3f}]</span>"


def _p(p: float | None) -> str:
    return format_p(p)


def _verdict(k: Any) -> str:
    if k.worse:
        verdict = '<span class="neg">significantly worse</span>'
    elif k.significant:
        verdict = '<span class="pos">significantly better</span>'
    else:
        verdict = '<span class="muted">within noise</span>'
    if k.changes:
        verdict += f"<br><span class='neg'>not comparable: {esc('; '.join(k.changes))}</span>"
    return verdict


def unpaired(cmp: Comparison) -> str:
    """Runs without shared traces: each key's delta as independent samples (two-proportion z-test
    and Newcombe interval for the pass rate, Welch's t-test and interval for the mean)."""
    rows = [
        [
            f"<b>{esc(k.key)}</b>",
            f"{_int(k.n_before)} / {_int(k.n_after)}",
            _ci(k.pass_rate_delta),
            _p(k.p_value_holm),
            _ci(k.mean_delta),
            _p(k.mean_p_value_holm),
            _verdict(k),
        ]
        for k in cmp.unpaired
    ]
    head = ["result key", "n before / after", "Δ pass [CI]", "z-test p (Holm)", "Δ mean [CI]", "Welch p (Holm)", ""]
    note = (
        f"<p class='note'>no trace is in both runs: compared as independent samples — pass rate: {esc(PASS_TEST)}; "
        f"mean: {esc(MEAN_TEST)}; {cmp.level:.0%} intervals; significant at α = {cmp.alpha:g} after Holm's "
        "correction over every test of the comparison (docs/statistics.md)</p>"
    )
    return f"<h3>More than noise?</h3>{note}{_table(head, rows, {1, 2, 3, 4, 5})}"


def paired(cmp: Comparison) -> str:
    """Whether each delta is more than noise: paired intervals, McNemar and Wilcoxon p-values
    (Holm-corrected), and the keys the two runs did not score the same way (runs without shared
    traces: :func:`unpaired`)."""
    if cmp.unpaired:
        return unpaired(cmp)
    if not cmp.paired:
        return ""
    rows = []
    for k in cmp.paired:
        verdict = _verdict(k)
        rows.append(
            [
                f"<b>{esc(k.key)}</b>",
                _int(k.n),
                _ci(k.pass_rate_delta),
                _p(k.p_value_holm),
                _ci(k.mean_delta),
                _p(k.mean_p_value_holm),
                verdict,
            ]
        )
    head = ["result key", "pairs", "Δ pass [CI]", "McNemar p (Holm)", "Δ mean [CI]", "Wilcoxon p (Holm)", ""]
    note = (
        f"<p class='note'>paired on trace id; {cmp.level:.0%} intervals; significant at α = {cmp.alpha:g} "
        "after Holm's correction over every test of the comparison (docs/statistics.md)</p>"
    )
    return f"<h3>More than noise?</h3>{note}{_table(head, rows, {1, 2, 3, 4, 5})}"


def comparison(page: Page, cmp: Comparison) -> str:
    """Deltas per key (regressions first) and the flipped verdicts."""
    rows = []
    for d in cmp.deltas:
        b, c = d.baseline, d.current
        rows.append(
            [
                f"<b>{esc(d.key)}</b>",
                _num(b.mean if b else None),
                _num(c.mean if c else None),
                _delta(d.mean_delta),
                _pct(b.pass_rate if b else None),
                _pct(c.pass_rate if c else None),
                _delta(None if d.pass_rate_delta is None else 100 * d.pass_rate_delta, 1) + " pt",
                f'<span class="neg">{d.regressed:,}</span>' if d.regressed else "0",
                _int(d.improved),
            ]
        )
    head = [
        "result key",
        "mean before",
        "mean now",
        "Δ mean",
        "pass before",
        "pass now",
        "Δ pass",
        "pass→fail",
        "fail→pass",
    ]
    before, now = cmp.baseline.info, cmp.current.info
    intro = (
        f"<p class='note'>now: <b>{esc(now.label)}</b> ({esc(now.location)}) · before: <b>{esc(before.label)}</b> "
        f"({esc(before.location)}) · {cmp.matched:,} traces matched by id · {cmp.only_current:,} only now · "
        f"{cmp.only_baseline:,} only before · <b>{cmp.regressions:,}</b> verdicts regressed</p>"
    )
    regressions = [f for f in cmp.flips if f.regression]
    improvements = [f for f in cmp.flips if not f.regression]
    flip_head = ["trace", "result key", "verdict", "score", "comments"]
    parts = [
        '<section id="compare"><h2>Compared with the previous run</h2>',
        intro,
        _table(head, rows, set(range(1, 9))),
        paired(cmp),
        f"<h3>Pass rate before and now</h3>{page.chart(charts.compare_chart(cmp))}",
    ]
    for title, flips in (
        ("Regressions: passed before, not now", regressions),
        ("Improvements: failed before, pass now", improvements),
    ):
        if not flips:
            continue
        shown, more = flips[:SHOWN_FLIPS], flips[SHOWN_FLIPS:]
        parts.append(f"<h3>{title}</h3>{_table(flip_head, _flip_rows(shown))}")
        if more:
            rest = _table(flip_head, _flip_rows(more))
            parts.append(f"<details class='trace'><summary>{len(more)} more</summary><div>{rest}</div></details>")
    parts.append("</section>")
    return "".join(parts)


def trend(page: Page, tr: Trend) -> str:
    """Pass rate and mean of each key over the runs (failed nights shaded, never drawn as zeros),
    the runs' volume and cost, and a table of the last 12 nights with their status."""
    from assay.report.trend import short_labels

    offset = max(0, len(tr.points) - 12)
    labels = short_labels(tr.labels)[offset:]
    head = ["", *(esc(label) for label in labels)]
    statuses = tr.statuses[offset:]
    rows = [["status", *(_status_badge(st) for st in statuses)]]
    rows += [[f"<b>{esc(k)}</b>", *(_pct(v) for v in tr.series(k, "pass_rate")[offset:])] for k in tr.keys]
    bad = [f"{p.label} ({p.status})" for p in tr.points if p.status != "ok"]
    note = (
        f"<p class='note'>Shaded: nights that did not end ok ({esc(', '.join(bad))}); a night without a "
        "whole output has no scores (a gap, not a zero).</p>"
        if bad
        else ""
    )
    return "".join(
        [
            f'<section id="trend"><h2>Trend over {len(tr.points)} runs</h2>',
            note,
            page.chart(charts.trend_chart(tr, "pass_rate", "pass rate per evaluator")),
            page.chart(charts.trend_chart(tr, "mean", "mean score per evaluator")),
            page.chart(charts.trend_counts_chart(tr)),
            f"<h3>Pass rate (last {len(labels)} runs)</h3>",
            _table(head, rows, set(range(1, len(head)))),
            "</section>",
        ]
    )


def _flag(error: str | None) -> str:
    return f" <span class='neg'>⚠ {esc(error)}</span>" if error else ""


def _trajectory(traj: dict[str, Any] | None) -> str:
    if traj is None:
        return "<p class='note'>The source record is not readable from here: results only.</p>"
    if "raw" in traj:
        note = f"<p class='note'>The source record does not normalize ({esc(traj['error'])}):</p>"
        return f"{note}<pre>{esc(traj['raw'])}</pre>"
    parts = [
        f"<p class='note'>trajectory from {esc(traj['where'])} (format {esc(traj['format'])})</p><div class='msgs'>"
    ]
    for m in traj["messages"]:
        calls = "".join(
            f"<div class='call'>→ {esc(tc['name'])}({esc(tc['args'])}){_flag(tc['error'])}</div>"
            for tc in m["tool_calls"]
        )
        result_of = f" <span class='muted'>result of {esc(m['tool_call_id'])}</span>" if m["tool_call_id"] else ""
        text = f"<div class='text'>{esc(m['content'])}</div>" if m["content"] else ""
        parts.append(
            f"<div class='msg {esc(m['role'])}'><div class='role'>{esc(m['role'])}{result_of}</div>{text}{calls}</div>"
        )
    if traj["omitted_messages"]:
        parts.append(f"<p class='note'>… {traj['omitted_messages']} more messages not shown</p>")
    parts.append("</div>")
    if traj["final_output"] is not None:
        parts.append(f"<h3>Final output</h3><pre>{esc(traj['final_output'])}</pre>")
    if traj["reference_tool_calls"] is not None:
        calls = ", ".join(traj["reference_tool_calls"]) or "(none)"
        parts.append(f"<h3>Reference tool calls</h3><div class='call'>{esc(calls)}</div>")
    return "".join(parts)


def _worst_trace(i: int, t: WorstTrace) -> str:
    rows = [
        [
            esc(k),
            _badge(r["verdict"]),
            _num(r["score"], 2) if isinstance(r["score"], int | float) else "-",
            esc(r["value"]),
            esc(r["error"] or r["comment"])
            + (f"<div class='muted'><code>{esc(r['metadata'])}</code></div>" if r["metadata"] else ""),
        ]
        for k, r in sorted(t.results.items(), key=lambda kv: kv[1]["verdict"] == "pass")
    ]
    failing = ", ".join(k for k, r in t.results.items() if r["verdict"] in ("fail", "error"))
    pos = t.position
    where = f"{pos.get('file')}:{pos.get('line')}" if isinstance(pos, dict) and "file" in pos else esc(pos)
    summary = (
        f"<b>{esc(t.trace_id)}</b> · {t.failed} failing · mean {_num(t.mean, 2)} · "
        f"<span class='muted'>{esc(failing)}</span>"
    )
    return (
        f"<details class='trace'{' open' if i == 0 else ''}><summary>{summary}</summary><div>"
        f"<p class='note'>position {esc(where)}</p>"
        f"{_table(['result key', 'verdict', 'score', 'value', 'comment'], rows, {2})}"
        f"{_trajectory(t.trajectory)}</div></details>"
    )


def worst(report: RunReport) -> str:
    """The worst traces: their results with comments, and their trajectories."""
    if not report.worst:
        text = "No failing traces." if report.from_rows else "No result rows readable."
        return f'<section id="worst"><h2>Worst traces</h2><p class="note">{text}</p></section>'
    items = "".join(_worst_trace(i, t) for i, t in enumerate(report.worst))
    return (
        f'<section id="worst"><h2>Worst {len(report.worst)} traces</h2>'
        "<p class='note'>Most failing or erroring results first, then lowest mean score. Click to expand.</p>"
        f"{items}</section>"
    )


def dead_letters(page: Page, report: RunReport) -> str:
    """Dead letters by reason, a chart of them, and the first few records."""
    dead = report.dead
    if not dead.total:
        return '<section id="dead-letters"><h2>Dead letters</h2><p class="note">None.</p></section>'
    rows = [
        [esc(g.stage), esc(g.error_type), _int(g.count), f"<span class='muted'>{esc(g.where)}</span> {esc(g.example)}"]
        for g in dead.by_reason()
    ]
    samples = "".join(
        f"<details class='trace'><summary>{esc(s['stage'])} / {esc(s['error_type'])} · {esc(s['where'])}</summary>"
        f"<div><p>{esc(s['error'])}</p><pre>{esc(s['raw'])}</pre></div></details>"
        for s in dead.samples
    )
    severity = ", ".join(f"{esc(k)} {v:,}" for k, v in dead.severity.most_common())
    return "".join(
        [
            f'<section id="dead-letters"><h2>Dead letters: {dead.total:,}</h2><p class="note">severity: {severity}</p>',
            _table(["stage", "error type", "count", "first example"], rows, {2}),
            page.chart(charts.dead_letter_chart(report)),
            f"<h3>First {len(dead.samples)} records</h3>{samples}</section>",
        ]
    )


def judges(page: Page, report: RunReport) -> str:
    """Per judge endpoint: requests, 429s, retries, errors, latency, tokens, cost."""
    rows = judge_rows(report)
    if not rows:
        return '<section id="judges"><h2>Judges</h2><p class="note">No judge was called in this run.</p></section>'
    table_rows = [
        [
            f"<b>{esc(r['judge'])}</b>",
            esc(r["model"]),
            _int(r["requests"]),
            _int(r["http_429"]),
            _int(r["retries"]),
            _int(r["errors"]),
            _int(r["timeouts"]),
            _int(r["cached"]),
            _num(r["latency_p50_s"]),
            _num(r["latency_p99_s"]),
            _int(r["input_tokens"]),
            _int(r["output_tokens"]),
            f"${r['cost_usd']:.4f}",
        ]
        for r in rows
    ]
    head = ["judge", "model", "requests", "429s", "retries", "errors", "timeouts", "cached", "p50 s", "p99 s"]
    head += ["input tokens", "output tokens", "cost"]
    return "".join(
        [
            '<section id="judges"><h2>Judges</h2>',
            _table(head, table_rows, set(range(2, 13))),
            page.chart(charts.judge_chart(rows)),
            "</section>",
        ]
    )
