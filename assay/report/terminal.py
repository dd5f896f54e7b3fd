"""Terminal tables: the run summary, dry-run estimates, and the report of a results location."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from assay.pipeline.summary import fmt_num

if TYPE_CHECKING:
    from assay.report.build import RunReport
    from assay.report.compare import Comparison
    from assay.report.slices import Slices
    from assay.report.trend import Trend

console = Console(highlight=False, soft_wrap=True)
if not console.is_terminal:
    console.width = max(console.width, 150)

# What a terminal would act on: C0 controls but newline and tab (ESC starts the sequences that
# retitle the window or clear the screen; CR and BS overwrite what was printed), DEL, C1
# controls, and the bidirectional overrides that reorder what is shown.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: Any) -> str:
    """Text from traces or results, safe to print: every character a terminal would act on is
    written as an escape (``\\x1b``, ``\\u202e``); newlines and tabs are kept.

    >>> safe("ok\\x1b]0;title\\x07 \\x1b[2J")
    'ok\\\\x1b]0;title\\\\x07 \\\\x1b[2J'
    """
    return _UNSAFE.sub(_escape, text if isinstance(text, str) else str(text))


def plain(text: Any) -> Text:
    """A table cell or line of untrusted text: :func:`safe`, and never read as rich markup (a
    trace id such as ``[/bold]`` is shown as it is)."""
    return Text(safe(text))


def print_summary(summary: dict[str, Any]) -> None:
    c = summary.get("counts", {})
    console.print(
        f"[bold]assay run {summary.get('run_id')}[/bold]  status={summary.get('status')}  "
        f"wall={summary.get('wall_time_s')}s  {summary.get('records_per_s')} rec/s"
    )
    console.print(
        f"read {c.get('read', 0):,}  scored {c.get('scored', 0):,}  dead letters {c.get('dead_letters', 0):,}  "
        f"(parse {c.get('parse_errors', 0):,}, normalize {c.get('normalize_errors', 0):,})  "
        f"warnings {c.get('warnings', 0):,}"
    )
    table = Table(show_lines=False)
    keys = summary.get("evaluators", {})
    judged = any(ks.get("input_tokens") or ks.get("judge_calls") for ks in keys.values())
    levels = {ks.get("ci_level") for ks in keys.values() if ks.get("pass_rate_ci")}
    ci_col = f"{levels.pop():.0%} CI" if len(levels) == 1 else ("CI" if levels else None)
    skipped = any(ks.get("unscored") for ks in keys.values())
    cols = [
        "result key",
        "scored",
        "errors",
        *(["not scored (why)"] if skipped else []),
        "mean",
        "pass rate",
        *([ci_col] if ci_col else []),
        "threshold",
    ]
    for col in [*cols, "tokens", "cost $"] if judged else cols:
        left = col in ("result key", "not scored (why)")
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "result key")
    for key, ks in keys.items():
        ci = ks.get("pass_rate_ci")
        row = [
            key,
            f"{ks['scored']:,}",
            f"{ks['errors']:,}",
            *([_not_scored(ks)] if skipped else []),
            fmt_num(ks.get("mean")),
            fmt_num(ks.get("pass_rate")),
            *([f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "-"] if ci_col else []),
            fmt_num(ks.get("threshold"), 2),
        ]
        if judged:
            tokens = ks.get("input_tokens", 0) + ks.get("output_tokens", 0)
            row += [f"{tokens:,}" if tokens else "-", fmt_num(ks.get("cost_usd"), 4) if ks.get("cost_usd") else "-"]
        table.add_row(*row)
    console.print(table)
    kappas = [f"{k} {fmt_num(ks.get('kappa'))}" for k, ks in keys.items() if "calibration" in ks]
    if kappas:
        console.print(safe("judge vs human labels (Cohen's kappa): " + ", ".join(kappas)), markup=False)
    swaps = [f"{k} {fmt_num(ks['position_consistency'])}" for k, ks in keys.items() if "position_consistency" in ks]
    if swaps:
        console.print(safe("position consistency (swap): " + ", ".join(swaps)), markup=False)
    totals = summary.get("totals") or {}
    if totals.get("requests"):
        console.print(
            f"judges: {totals['requests']:,} requests, {totals['rate_limited_429']:,} × 429, "
            f"{totals['retries']:,} retries, {totals['errors']:,} errors, "
            f"{totals['input_tokens'] + totals['output_tokens']:,} tokens, ${totals['cost_usd']:.4f}"
        )
    split = cost_split(totals)
    if split:
        console.print(split)
    outputs = summary.get("outputs", {})
    console.print(f"results: {outputs.get('results')}  dead letters: {outputs.get('dead_letter')}")


def _not_scored(ks: dict[str, Any]) -> Text:
    """How many results of a key were not scored, and the most common reason (``40: no reference
    output to compare with``)."""
    n = int(ks.get("unscored") or 0)
    if not n:
        return Text("0")
    reasons = ks.get("unscored_reasons") or {}
    top = next((r for r in reasons if r != "(other reasons)"), None)  # most common first
    return plain(f"{n:,}: {top}" if top else f"{n:,}")


def print_dry_run(report: dict[str, Any]) -> None:
    table = Table(title="dry run: estimated judge usage (nothing was spent)")
    rows = report.get("evaluators", [])
    batch = any(row.get("mode") == "batch" for row in rows)
    cols = ["evaluator", "judge", "calls", "input tokens", "output tokens", "cost $"]
    for col in [*cols, "real-time $", "batches"] if batch else cols:
        table.add_column(col, justify="left" if col in ("evaluator", "judge") else "right")
    for row in rows:
        cells = [
            row["evaluator"],
            row.get("judge") or "-",
            f"{row['calls']:,}",
            f"{row['input_tokens']:,}",
            f"{row['output_tokens']:,}",
            f"{row['cost_usd']:.4f}",
        ]
        if batch:
            cells += [f"{row.get('realtime_cost_usd', row['cost_usd']):.4f}", f"{row.get('batches', '-')}"]
        table.add_row(*cells)
    console.print(table)
    line = (
        f"records: {report.get('records', 0):,} (dead letters: {report.get('dead_letters', 0):,})  "
        f"total calls {report.get('calls', 0):,}  estimated cost ${report.get('cost_usd', 0.0):.4f}"
    )
    for note in report.get("notes") or []:
        console.print(f"why: {safe(note)}", markup=False)
    if batch:
        line += (
            f" (batch price; real time ${report.get('realtime_cost_usd', 0.0):.4f}) in {report['batches']:,} batches"
        )
    console.print(line)


def _delta(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    color = "red" if x < 0 else "green" if x > 0 else "dim"
    return f"[{color}]{x:+.{digits}f}[/{color}]"


def _evaluator_table(report: RunReport) -> Table:
    keys = report.keys.values()
    judged = any(k.input_tokens or k.cost_usd for k in keys)
    table = Table(title="evaluators", title_justify="left")
    cols = ["result key", "count", "scored", "errors", "unscored", "mean", "pass rate", "threshold"]
    for col in [*cols, "tokens", "cost $"] if judged else cols:
        table.add_column(col, justify="left" if col == "result key" else "right", no_wrap=col == "result key")
    for k in keys:
        row: list[str | Text] = [plain(k.key), f"{k.count:,}", f"{k.scored:,}"]
        row.append(f"[red]{k.errors:,}[/red]" if k.errors else "0")
        row += [f"{k.unscored:,}", fmt_num(k.mean), fmt_num(k.pass_rate), fmt_num(k.threshold, 2)]
        if judged:
            tokens = k.input_tokens + k.output_tokens
            row += [f"{tokens:,}" if tokens else "-", f"{k.cost_usd:.4f}" if k.cost_usd else "-"]
        table.add_row(*row)
    return table


def cost_split(totals: dict[str, Any]) -> str | None:
    """Batch judges: the judge cost split into batch lines and real-time calls (None without)."""
    batch = totals.get("batch")
    if not isinstance(batch, dict):
        return None
    rt = totals.get("realtime") or {}
    batch_tokens = int(batch.get("input_tokens", 0)) + int(batch.get("output_tokens", 0))
    rt_tokens = int(rt.get("input_tokens", 0)) + int(rt.get("output_tokens", 0))
    return (
        f"judge cost ${float(totals.get('cost_usd', 0)):.4f}: batch ${float(batch.get('cost_usd', 0)):.4f}"
        f" ({int(batch.get('lines', 0)):,} lines, {batch_tokens:,} tokens),"
        f" real time ${float(rt.get('cost_usd', 0)):.4f} ({rt_tokens:,} tokens)"
    )


def judge_rows(report: RunReport) -> list[dict[str, Any]]:
    """One dict per judge endpoint with the numbers the report shows (shared with the HTML)."""
    rows: list[dict[str, Any]] = []
    for name, j in sorted(report.judges.items()):
        rows.append(
            {
                "judge": name,
                "model": j.get("model") or "",
                "requests": int(j.get("requests", 0) or 0),
                "ok": int(j.get("ok", 0) or 0),
                "http_429": int(j.get("http_429", 0) or 0),
                "http_5xx": int(j.get("http_5xx", 0) or 0),
                "retries": int(j.get("retries", 0) or 0),
                "errors": int(j.get("errors", 0) or 0),
                "timeouts": int(j.get("timeouts", 0) or 0),
                "cached": int(j.get("cached", 0) or 0),
                "latency_p50_s": j.get("latency_p50_s"),
                "latency_p99_s": j.get("latency_p99_s"),
                "input_tokens": int(j.get("input_tokens", 0) or 0),
                "output_tokens": int(j.get("output_tokens", 0) or 0),
                "cost_usd": float(j.get("cost_usd", 0.0) or 0.0),
            }
        )
        r = rows[-1]
        other = int(j.get("http_4xx", 0) or 0) + int(j.get("connection_errors", 0) or 0)
        r["other"] = max(other, r["requests"] - r["ok"] - r["http_429"] - r["http_5xx"] - r["timeouts"])
    return rows


def _judges_table(report: RunReport) -> Table | None:
    rows = judge_rows(report)
    if not rows:
        return None
    table = Table(title="judges", title_justify="left")
    cols = ["judge", "model", "requests", "429s", "retries", "errors", "timeouts", "cached"]
    cols += ["p50 s", "p99 s", "in tokens", "out tokens", "cost $"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("judge", "model") else "right")
    for r in rows:
        table.add_row(
            r["judge"],
            r["model"],
            f"{r['requests']:,}",
            f"{r['http_429']:,}",
            f"{r['retries']:,}",
            f"{r['errors']:,}",
            f"{r['timeouts']:,}",
            f"{r['cached']:,}",
            fmt_num(r["latency_p50_s"]),
            fmt_num(r["latency_p99_s"]),
            f"{r['input_tokens']:,}",
            f"{r['output_tokens']:,}",
            f"{r['cost_usd']:.4f}",
        )
    return table


def _dead_letter_table(report: RunReport) -> Table | None:
    groups = report.dead.by_reason()
    if not groups:
        return None
    severity = ", ".join(f"{n:,} {name}" for name, n in report.dead.severity.most_common())
    table = Table(title=f"dead letters by reason ({severity})", title_justify="left")
    for col in ("stage", "error type", "count", "first example"):
        table.add_column(col, justify="right" if col == "count" else "left", overflow="fold")
    for g in groups:
        table.add_row(plain(g.stage), plain(g.error_type), f"{g.count:,}", plain(f"{g.where}  {g.example}".strip()))
    return table


def _worst_table(report: RunReport, limit: int = 5) -> Table | None:
    if not report.worst:
        return None
    table = Table(
        title=f"worst traces (first {min(limit, len(report.worst))} of {len(report.worst)})", title_justify="left"
    )
    for col in ("trace", "failed", "mean", "failing results"):
        table.add_column(col, justify="right" if col in ("failed", "mean") else "left", overflow="fold")
    for t in report.worst[:limit]:
        bad = [k for k, r in t.results.items() if r["verdict"] in ("fail", "error")]
        first = t.results[bad[0]] if bad else None
        text = ", ".join(bad) + (f" — {bad[0]}: {first['error'] or first['comment']}" if first else "")
        table.add_row(plain(t.trace_id), str(t.failed), fmt_num(t.mean, 2), plain(text[:200]))
    return table


def print_slices(slices: Slices, metric: str = "pass_rate") -> None:
    """Every result key's pass rate and mean per value of the slicing field."""
    table = Table(title=f"by {slices.by}: pass rate (mean)", title_justify="left")
    table.add_column(slices.by, no_wrap=True, overflow="ellipsis", max_width=40)
    table.add_column("rows", justify="right")
    for key in slices.keys:
        table.add_column(key, justify="right")
    for value in slices.ordered():
        group = slices.groups[value]
        cells = []
        for key in slices.keys:
            agg = group.get(key)
            cells.append("-" if agg is None else f"{fmt_num(agg.pass_rate)} ({fmt_num(agg.mean)})")
        table.add_row(plain(value), f"{slices.rows.get(value, 0):,}", *cells)
    console.print(table)


