"""``assay report``: what the command does with its arguments (the CLI only parses them)."""

from __future__ import annotations

from pathlib import Path

from assay.report.build import build_run_report
from assay.report.compare import Comparison, compare_runs
from assay.report.load import RunInfo, read_run_info
from assay.report.slices import slice_by
from assay.report.store import close_stores, expand_locations
from assay.report.terminal import (
    console,
    print_comparison,
    print_notices,
    print_run_report,
    print_slices,
    print_trend,
)
from assay.report.trend import Trend, build_trend, night_status

__all__ = ["choose_runs", "failure_notice", "report_command"]


def report_command(
    results: list[str],
    *,
    html: Path | None = None,
    compare: str | None = None,
    worst: int = 20,
    quiet: bool = False,
    by: str | None = None,
) -> None:
    """Report on one run, or on several (a trend, the newest compared with the one before it);
    ``compare`` names an explicit baseline for the newest run; ``by`` (``metadata.model``) slices
    the reported run by a field of its traces. Prints tables unless ``quiet``;
    writes the HTML report to ``html`` when given. Raises :class:`~assay.exceptions.AssayError`."""
    try:
        _report(results, html=html, compare=compare, worst=worst, quiet=quiet, by=by)
    finally:
        close_stores()  # e.g. the S3 client every s3:// location shared


def choose_runs(infos: list[RunInfo]) -> tuple[RunInfo, RunInfo | None, list[RunInfo]]:
    """Which run a report leads with: the newest whole output (``_SUCCESS``; a night whose gates
    failed is whole), the whole one before it as the baseline, and the nights after it that did
    not finish (a missing partition, a failed run), which are reported as such, never in its place.
    With no whole night at all, the newest night leads (and shows why it failed)."""
    whole = [i for i in infos if i.complete]
    if not whole:
        return infos[-1], (infos[-2] if len(infos) > 1 else None), []
    current = whole[-1]
    later = [i for i in infos if i.sort_key > current.sort_key]
    return current, (whole[-2] if len(whole) > 1 else None), later


def failure_notice(info: RunInfo) -> str:
    """One line about a night that did not produce a whole output."""
    s = info.summary
    error = s.get("error") if isinstance(s.get("error"), dict) else None
    why = error.get("message") if error else "; ".join(map(str, s.get("messages") or [])) or "no _SUCCESS"
    code = s.get("exit_code")
    return f"{info.label}: {night_status(info)}{f' (exit {code})' if code is not None else ''}: {why}"


def _report(
    results: list[str], *, html: Path | None, compare: str | None, worst: int, quiet: bool, by: str | None
) -> None:
    infos = sorted((read_run_info(loc) for loc in expand_locations(results)), key=lambda i: i.sort_key)
    current, previous, later = choose_runs(infos)
    notices = [f"not whole, after the last whole night {current.label}: {failure_notice(i)}" for i in later]
    if not current.complete:
        notices.insert(0, f"no whole output among these runs; the newest: {failure_notice(current)}")
    trend: Trend | None = build_trend(infos) if len(infos) > 1 else None
    baseline = compare if compare is not None else previous
    comparison: Comparison | None = None
    if baseline is not None:
        comparison = compare_runs(current, baseline, worst=worst)
        report = comparison.current
    else:
        report = build_run_report(current, worst=worst)
    sliced = slice_by(current, by) if by else None
    if not quiet:
        print_notices(notices)
        print_run_report(report)
        if sliced is not None:
            print_slices(sliced)
        if comparison is not None:
            print_comparison(comparison)
        if trend is not None:
            print_trend(trend)
    if html is not None:
        from assay.report.html import write_html

        out = write_html(html, report, comparison=comparison, trend=trend, notices=notices, slices=sliced)
        console.print(f"HTML report: {out} ({out.stat().st_size / 1e6:.1f} MB)")
