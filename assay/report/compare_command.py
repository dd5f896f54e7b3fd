"""``assay compare BEFORE AFTER``: two runs paired on ``trace_id``, tested per result key; runs
that share no trace (two nights of production traffic), or ``--unpaired``, are compared as
independent samples (two-proportion z-test and Welch's t-test, :mod:`assay.report.unpaired`).

Prints a table (or, with ``--json``, one JSON object on stdout and nothing else) and returns the
exit code: 0; 3 with ``--fail-on regression`` when a key got significantly worse (at ``alpha``,
Holm-corrected over the keys); 2 when ``--fail-on regression`` is asked of runs that did not
score some key the same way (params, prompt, judge model or threshold changed) unless
``allow_changes``, or of runs with no key in common.

>>> from assay.report.compare_command import compare_command
>>> code = compare_command("results/dt=2026-11-21", "results/dt=2026-11-22", fail_on="regression")  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import orjson

from assay.exceptions import ConfigError
from assay.report.compare import Comparison, compare_runs
from assay.report.paired import PairedKey
from assay.report.store import close_stores
from assay.report.unpaired import MEAN_TEST, PASS_TEST, UnpairedKey
from assay.stats import PairedDelta, UnpairedDelta
from assay.stats.pvalues import format_p, p_text

__all__ = ["EXIT_NOT_COMPARABLE", "EXIT_REGRESSION", "compare_command", "comparison_dict", "print_unpaired"]

EXIT_REGRESSION = 3
EXIT_NOT_COMPARABLE = 2


def comparison_dict(cmp: Comparison, flips: int = 40) -> dict[str, Any]:
    """The comparison as plain data (``assay compare --json``)."""
    return {
        "before": {"location": cmp.baseline.info.location, "run_id": cmp.baseline.summary.get("run_id")},
        "after": {"location": cmp.current.info.location, "run_id": cmp.current.summary.get("run_id")},
        "alpha": cmp.alpha,
        "ci_level": cmp.level,
        "design": cmp.design,
        "tests": _tests(cmp),
        "matched": cmp.matched,
        "only_before": {"count": cmp.only_baseline, "sample": cmp.only_baseline_sample},
        "only_after": {"count": cmp.only_current, "sample": cmp.only_current_sample},
        "keys": {k.key: k.to_dict() for k in cmp.tested},
        "keys_only_before": sorted(set(cmp.baseline.keys) - set(cmp.current.keys)),
        "keys_only_after": sorted(set(cmp.current.keys) - set(cmp.baseline.keys)),
        "regressions": [k.key for k in cmp.significant_regressions],
        "comparable": not cmp.not_comparable,
        "not_comparable": {k.key: k.changes for k in cmp.not_comparable},
        "flips": [
            {
                "trace_id": f.trace_id,
                "key": f.key,
                "before": f.before,
                "after": f.after,
                "score_before": f.score_before,
                "score_after": f.score_after,
                "comment_before": f.comment_before,
                "comment_after": f.comment_after,
            }
            for f in cmp.flips[:flips]
        ],
    }


def _tests(cmp: Comparison) -> dict[str, str]:
    """Which test and interval each statistic got."""
    if cmp.unpaired:
        return {"pass_rate": PASS_TEST, "mean": MEAN_TEST, "correction": "Holm"}
    return {
        "pass_rate": "McNemar exact, paired bootstrap interval",
        "mean": "Wilcoxon signed-rank, paired bootstrap interval",
        "correction": "Holm",
    }


def decide(cmp: Comparison, fail_on: str | None, allow_changes: bool) -> tuple[int, list[str]]:
    """The exit code and the messages that explain it."""
    messages = [f"{k.key}: not comparable: {'; '.join(k.changes)}" for k in cmp.not_comparable]
    gone = sorted(set(cmp.baseline.keys) - set(cmp.current.keys))
    if gone:
        messages.append(f"result keys only in the baseline (not compared): {', '.join(gone)}")
    if cmp.matched == 0:
        messages.append(
            f"no trace is in both runs: compared as independent samples (pass rates: {PASS_TEST}; means: {MEAN_TEST})"
        )
    worse = cmp.significant_regressions
    messages.extend(f"{k.key}: significantly worse ({_why(k)})" for k in worse)
    if fail_on != "regression":
        return 0, messages
    if not any(_has_test(k) for k in cmp.tested):  # a gate that compared nothing must not pass
        return EXIT_NOT_COMPARABLE, [*messages, "no result key was tested in both runs"]
    if cmp.not_comparable and not allow_changes:
        return EXIT_NOT_COMPARABLE, [
            *messages,
            "refusing to judge a regression (pass --allow-changes to compare anyway)",
        ]
    return (EXIT_REGRESSION if worse else 0), messages


def _has_test(k: PairedKey | UnpairedKey) -> bool:
    if isinstance(k, UnpairedKey):
        return k.p_value_holm is not None or k.mean_p_value_holm is not None
    return k.n > 0


def _why(k: PairedKey | UnpairedKey) -> str:
    if isinstance(k, UnpairedKey):
        return _why_unpaired(k)
    parts = []
    if k.p_value_holm is not None and k.pass_rate_delta is not None and k.pass_rate_delta.delta < 0:
        parts.append(f"pass rate {_signed(k.pass_rate_delta.delta)}, McNemar {p_text(k.p_value_holm)} Holm")
    if k.mean_p_value_holm is not None and k.mean_delta is not None and k.mean_delta.delta < 0:
        parts.append(f"mean {_signed(k.mean_delta.delta)}, Wilcoxon {p_text(k.mean_p_value_holm)} Holm")
    return "; ".join(parts)


def _why_unpaired(k: UnpairedKey) -> str:
    parts = []
    d = k.pass_rate_delta
    if k.p_value_holm is not None and d is not None and d.delta < 0:
        parts.append(f"pass rate {_signed(d.delta)}, two-proportion z-test p={k.p_value_holm:.3g} Holm")
    m = k.mean_delta
    if k.mean_p_value_holm is not None and m is not None and m.delta < 0:
        parts.append(f"mean {_signed(m.delta)}, Welch t-test p={k.mean_p_value_holm:.3g} Holm")
    return "; ".join(parts)


def _signed(x: float) -> str:
    return f"{x:+.3f}"


def _delta_text(d: PairedDelta | UnpairedDelta | None) -> str:
    if d is None:
        return "-"
    if d.interval is None:
        return _signed(d.delta)
    return f"{_signed(d.delta)} [{d.interval[0]:+.3f},{d.interval[1]:+.3f}]"


def _p(p: float | None) -> str:
    return format_p(p)


def print_unpaired(cmp: Comparison) -> None:
    """An unpaired comparison as a terminal table (shared with ``assay report --compare``)."""
    from rich.markup import escape
    from rich.table import Table

    from assay.report.terminal import console, plain, safe

    before, after = cmp.baseline.info, cmp.current.info
    console.print(
        f"[bold]compare[/bold] {escape(safe(before.location))} -> {escape(safe(after.location))}: "
        f"{cmp.matched:,} traces in both runs: compared as independent samples "
        f"(pass rate: {PASS_TEST}; mean: {MEAN_TEST}; alpha {cmp.alpha:g}, Holm over keys; "
        f"{cmp.level:.0%} intervals)"
    )
    table = Table(title="per result key (after - before, unpaired)", title_justify="left")
    cols = (
        "result key",
        "n before",
        "n after",
        "pass rate",
        "Δ pass [CI]",
        "p (Holm)",
        "mean",
        "Δ mean [CI]",
        "p (Holm)",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "result key" else "right", no_wrap=True)
    table.add_column("note")
    for k in cmp.unpaired:
        note = "[red]WORSE[/red]" if k.worse else ("significant" if k.significant else "")
        if k.changes:
            note = (note + " " if note else "") + "[yellow]not comparable[/yellow]"
        rates = "-" if k.pass_rate_before is None else f"{k.pass_rate_before:.3f}→{k.pass_rate_after:.3f}"
        means = "-" if k.mean_before is None else f"{k.mean_before:.3f}→{k.mean_after:.3f}"
        table.add_row(
            plain(k.key),
            f"{k.n_before:,}",
            f"{k.n_after:,}",
            rates,
            _delta_text(k.pass_rate_delta),
            _p(k.p_value_holm),
            means,
            _delta_text(k.mean_delta),
            _p(k.mean_p_value_holm),
            note,
        )
    console.print(table)


def print_paired(cmp: Comparison, flips: int) -> None:
    """The comparison as terminal tables."""
    from rich.markup import escape
    from rich.table import Table

    from assay.report.terminal import console, plain, safe

    if cmp.unpaired:
        print_unpaired(cmp)
        return

    before, after = cmp.baseline.info, cmp.current.info
    console.print(
        f"[bold]compare[/bold] {escape(safe(before.location))} -> {escape(safe(after.location))}: "
        f"{cmp.matched:,} traces paired, "
        f"{cmp.only_baseline:,} only before, {cmp.only_current:,} only after "
        f"(alpha {cmp.alpha:g}, Holm over keys; {cmp.level:.0%} intervals)"
    )
    table = Table(title="per result key (after - before, paired on trace_id)", title_justify="left")
    cols = ("result key", "n", "pass rate", "Δ pass [CI]", "p (Holm)", "Δ mean [CI]", "p (Holm)", "pass→fail/back")
    for col in cols:
        table.add_column(col, justify="left" if col == "result key" else "right", no_wrap=True)
    table.add_column("note")
    for k in cmp.paired:
        note = "[red]WORSE[/red]" if k.worse else ("significant" if k.significant else "")
        if k.changes:
            note = (note + " " if note else "") + "[yellow]not comparable[/yellow]"
        rates = "-" if k.pass_rate_before is None else f"{k.pass_rate_before:.3f}→{k.pass_rate_after:.3f}"
        table.add_row(
            plain(k.key),
            f"{k.n:,}",
            rates,
            _delta_text(k.pass_rate_delta),
            _p(k.p_value_holm),
            _delta_text(k.mean_delta),
            _p(k.mean_p_value_holm),
            f"{k.regressed:,}/{k.improved:,}",
            note,
        )
    console.print(table)
    if cmp.flips[:flips]:
        ft = Table(title=f"flipped verdicts (first {min(flips, len(cmp.flips))})", title_justify="left")
        for col in ("trace", "result key", "before -> after", "score before", "score after"):
            ft.add_column(col, overflow="fold")
        for f in cmp.flips[:flips]:
            ft.add_row(
                plain(f.trace_id), plain(f.key), f"{f.before} -> {f.after}", plain(f.score_before), plain(f.score_after)
            )
        console.print(ft)
    if cmp.only_baseline_sample or cmp.only_current_sample:
        console.print(
            safe(
                f"attrition: only before e.g. {', '.join(cmp.only_baseline_sample[:5]) or '-'}; "
                f"only after e.g. {', '.join(cmp.only_current_sample[:5]) or '-'}"
            ),
            markup=False,
        )


def compare_command(
    before: str,
    after: str,
    *,
    json_out: bool = False,
    fail_on: Literal["regression"] | None = None,
    alpha: float = 0.05,
    level: float = 0.95,
    flips: int = 20,
    allow_changes: bool = False,
    unpaired: bool = False,
) -> int:
    """Compare ``after`` with ``before``, print it, and return the exit code (module docstring)."""
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"--alpha must be in (0, 1), got {alpha}")
    try:
        cmp = compare_runs(
            after, before, worst=0, trajectories=False, flips=max(flips, 1), alpha=alpha, level=level, unpaired=unpaired
        )
    finally:
        close_stores()
    code, messages = decide(cmp, fail_on, allow_changes)
    if json_out:
        data = comparison_dict(cmp, flips)
        data["messages"] = messages
        data["exit_code"] = code
        sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        print_paired(cmp, flips)
        for m in messages:
            print(f"assay: {m}", file=sys.stderr)
    return code