def print_notices(notices: list[str]) -> None:
    """What the reader must see first: nights that failed after the one reported."""
    for notice in notices:
        console.print(Text("! " + safe(notice), style="bold red"))


def gates_table(summary: dict[str, Any]) -> Table | None:
    """The gates the run applied (or, for one shard, recorded): key, check, threshold, value."""
    gates = [g for g in summary.get("gates") or [] if isinstance(g, dict)]
    if not gates:
        return None
    applied = summary.get("gates_applied", True)
    title = "gates" if applied else "gates (recorded by this shard; applied at merge)"
    table = Table(title=title, title_justify="left")
    for col in ("result key", "check", "on", "threshold", "value", "result"):
        table.add_column(col, justify="right" if col in ("threshold", "value") else "left")
    for g in sorted(gates, key=lambda g: (bool(g.get("passed")), str(g.get("key")))):
        passed = bool(g.get("passed"))
        table.add_row(
            plain(g.get("key")),
            plain(g.get("check")),
            plain(g.get("on", "point")),
            fmt_num(g.get("threshold")),
            fmt_num(g.get("actual")),
            Text("passed", style="green") if passed else Text("FAILED", style="bold red"),
        )
    return table


def print_run_report(report: RunReport) -> None:
    """The terminal report of one run: header, evaluators, judges, dead letters, worst traces."""
    s = report.summary
    c = report.counts
    status = s.get("status", "?" if s else "no _SUMMARY.json")
    console.print(
        f"[bold]{report.info.location}[/bold]  run {s.get('run_id', '?')}  status={status}  "
        f"exit={s.get('exit_code', '-')}  started={s.get('started_at', '-')}  "
        f"{'complete' if report.info.complete else 'no _SUCCESS'}"
    )
    console.print(
        f"read {c.get('read', 0):,}  scored {c.get('scored', 0):,}  dead letters {c.get('dead_letters', 0):,}  "
        f"rows {report.rows:,}  warnings {report.rows_with_warnings:,}"
    )
    tables = (
        gates_table(s),
        _evaluator_table(report),
        _judges_table(report),
        _dead_letter_table(report),
        _worst_table(report),
    )
    for table in tables:
        if table is not None:
            console.print(table)
    split = cost_split(s.get("totals") or {})
    if split:
        console.print(split)
    for message in s.get("messages") or []:
        console.print(f"message: {safe(message)}", markup=False)


def print_comparison(cmp: Comparison, flips: int = 15) -> None:
    """Per-key deltas (regressions first) and the first flipped verdicts."""
    cur, base = cmp.current.info, cmp.baseline.info
    console.print(
        f"[bold]compare[/bold] {cur.label} ({cur.location}) against {base.label} ({base.location}): "
        f"{cmp.matched:,} traces matched, {cmp.only_current:,} only now, {cmp.only_baseline:,} only before, "
        f"{cmp.regressions:,} regressed verdicts"
    )
    table = Table(title="deltas (regressions first)", title_justify="left")
    for col in ("result key", "mean before", "mean now", "Δ mean", "pass before", "pass now", "Δ pass"):
        table.add_column(col, justify="left" if col == "result key" else "right", no_wrap=col == "result key")
    table.add_column("pass→fail", justify="right")
    table.add_column("fail→pass", justify="right")
    for d in cmp.deltas:
        b, c = d.baseline, d.current
        table.add_row(
            d.key,
            fmt_num(b.mean if b else None),
            fmt_num(c.mean if c else None),
            _delta(d.mean_delta),
            fmt_num(b.pass_rate if b else None),
            fmt_num(c.pass_rate if c else None),
            _delta(d.pass_rate_delta),
            f"[red]{d.regressed:,}[/red]" if d.regressed else "0",
            f"{d.improved:,}",
        )
    console.print(table)
    if cmp.unpaired:
        _print_unpaired_tests(cmp)
    elif cmp.paired:
        worse = ", ".join(k.key for k in cmp.significant_regressions) or "none"
        changed = ", ".join(k.key for k in cmp.not_comparable)
        console.print(
            safe(
                f"significantly worse (paired, Holm, alpha {cmp.alpha:g}): {worse}"
                + (f"; not comparable (evaluator changed): {changed}" if changed else "")
                + " — details: assay compare"
            ),
            markup=False,
        )
    if cmp.flips:
        shown = cmp.flips[:flips]
        flip_table = Table(title=f"flipped verdicts (first {len(shown)})", title_justify="left")
        for col in ("trace", "result key", "before → now", "comment now"):
            flip_table.add_column(col, overflow="fold")
        for f in shown:
            arrow = f"{f.before} → {f.after}"
            flip_table.add_row(
                plain(f.trace_id),
                plain(f.key),
                f"[red]{arrow}[/red]" if f.regression else arrow,
                plain(f.comment_after[:160]),
            )
        console.print(flip_table)


def _print_unpaired_tests(cmp: Comparison) -> None:
    """Runs without shared traces: each key's tests as independent samples, and which they are."""
    from assay.report.unpaired import MEAN_TEST, PASS_TEST

    def ci(d: Any) -> str:
        if d is None:
            return "-"
        if d.interval is None:
            return f"{d.delta:+.3f}"
        return f"{d.delta:+.3f} [{d.interval[0]:+.3f},{d.interval[1]:+.3f}]"

    def p(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    table = Table(
        title=f"no trace in both runs: independent samples (pass: {PASS_TEST}; mean: {MEAN_TEST}; Holm)",
        title_justify="left",
    )
    for col in ("result key", "Δ pass [CI]", "p (Holm)", "Δ mean [CI]", "p (Holm)", "note"):
        table.add_column(col, justify="left" if col in ("result key", "note") else "right", no_wrap=col != "note")
    for k in cmp.unpaired:
        note = "[red]WORSE[/red]" if k.worse else ("significant" if k.significant else "")
        if k.changes:
            note = (note + " " if note else "") + "[yellow]not comparable[/yellow]"
        table.add_row(
            plain(k.key), ci(k.pass_rate_delta), p(k.p_value_holm), ci(k.mean_delta), p(k.mean_p_value_holm), note
        )
    console.print(table)
    worse = ", ".join(k.key for k in cmp.significant_regressions) or "none"
    console.print(safe(f"significantly worse (unpaired, Holm, alpha {cmp.alpha:g}): {worse}"), markup=False)


def print_trend(trend: Trend, metric: str = "pass_rate", last: int | None = None) -> None:
    """``metric`` of every result key over the last runs that fit the terminal (``last``: at most
    that many), each night's status, reads, dead letters and cost. A night that did not produce a
    whole output shows its status and no scores."""
    from assay.report.trend import short_labels

    fit = max(3, (console.width - 30) // 10)
    count = min(fit, last) if last else fit
    points = trend.points[-count:]
    offset = len(trend.points) - len(points)
    labels = short_labels([p.label for p in points])
    shown = f"the last {len(points)} of {len(trend.points)}" if len(points) < len(trend.points) else str(len(points))
    title = f"trend: {metric.replace('_', ' ')} over {shown} runs"
    table = Table(title=title, title_justify="left")
    table.add_column("result key", no_wrap=True)
    for label in labels:
        table.add_column(label, justify="right", no_wrap=True)
    statuses = [Text(st, style="green" if st == "ok" else "bold red") for st in trend.statuses[offset:]]
    table.add_row("status", *statuses)
    table.add_section()
    for key in trend.keys:
        table.add_row(key, *(fmt_num(v) for v in trend.series(key, metric)[offset:]))
    table.add_section()
    table.add_row("read", *(f"{v:,}" for v in trend.count_series("read")[offset:]))
    table.add_row("dead letters", *(f"{v:,}" for v in trend.count_series("dead_letters")[offset:]))
    table.add_row("judge cost $", *(f"{v:.4f}" for v in trend.cost_series()[offset:]))
    console.print(table)
